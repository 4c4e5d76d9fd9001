"""The portals attached to a cluster that replace_controller carries along: the platform
passes them in linked_instances (their placement names the cluster), and the replacement
points each one's Slurm client at the new controller (open_ondemand's follow.yml), so that
the portal's users go on submitting without a redeploy."""

from collections.abc import Iterator
from typing import Any

from driver.events import connection_reason
from driver.inventory import Inventory
from driver.models.request import Allocation, LinkedInstance, MemberStatus, OperationRequest

PORTAL_GROUP = "slurm_app_portals"

# Where a portal lives on the allocation the replacement leaves: it went with the controller.
COHOSTED = (
    "co-hosted on the replaced controller's allocation, which the replacement leaves: deploy "
    "the portal again with host_allocation_id the new controller's allocation"
)


def _portals(request: OperationRequest) -> Iterator[tuple[LinkedInstance, Allocation, bool]]:
    """Each attached portal's live member: its instance, its allocation, and whether that is
    the replaced controller's (co-hosted)."""
    target = request.operation.target
    for linked in request.linked_instances:
        for member in linked.members:
            allocation = request.allocation(member.allocation_id)
            if member.status is MemberStatus.REMOVED or allocation is None:
                continue
            yield linked, allocation, target is not None and allocation.id == target.allocation_id


def portal_hosts(request: OperationRequest, inventory: Inventory) -> None:
    """Each companion portal's host joins the inventory in PORTAL_GROUP, with the portal's
    instance id. A request's key opens every allocation it lists, the portals' too."""
    for linked, allocation, cohosted in _portals(request):
        if not cohosted:
            inventory.add(allocation, [PORTAL_GROUP], request.credentials.ssh_private_key_file)
            inventory.hosts[allocation.hostname]["slurm_app_portal_instance_id"] = str(linked.id)


def portals_detail(request: OperationRequest, reported: dict[str, Any]) -> list[dict[str, Any]]:
    """Per attached portal: whether its client now reaches the new controller, and why not
    (co-hosted on the lost allocation, its host did not answer, the re-pointing failed)."""
    followed = reported.get("slurm_app_portals_followed") or {}
    not_reached = reported.get("slurm_app_not_reached") or {}
    entries = []
    for linked, allocation, cohosted in _portals(request):
        host = allocation.hostname
        entry: dict[str, Any] = {"instance_id": str(linked.id), "host": host}
        if cohosted:
            entry |= {"followed": False, "reason": COHOSTED}
        elif host in not_reached:
            entry |= {"followed": False, "reason": connection_reason(str(not_reached[host]))}
        elif host in followed:
            entry |= followed[host]
        else:
            entry |= {"followed": False, "reason": "the replacement ended before it"}
        entries.append(entry)
    return entries


def without_portals(reported: dict[str, Any], inventory: Inventory) -> dict[str, Any]:
    """The run's report less the portals among the hosts not reached: a portal is reported
    under `portals`, never as a host left uncleaned."""
    not_reached = reported.get("slurm_app_not_reached")
    portals = set(inventory.groups.get(PORTAL_GROUP, []))
    if not not_reached or not portals & set(not_reached):
        return reported
    return {
        **reported,
        "slurm_app_not_reached": {h: r for h, r in not_reached.items() if h not in portals},
    }
