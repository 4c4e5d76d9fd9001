"""What a run needs, computed once before it starts: the playbook, the inventory, the adapter."""

from dataclasses import dataclass
from pathlib import Path

import yaml

from driver.apps import adapter_for
from driver.apps.base import AppAdapter
from driver.catalog import bundle_root
from driver.inventory import Inventory, build_inventory
from driver.models.manifest import Version
from driver.models.request import OperationRequest
from driver.site import load_site


def count_plays(playbook: Path) -> int:
    plays = yaml.safe_load(playbook.read_text()) or []
    return len(plays) if isinstance(plays, list) else 1


def with_lease(inventory: Inventory, group: str) -> Inventory:
    """`inventory` with the host that keeps the instance's lease (the first of `group`, the
    app's; "" for a read-only operation, which takes none) and the lease's settings."""
    holders = inventory.groups.get(group, [])[:1] if group else []
    if holders:
        lease = load_site().lease
        inventory.groups["slurm_app_lease_holder"] = holders
        inventory.group_vars["slurm_common_lease"] = {
            "driver": lease.driver(),
            "expiry_s": lease.expiry_s,
        }
    return inventory


@dataclass
class RunPlan:
    """Everything a run needs, computed once (the text progress reads its size from it)."""

    request: OperationRequest
    version: Version
    adapter: AppAdapter
    playbook: Path
    read_only: bool
    inventory: Inventory

    @classmethod
    def of(cls, request: OperationRequest, version: Version) -> "RunPlan":
        spec = version.operation(request.operation.type)
        assert spec is not None  # the validator checked the operation exists
        adapter = adapter_for(request.instance.app_slug)
        return cls(
            request=request,
            version=version,
            adapter=adapter,
            playbook=bundle_root() / spec.playbook,
            read_only=spec.read_only,
            inventory=with_lease(
                build_inventory(request, version, adapter.inventory_vars),
                adapter.lease_group if not spec.read_only else "",
            ),
        )

    @property
    def plays(self) -> int:
        return count_plays(self.playbook) if self.playbook.is_file() else 0
