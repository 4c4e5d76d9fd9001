"""slurm_common's filter for one apt transaction per host (`slurm_install_plan`).

Each role on a host names what it installs as a set: its packages, the units that must not
start before the role configures them (masked while the set installs) and whether the set is
optional (monitoring: a failure of its packages must not stop the cluster), and what it
removes where the host holds it (`absent`: the worker's runtimes no longer asked for). The plan
installs only what dpkg does not already hold, and masks only the units of the sets that have
something to install: masking a running daemon's unit on a re-run would change the host for
nothing. The same dpkg query tells the roles which of their `absent` packages are there, so
that a role removes nothing (and runs no apt) where there is nothing to remove.
"""

from collections.abc import Iterable
from typing import Any


def installed_packages(dpkg_lines: Iterable[str]) -> set[str]:
    """`dpkg-query -W -f '${Package} ${db:Status-Abbrev}\\n'` lines: the installed names."""
    return {
        fields[0] for line in dpkg_lines if len(fields := line.split()) >= 2 and fields[1] == "ii"
    }


def slurm_install_plan(
    package_sets: list[dict[str, Any]], dpkg_lines: Iterable[str], with_optional: bool = True
) -> dict[str, list[str]]:
    """packages: what to install; units: what to mask meanwhile; wanted: every package of the
    chosen sets (what the host holds once the install succeeds); held: the packages of every
    set's `absent` list that the host holds."""
    installed = installed_packages(dpkg_lines)
    chosen = [pset for pset in package_sets if with_optional or not pset.get("optional", False)]
    wanted = list(dict.fromkeys(p for pset in chosen for p in pset.get("packages") or []))
    unfinished = [pset for pset in chosen if set(pset.get("packages") or []) - installed]
    return {
        "packages": [p for p in wanted if p not in installed],
        "units": list(dict.fromkeys(u for pset in unfinished for u in pset.get("units") or [])),
        "wanted": wanted,
        "held": [
            p
            for p in dict.fromkeys(p for pset in package_sets for p in pset.get("absent") or [])
            if p in installed
        ],
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"slurm_install_plan": slurm_install_plan}
