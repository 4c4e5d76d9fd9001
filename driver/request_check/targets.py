"""The operation's target, targets and replacement: allocations of the request, each where
the operation's manifest entry says it acts."""

from uuid import UUID

from driver.documents import LinePath
from driver.models.manifest import Operation as OperationSpec
from driver.models.manifest import OperationTarget
from driver.request_check.rules import Rules


def target(rules: Rules) -> None:
    operation = rules.request.operation
    spec = rules.version.operation(operation.type)
    assert spec is not None  # checked by the schema layer
    _replacement(rules, spec)
    if operation.target is not None and operation.targets is not None:
        rules.add(
            "target-unexpected",
            ("operation", "targets"),
            "give either target or targets, not both",
        )
        return
    named = operation.target or operation.targets
    if spec.target is OperationTarget.NONE:
        if named is not None:
            field = "target" if operation.target is not None else "targets"
            rules.add(
                "target-unexpected",
                ("operation", field),
                f"{operation.type} acts on the whole instance",
            )
        return
    # One spelling per operation: the adapter reads the one the manifest gives, so a request
    # in the other spelling would run without its target (replace_controller with targets put
    # both controllers in the controller's group).
    spelling = "targets" if spec.max_targets > 1 else "target"
    if named is None:
        rules.add(
            "target-missing",
            ("operation", spelling),
            f"{operation.type} needs the allocation it acts on",
        )
        return
    if (operation.targets is not None) != (spelling == "targets"):
        wrong = "target" if spelling == "targets" else "targets"
        rules.add(
            "target-unexpected",
            ("operation", wrong),
            f"{operation.type} names "
            + (
                f"its allocations in operation.targets (up to {spec.max_targets})"
                if spelling == "targets"
                else "its one allocation in operation.target"
            ),
        )
        return
    if operation.targets is None:
        _one_target(rules, spec, ("operation", "target", "allocation_id"), operation.target_ids[0])
        return
    if len(operation.targets) > spec.max_targets:
        rules.add(
            "target-unexpected",
            ("operation", "targets"),
            f"{operation.type} acts on at most {spec.max_targets} allocation(s) per "
            f"request, got {len(operation.targets)}",
        )
        return
    seen: set[UUID] = set()
    for index, allocation_id in enumerate(operation.target_ids):
        path: LinePath = ("operation", "targets", index, "allocation_id")
        if allocation_id in seen:
            rules.add("duplicate-key", path, f"allocation {allocation_id} is named twice")
            continue
        seen.add(allocation_id)
        _one_target(rules, spec, path, allocation_id)


def _replacement(rules: Rules, spec: OperationSpec) -> None:
    """The new allocation that takes a target member's place: named where the operation
    takes one, not already backing another component, never the target itself."""
    operation = rules.request.operation
    if not spec.replacement:
        if operation.replacement is not None:
            rules.add(
                "target-unexpected",
                ("operation", "replacement"),
                f"{operation.type} takes no replacement",
            )
        return
    if operation.replacement is None:
        rules.add(
            "target-missing",
            ("operation", "replacement"),
            f"{operation.type} needs the new allocation that takes the target's place",
        )
        return
    path: LinePath = ("operation", "replacement", "allocation_id")
    allocation_id = operation.replacement.allocation_id
    if allocation_id in operation.target_ids:
        rules.add("target-invalid", path, "the replacement is the target itself")
        return
    joining = spec.model_copy(update={"target": OperationTarget.NEW_ALLOCATION})
    _one_target(rules, joining, path, allocation_id)


def _one_target(rules: Rules, spec: OperationSpec, path: LinePath, allocation_id: UUID) -> None:
    if allocation_id not in rules.allocation_ids:
        rules.add(
            "unknown-allocation",
            path,
            f"allocation {allocation_id} is not in the request's allocations",
        )
        return
    on_target = {m.component_key for m in rules.request.members if m.allocation_id == allocation_id}
    wanted = spec.target_component_key or ""
    if spec.target is OperationTarget.MEMBER and wanted not in on_target:
        rules.add(
            "target-invalid",
            path,
            f"no {wanted} member runs on allocation {allocation_id}",
        )
    if spec.target is OperationTarget.NEW_ALLOCATION and on_target and wanted not in on_target:
        rules.add(
            "target-invalid",
            path,
            f"allocation {allocation_id} already backs {', '.join(sorted(on_target))}",
        )
