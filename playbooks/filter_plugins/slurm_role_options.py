"""The preflight's filter (beside the playbooks, which Ansible loads for them): every role's
main options, read once per process. The preflight checks each host's variables against
them in one step for the run; read per host, the five specs cost each host more control CPU
than the check."""

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

ROLES = ("slurm_common", "slurm_controller", "slurm_worker", "monitoring", "open_ondemand")


@functools.cache
def _options(roles_dir: str) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for role in ROLES:
        spec = yaml.safe_load((Path(roles_dir) / role / "meta" / "argument_specs.yml").read_text())
        options |= spec["argument_specs"]["main"]["options"]
    return options


def slurm_role_options(roles_dir: str) -> dict[str, Any]:
    """Every option of the bundle's roles' main entry points, by name (a copy: the caller's
    to change)."""
    return copy.deepcopy(_options(str(Path(roles_dir).resolve())))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"slurm_role_options": slurm_role_options}
