"""Linked instances (a portal's cluster): each checked like the instance itself."""

from uuid import UUID

from driver.apps import adapter_for
from driver.catalog import load_entry
from driver.documents import LinePath
from driver.models.request import LinkedInstance, MemberStatus, OperationRequest
from driver.request_check.members import component_counts, second_member
from driver.request_check.rules import Rules
from driver.schema_check import schema_findings


def linked_instances(rules: Rules) -> bool:
    """Each linked instance is checked like the instance itself: referenced by the
    placement (or attached to the instance, where the operation carries those), of the
    project, its app and version known, its config valid under its own schema and rules, its
    members of known components in the counts its manifest allows, on allocations of this
    request (so of this project). False: a linked config failed its schema (an app's rules,
    which read it, are not run)."""
    request = rules.request
    referenced: set[UUID] = set()
    for reference in rules.version.instance_references:
        raw = request.instance.placement_intent.get(reference.field)
        if raw is None:
            continue
        referenced.add(UUID(raw))
        match = next((i for i in request.linked_instances if i.id == UUID(raw)), None)
        if match is None or match.app_slug != reference.app_slug:
            rules.add(
                "linked-instance-missing",
                ("instance", "placement_intent", reference.field),
                f"no {reference.app_slug} instance {raw} in linked_instances",
            )
    rules.duplicates([i.id for i in request.linked_instances], ("linked_instances",), "id")
    configs_valid = True
    adapter = adapter_for(request.instance.app_slug)
    carries_attached = request.operation.type in adapter.carries_attached
    for index, linked in enumerate(request.linked_instances):
        base: LinePath = ("linked_instances", index)
        if linked.id not in referenced and not (carries_attached and attached(request, linked)):
            rules.add(
                "linked-instance-unexpected",
                (*base, "id"),
                "expected only instances the placement intent references"
                + (
                    f", or instances attached to this one (their placement_intent naming "
                    f"{request.instance.id})"
                    if carries_attached
                    else ""
                ),
            )
        if linked.project_id != request.project_id:
            rules.add(
                "tenant-boundary",
                (*base, "project_id"),
                f"linked instance {linked.id} belongs to project {linked.project_id!r}, "
                f"the instance to {request.project_id!r}",
            )
        if linked.id == request.instance.id:
            rules.add(
                "linked-instance-unexpected",
                (*base, "id"),
                "expected another instance than the request's own",
            )
        configs_valid &= linked_instance(rules, linked, base)
    return configs_valid


def attached(request: OperationRequest, linked: LinkedInstance) -> bool:
    """Whether `linked` is attached to the request's instance: its catalog version declares a
    reference to the request's app, and its placement names the request's instance there."""
    loaded = load_entry(linked.app_slug)
    version = loaded.entry.reading(linked.version) if loaded else None
    return version is not None and any(
        reference.app_slug == request.instance.app_slug
        and str(linked.placement_intent.get(reference.field)) == str(request.instance.id)
        for reference in version.instance_references
    )


def linked_instance(rules: Rules, linked: LinkedInstance, base: LinePath) -> bool:
    """One linked instance's rules; False when its config failed its schema."""
    loaded = load_entry(linked.app_slug)
    if loaded is None:
        rules.add("unknown-app", (*base, "app_slug"), f"no catalog entry {linked.app_slug!r}")
        return True
    version = loaded.entry.reading(linked.version)
    if version is None:
        rules.add(
            "unknown-version",
            (*base, "version"),
            f"{linked.app_slug} has no version {linked.version}",
        )
        return True
    config_findings = schema_findings(
        rules.doc, version.config_schema, linked.config, (*base, "config"), "config"
    )
    rules.findings += config_findings
    if not config_findings:
        for violation in adapter_for(linked.app_slug).config_rules(
            linked.config, (*base, "config")
        ):
            rules.add(violation.code, violation.path, violation.message)
    live = []
    seen: set[tuple[str, UUID]] = set()
    for m_index, member in enumerate(linked.members):
        path: LinePath = (*base, "members", m_index)
        if version.component(member.component_key) is None:
            rules.add(
                "unknown-component",
                (*path, "component_key"),
                f"{linked.app_slug} has no component {member.component_key!r}",
            )
        if member.allocation_id not in rules.allocation_ids:
            rules.add(
                "unknown-allocation",
                (*path, "allocation_id"),
                f"allocation {member.allocation_id} is not in the request's allocations",
            )
        if member.status is not MemberStatus.REMOVED:
            live.append(member)
            second_member(rules, member, seen, path)
    rules.duplicates([m.member_id for m in linked.members], (*base, "members"), "member_id")
    component_counts(rules, version, live, (*base, "members"))
    return not config_findings
