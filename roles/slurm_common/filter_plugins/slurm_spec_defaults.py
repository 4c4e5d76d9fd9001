"""slurm_common's filter that gives a role's mapping or list variable the defaults its argument
specs declare for the fields inside it (`slurm_spec_defaults`): a template reads the value
whole, and each default stays written once, in the role's meta/argument_specs.yml (the
manifest's are checked against those by tests/unit/test_defaults.py)."""

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROLES = Path(__file__).resolve().parents[2]


@cache
def option_spec(role: str, variable: str) -> dict[str, Any]:
    """`variable`'s spec in `role`'s argument specs (any entry point that takes it: they share
    one anchor)."""
    specs = yaml.safe_load((ROLES / role / "meta" / "argument_specs.yml").read_text())
    for entry_point in specs["argument_specs"].values():
        option = (entry_point.get("options") or {}).get(variable)
        if option is not None:
            return option
    raise ValueError(f"slurm_spec_defaults: {role} takes no {variable!r}")


def with_defaults(value: Any, spec: dict[str, Any]) -> Any:
    """`value` with the defaults of `spec`'s options filled in where it leaves them out, in a
    mapping and in each mapping of a list, at every depth. An empty mapping stays empty: the
    specs say "empty - none" of a mapping such as an OIDC client."""
    options = spec.get("options")
    if not options:
        return value
    if spec.get("type") == "list" and isinstance(value, list):
        return [_fields_filled(item, options) if isinstance(item, dict) else item for item in value]
    if spec.get("type") == "dict" and isinstance(value, dict) and value:
        return _fields_filled(value, options)
    return value


def _fields_filled(value: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    filled = dict(value)
    for name, option in options.items():
        if name not in filled and "default" in option:
            filled[name] = copy.deepcopy(option["default"])
        if name in filled:
            filled[name] = with_defaults(filled[name], option)
    return filled


def slurm_spec_defaults(value: Any, role: str, variable: str) -> Any:
    """The value of `role`'s `variable` with its fields' declared defaults filled in."""
    return with_defaults(value, option_spec(role, variable))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"slurm_spec_defaults": slurm_spec_defaults}
