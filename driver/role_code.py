"""The one place the driver loads the roles' own Python.

A rule the roles apply on a host (a user name slurm_common refuses, an account reference
slurm_controller's slurm_sacctmgr refuses) is applied to a request from the same file, so the
driver refuses before any host is reached and the two can never disagree. Loaded by path: the
files are Ansible plugins and module_utils, not a package of the driver; each is loaded once
per process.
"""

import importlib.util
from functools import cache
from types import ModuleType

import yaml

from driver.catalog import bundle_root


def role_filters(name: str) -> ModuleType:
    """A filter-plugin module of slurm_common: the roles' code, shared rather than repeated."""
    return role_code("slurm_common", "filter_plugins", name)


def controller_rules(name: str) -> ModuleType:
    """A module_utils file of slurm_controller: the rules one of its modules applies."""
    return role_code("slurm_controller", "module_utils", name)


@cache
def role_code(role: str, folder: str, name: str) -> ModuleType:
    """roles/<role>/<folder>/<name>.py as a module."""
    path = bundle_root() / "roles" / role / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{role}_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def reserved_accounts() -> tuple[list[str], list[str], int]:
    """slurm_common's reserved names, reserved prefixes and first login id (its vars/main.yml)."""
    role_vars = yaml.safe_load(
        (bundle_root() / "roles" / "slurm_common" / "vars" / "main.yml").read_text()
    )
    return (
        role_vars["__slurm_common_reserved_accounts"],
        role_vars["__slurm_common_reserved_account_prefixes"],
        role_vars["__slurm_common_first_login_id"],
    )
