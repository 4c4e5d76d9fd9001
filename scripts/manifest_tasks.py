#!/usr/bin/env python3
"""Write the Slurm app manifest's typed tasks from their domains' declarations.

Each typed task is declared beside its handler, in roles/slurm_common/files/slurm_tasks/
<domain>.yaml; the catalog entry the platform reads stays one self-contained file, so its
`tasks` list is copied from those files, in the package's DOMAINS order, as written (comments
and layout kept). `--check` changes nothing and exits 1 when the manifest differs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "roles" / "slurm_common" / "files" / "slurm_tasks"
MANIFEST = ROOT / "manifests" / "slurm-reference" / "manifest.yaml"
# the first version's list; a later version takes it by its anchor
TASKS_KEY = "    tasks:"
ENTRY_INDENT = " " * 6


def domains() -> tuple[str, ...]:
    """The package's DOMAINS (its __init__ imports none of the handlers)."""
    sys.path.insert(0, str(PACKAGE.parent))
    from slurm_tasks import DOMAINS

    return DOMAINS


def entries(domain: str) -> list[str]:
    """A domain's declarations as manifest lines: its header comment left out, each line
    indented to the manifest's task entries."""
    lines = (PACKAGE / f"{domain}.yaml").read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith("- "))
    return [ENTRY_INDENT + line if line.strip() else "\n" for line in lines[first:]]


def written(manifest: str) -> str:
    """The manifest with its tasks list replaced by the domains' declarations."""
    lines = manifest.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith(TASKS_KEY)) + 1
    end = next(
        (
            i
            for i in range(start, len(lines))
            if lines[i].strip() and not lines[i].startswith(ENTRY_INDENT)
        ),
        len(lines),
    )
    declared = [line for domain in domains() for line in entries(domain)]
    return "".join(lines[:start] + declared + lines[end:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the manifest differs")
    check = parser.parse_args(argv).check
    current = MANIFEST.read_text()
    wanted = written(current)
    if wanted == current:
        return 0
    if check:
        print(f"{MANIFEST.relative_to(ROOT)}: tasks differ from slurm_tasks/*.yaml; run {__file__}")
        return 1
    MANIFEST.write_text(wanted)
    print(f"{MANIFEST.relative_to(ROOT)}: tasks written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
