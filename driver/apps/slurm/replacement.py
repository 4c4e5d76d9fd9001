"""The groups of an operation that puts a new allocation in a member's place (replace_worker,
replace_controller): which host is replaced, which replaces it, and where each plays."""

from uuid import UUID

from driver.inventory import Inventory
from driver.models.request import Member, MemberStatus, OperationRequest


def same_node_worker(request: OperationRequest, controller: UUID) -> Member | None:
    """The live worker member on the controller's allocation (same_node), if there is one."""
    return next(
        (
            m
            for m in request.members
            if m.component_key == "worker"
            and m.allocation_id == controller
            and m.status is not MemberStatus.REMOVED
        ),
        None,
    )


def replacement_groups(request: OperationRequest, inventory: Inventory) -> None:
    """slurm_app_replaced and slurm_app_replacement (replace_worker's plays tell the two
    workers apart by them). replace_controller's old controller is only the host to stop and
    clean: every play that needs the controller (or, same_node, a worker) finds the new one
    alone, and a same_node one's node is forgotten."""
    target, replacement = request.operation.target, request.operation.replacement
    if target is None or replacement is None:
        return
    hosts = inventory.allocation_hosts
    replaced = hosts[target.allocation_id]
    inventory.groups["slurm_app_replaced"] = [replaced]
    inventory.groups["slurm_app_replacement"] = [hosts[replacement.allocation_id]]
    if request.operation.type != "replace_controller":
        return
    for group in ("slurm_controller", "monitoring", "slurm_workers"):
        inventory.groups[group] = [h for h in inventory.groups.get(group, []) if h != replaced]
    # same_node: the old host's node is dropped from the restored definitions before the new
    # controller first starts (slurmctld requeues its jobs); the replacement joins as a worker
    same_node = same_node_worker(request, target.allocation_id) is not None
    inventory.group_vars["slurm_controller_restore_forget_nodes"] = [replaced] if same_node else []
