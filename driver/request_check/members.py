"""Allocations, placement and members: one tenant, one host per allocation, every member on an
allocation of the request in the place and counts its manifest allows."""

from collections.abc import Iterator
from typing import Any
from uuid import UUID

from driver.documents import LinePath
from driver.models.manifest import Version
from driver.models.request import Member, MemberStatus
from driver.request_check.addresses import canonical_address
from driver.request_check.rules import Rules


def bound_allocations(
    version: Version, placement: dict[str, Any]
) -> Iterator[tuple[LinePath, str, UUID]]:
    """(path, component_key, allocation id) for every allocation the placement binds."""
    for binding in version.placement_bindings:
        value = placement.get(binding.field)
        base: LinePath = ("instance", "placement_intent", binding.field)
        values = value if binding.multiple else [value]
        for index, raw in enumerate(values or []):
            if raw is None:
                continue
            path = (*base, index) if binding.multiple else base
            yield path, binding.component_key, UUID(raw)


def tenant_boundary(rules: Rules) -> None:
    for index, allocation in enumerate(rules.request.allocations):
        if allocation.project_id != rules.request.project_id:
            rules.add(
                "tenant-boundary",
                ("allocations", index, "project_id"),
                f"allocation {allocation.id} belongs to project "
                f"{allocation.project_id!r}, the instance to {rules.request.project_id!r}",
            )
    rules.duplicates([a.id for a in rules.request.allocations], ("allocations",), "id")
    # Hostnames become inventory names and Slurm NodeNames: they must be unique too, and
    # without case, as DNS and the hosts' resolvers compare them.
    rules.duplicates(
        [a.hostname.lower() for a in rules.request.allocations],
        ("allocations",),
        "hostname",
        " (host names are compared without case)",
    )
    rules.duplicates([m.member_id for m in rules.request.members], ("members",), "member_id")
    # One host, one allocation: a second allocation at the controller's address (or with
    # its host key) would run a worker's teardown on the controller. An allocation only removed
    # members held is history no run reaches: a new one may have its address (a cloud gives a
    # released address out again) or its host's keys.
    history = _history(rules)
    rules.duplicates(
        [
            f"history {a.id}" if a.id in history else canonical_address(a.address)
            for a in rules.request.allocations
        ],
        ("allocations",),
        "address",
    )
    owner: dict[str, int] = {}
    for index, allocation in enumerate(rules.request.allocations):
        if allocation.id in history:
            continue
        for k_index, key in enumerate(dict.fromkeys(allocation.ssh_host_keys)):
            first = owner.setdefault(key, index)
            if first != index:
                rules.add(
                    "duplicate-id",
                    ("allocations", index, "ssh_host_keys", k_index),
                    f"the host key is also allocations[{first}]'s: one host, one allocation",
                )


def _history(rules: Rules) -> set[UUID]:
    """The allocations every member of which is removed, and that the operation does not name
    (as its target or replacement)."""
    request = rules.request
    live = {m.allocation_id for m in request.members if m.status is not MemberStatus.REMOVED}
    named = set(request.operation.target_ids)
    if request.operation.replacement is not None:
        named.add(request.operation.replacement.allocation_id)
    return {m.allocation_id for m in request.members} - live - named


def placement(rules: Rules) -> dict[UUID, str]:
    bound: dict[UUID, str] = {}
    for path, component, allocation_id in bound_allocations(
        rules.version, rules.request.instance.placement_intent
    ):
        if allocation_id not in rules.allocation_ids:
            rules.add(
                "unknown-allocation",
                path,
                f"allocation {allocation_id} is not in the request's allocations",
            )
        if allocation_id in bound:
            rules.add(
                "allocation-reused",
                path,
                f"allocation {allocation_id} is already placed as {bound[allocation_id]}",
            )
        bound.setdefault(allocation_id, component)
    return bound


def members(rules: Rules, bound: dict[UUID, str]) -> None:
    # A replacement (replace_worker's, replace_controller's) takes its target's place: it is
    # counted once the operation made it a member, and the placement names it only after.
    replacement = rules.request.operation.replacement
    spec = rules.version.operation(rules.request.operation.type)
    taking_place = (
        (replacement.allocation_id, spec.target_component_key)
        if replacement is not None and spec is not None
        else None
    )
    live = [
        m
        for m in rules.request.members
        if m.status is not MemberStatus.REMOVED
        and (m.allocation_id, m.component_key) != taking_place
    ]
    seen: set[tuple[str, UUID]] = set()
    for index, member in enumerate(rules.request.members):
        base: LinePath = ("members", index)
        if rules.version.component(member.component_key) is None:
            known = ", ".join(c.key for c in rules.version.components)
            rules.add(
                "unknown-component",
                (*base, "component_key"),
                f"no component {member.component_key!r} (known: {known})",
            )
            continue
        if member.allocation_id not in rules.allocation_ids:
            rules.add(
                "unknown-allocation",
                (*base, "allocation_id"),
                f"allocation {member.allocation_id} is not in the request's allocations",
            )
        second_member(rules, member, seen, base)
        placed_as = bound.get(member.allocation_id)
        single = next(
            (
                b
                for b in rules.version.placement_bindings
                if b.component_key == member.component_key and not b.multiple
            ),
            None,
        )
        # a removed member stays in the request as history: a controller replace_controller
        # took out is no longer where the placement puts the controller
        if (
            single is not None
            and placed_as != member.component_key
            and member.status is not MemberStatus.REMOVED
            and (member.allocation_id, member.component_key) != taking_place
        ):
            rules.add(
                "member-mismatch",
                (*base, "allocation_id"),
                f"the placement puts the {member.component_key} on "
                f"{rules.request.instance.placement_intent.get(single.field)}",
            )
    component_counts(rules, rules.version, live, ("members",))


def second_member(
    rules: Rules, member: Member, seen: set[tuple[str, UUID]], base: LinePath
) -> None:
    """One member of a component per allocation (a same_node controller and worker share
    theirs, as two components)."""
    pair = (member.component_key, member.allocation_id)
    if pair in seen:
        rules.add(
            "allocation-reused",
            (*base, "allocation_id"),
            f"a second {member.component_key} member on allocation {member.allocation_id}",
        )
    seen.add(pair)


def component_counts(rules: Rules, version: Version, live: list[Member], path: LinePath) -> None:
    for c_index, component in enumerate(version.components):
        count = sum(1 for m in live if m.component_key == component.key)
        if count < component.min_count:
            rules.add(
                "member-mismatch",
                path,
                f"expected at least {component.min_count} {component.key} member(s), got {count}",
            )
        if component.max_count is not None and count > component.max_count:
            rules.add(
                "member-mismatch",
                path,
                f"expected at most {component.max_count} {component.key} member(s), "
                f"got {count} (see components[{c_index}])",
            )
