"""Placement -> an in-memory Ansible inventory for one operation.

Only the hosts the operation `touches` (manifest) enter the inventory: adding the 1,001st
worker puts two hosts in it, never the whole cluster.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import yaml

from driver.models.manifest import Version
from driver.models.request import Allocation, MemberStatus, OperationRequest


def apply_defaults(schema: dict[str, Any], value: Any) -> Any:
    """The instance as the roles see it: every default of the schema filled in, in objects and
    in each object of an array (a partition without max_time gets the schema's)."""
    if isinstance(value, list) and schema.get("type") == "array":
        items = schema.get("items")
        return [apply_defaults(items, item) for item in value] if isinstance(items, dict) else value
    if not isinstance(value, dict) or schema.get("type") != "object":
        return value
    filled = dict(value)
    for name, sub in (schema.get("properties") or {}).items():
        if name not in filled and isinstance(sub, dict) and "default" in sub:
            filled[name] = sub["default"]
        if name in filled and isinstance(sub, dict):
            filled[name] = apply_defaults(sub, filled[name])
    return filled


@dataclass
class Inventory:
    hosts: dict[str, dict[str, Any]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    group_vars: dict[str, Any] = field(default_factory=dict)
    # allocation id -> inventory host name, for mapping results back to members
    allocation_hosts: dict[UUID, str] = field(default_factory=dict)
    # host name -> its known_hosts lines: the only keys SSH accepts from it
    known_hosts: dict[str, list[str]] = field(default_factory=dict)
    # What a play keyword reads (upgrade's `serial`): Ansible templates play keywords before any
    # inventory variable exists, so these go as extra vars. Integers only: an extra var is
    # templated, and nothing from a request may be.
    extra_vars: dict[str, int] = field(default_factory=dict)

    def add(self, allocation: Allocation, groups: list[str], key_file: str) -> None:
        name = allocation.hostname
        self.hosts.setdefault(
            name,
            {
                "ansible_host": allocation.address,
                "ansible_port": allocation.ssh_port,
                "ansible_user": allocation.ssh_user,
                "ansible_ssh_private_key_file": key_file,
                # Mitogen names its process on the host after the driver's user, host name and
                # PID (`python3(mitogen:root@driverhost:571)`, in ps and in every journal
                # entry's _CMDLINE): nothing of the platform's hosts reaches a customer's
                "mitogen_mask_remote_name": True,
            },
        )
        self.allocation_hosts[allocation.id] = name
        where = (
            allocation.address
            if allocation.ssh_port == 22
            else f"[{allocation.address}]:{allocation.ssh_port}"
        )
        self.known_hosts[name] = [f"{where} {key}" for key in allocation.ssh_host_keys]
        for group in groups:
            members = self.groups.setdefault(group, [])
            if name not in members:
                members.append(name)

    def known_hosts_text(self) -> str:
        return "".join(f"{line}\n" for lines in self.known_hosts.values() for line in lines)

    def as_runner_inventory(self) -> dict[str, Any]:
        """The YAML-plugin shape (dicts), which ansible-runner passes through intact."""
        return {
            "all": {
                "hosts": self.hosts,
                "vars": self.group_vars,
                "children": {
                    g: {"hosts": {h: {} for h in hosts}} for g, hosts in self.groups.items()
                },
            }
        }


class Unsafe(str):
    """A string Ansible must never template (YAML `!unsafe`)."""


class _InventoryDumper(yaml.SafeDumper):
    pass


_InventoryDumper.add_representer(
    Unsafe, lambda dumper, value: dumper.represent_scalar("!unsafe", str(value), style="'")
)


_STR_TAG = "tag:yaml.org,2002:str"


def _unsafe(value: Any) -> Any:
    # ansible-core 2.19 resolves a `!unsafe` scalar's type from its text, quotes or not:
    # `!unsafe ''` loads as None and `!unsafe '30:00'` as the integer 1800 (YAML 1.1
    # sexagesimal). A string that YAML would read as anything but a string cannot hold a
    # template (no `{`), so it goes out plainly quoted and stays a string.
    if isinstance(value, str):
        resolved = yaml.resolver.Resolver().resolve(yaml.ScalarNode, value, (True, False))
        return Unsafe(value) if value and resolved == _STR_TAG else value
    if isinstance(value, dict):
        return {key: _unsafe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unsafe(item) for item in value]
    return value


def inventory_yaml(body: dict[str, Any]) -> str:
    """The inventory as Ansible reads it: every string value tagged `!unsafe`, so nothing that
    came with a request (hostnames, config values, users, paths) is ever evaluated as a
    template on the control node, whatever a manifest's patterns let through."""
    return yaml.dump(_unsafe(body), Dumper=_InventoryDumper, sort_keys=False)


def _live_members(request: OperationRequest) -> list[Any]:
    return [m for m in request.members if m.status is not MemberStatus.REMOVED]


def build_inventory(
    request: OperationRequest,
    version: Version,
    app_vars: Callable[[OperationRequest, Version, Inventory], None] | None = None,
) -> Inventory:
    spec = version.operation(request.operation.type)
    if spec is None:
        raise ValueError(f"operation {request.operation.type} is not in the manifest")
    inventory = Inventory()
    key_file = str(Path(request.credentials.ssh_private_key_file))
    groups_of = {c.key: c.inventory_groups for c in version.components}

    def touch(allocation_id: UUID, component: str) -> None:
        allocation = request.allocation(allocation_id)
        if allocation is None:  # validate-request guarantees every reference resolves
            raise ValueError(f"allocation {allocation_id} missing")
        inventory.add(allocation, groups_of.get(component, []), key_file)

    # The placement seeds the initial members; one of them that a remove took out stays out of
    # every later deploy, though the platform's placement intent may still name it.
    live = {m.allocation_id for m in _live_members(request)}
    gone = {m.allocation_id for m in request.members} - live
    # A host joins only the groups of the component it is touched as: adding a worker puts the
    # controller in the controller's groups even where it also runs slurmd (same_node).
    for touched in spec.touches:
        if touched == "placement":
            for binding in version.placement_bindings:
                raw = request.instance.placement_intent.get(binding.field)
                for value in (raw if binding.multiple else [raw]) if raw else []:
                    if UUID(value) not in gone:
                        touch(UUID(value), binding.component_key)
        elif touched == "target":
            if spec.target_component_key:
                for target in request.operation.target_ids:
                    touch(target, spec.target_component_key)
        elif touched == "replacement":
            replacement = request.operation.replacement
            if replacement is not None and spec.target_component_key:
                touch(replacement.allocation_id, spec.target_component_key)
        else:
            for member in _live_members(request):
                if member.component_key == touched:
                    touch(member.allocation_id, touched)
    # What every host's journal entries of this run carry (slurm_common's `journal`): `journalctl
    # SLURM_APP_CORRELATION_ID=...` (or SLURM_APP_TRACE_ID=...) on any host finds the
    # operation. A read-only operation writes no entry (journal entries are for operations that
    # change something).
    if not spec.read_only:
        inventory.group_vars["slurm_common_journal"] = {
            "operation_id": request.operation.id,
            "operation": request.operation.type,
            "correlation_id": request.correlation_id,
            "instance_id": str(request.instance.id),
            "app_slug": request.instance.app_slug,
            "trace_id": request.trace_id,
        }
    if app_vars is not None:
        app_vars(request, version, inventory)
    return inventory
