"""How Slurm's answers are read: its JSON documents and the values in them."""

from __future__ import annotations

import json
from typing import Any

_NULLS = (None, "", "(null)", "N/A", "None", "none", "None assigned")


def is_json(output: str) -> bool:
    return output.lstrip().startswith("{")


def json_records(output: str, key: str) -> list[dict[str, Any]]:
    document = json.loads(output)
    errors = [e for e in document.get("errors") or [] if e]
    if errors:
        raise ValueError(f"Slurm reported errors: {errors}")
    return list(document.get(key) or [])


def number(value: Any) -> Any:
    """23.02+ wrap numbers as {set, infinite, number}; an unset one is None."""
    if isinstance(value, dict) and "number" in value:
        if value.get("infinite"):
            return "infinite"
        return value["number"] if value.get("set", True) else None
    return value


def integer(value: Any) -> int | None:
    value = number(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def first_state(value: Any) -> str:
    """A state: 'RUNNING' (22.05) or ['RUNNING'] (23.02+)."""
    if isinstance(value, list):
        return str(value[0]).upper() if value else ""
    return str(value).upper()


def none_if_null(value: Any) -> Any:
    return None if value in _NULLS else value
