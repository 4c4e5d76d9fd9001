#!/usr/bin/env python3
"""Write each role's README.md from its meta/argument_specs.yml, as ansible-doc reads it.

A role's entry points and variables are declared once, in its argument specs (which Ansible
also validates a role's arguments against); the README a reader finds in the role's folder is
made from them: the role's description (meta/main.yml), each entry point with what it does,
and each variable with its type, default, choices and the entry points that take it.
`--check` changes nothing and exits 1 when a README differs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
ROLES = ROOT / "roles"


def role_names() -> list[str]:
    return sorted(path.parent.parent.name for path in ROLES.glob("*/meta/argument_specs.yml"))


def specs(names: list[str]) -> dict[str, Any]:
    """ansible-doc's reading of the roles' argument specs: what `ansible-doc -t role` shows."""
    ansible_doc = Path(sys.executable).parent / "ansible-doc"
    shown = subprocess.run(
        [str(ansible_doc), "-t", "role", "-r", str(ROLES), "--json", *names],
        capture_output=True,
        text=True,
        check=True,
    )
    read: dict[str, Any] = json.loads(shown.stdout)
    return read


def _cell(text: str) -> str:
    """One markdown table cell: one line, its bars escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(value: Any) -> str:
    if value is None:
        return ""
    shown = value if isinstance(value, str) else json.dumps(value)
    return f"`{_cell(shown)}`" if shown != "" else '`""`'


def readme(name: str, spec: dict[str, Any]) -> str:
    meta = yaml.safe_load((ROLES / name / "meta" / "main.yml").read_text())
    entry_points: dict[str, Any] = spec["entry_points"]
    lines = [
        f"# {name}",
        "",
        meta["galaxy_info"]["description"],
        "",
        "Made from `meta/argument_specs.yml` by `scripts/role_readmes.py` (a test keeps it "
        "current): edit the specs, then run it. What each role is for and who uses it: "
        "[roles/README.md](../README.md).",
        "",
        "## Entry points",
        "",
        "| entry point | what it does |",
        "|---|---|",
    ]
    lines += [
        f"| `{point}` | {_cell(entry_points[point].get('short_description', ''))} |"
        for point in sorted(entry_points, key=lambda point: (point != "main", point))
    ]
    variables: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for point in sorted(entry_points):
        for variable, option in (entry_points[point].get("options") or {}).items():
            variables.setdefault(variable, (option, []))[1].append(point)
    lines += [
        "",
        "## Variables",
        "",
        "| variable | type | default | entry points | what it is |",
        "|---|---|---|---|---|",
    ]
    for variable in sorted(variables):
        option, points = variables[variable]
        kind = option.get("type", "str")
        if option.get("elements"):
            kind += f" of {option['elements']}"
        description = option.get("description", "")
        if isinstance(description, list):
            description = " ".join(description)
        if option.get("choices"):
            description += " One of: " + ", ".join(f"`{c}`" for c in option["choices"]) + "."
        default = "required" if option.get("required") else _default(option.get("default"))
        lines.append(
            f"| `{variable}` | {kind} | {default} | {', '.join(points)} | {_cell(description)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a README differs")
    check = parser.parse_args(argv).check
    names = role_names()
    stale = []
    for name, spec in sorted(specs(names).items()):
        path = ROLES / name / "README.md"
        wanted = readme(name, spec)
        if path.is_file() and path.read_text() == wanted:
            continue
        stale.append(path.relative_to(ROOT))
        if not check:
            path.write_text(wanted)
    for path in stale:
        print(f"{path}: {'differs from the argument specs' if check else 'written'}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
