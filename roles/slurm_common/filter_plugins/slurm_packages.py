"""slurm_common's filters for one apt transaction per host (`slurm_install_plan`), and for the
pinned suites a catalog version's Slurm comes from (`slurm_apt_source_files`).

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


def slurm_apt_source_files(
    repositories: list[dict[str, Any]], sources: str, preferences: str
) -> list[dict[str, Any]]:
    """slurm_files' entries for the site's pinned suites: one deb822 file at `sources` with a
    stanza per suite, and one apt preferences file at `preferences` that pins every package of
    each suite at -1 (never installed) but its named packages at 990 (installed, and preferred
    over the host's own suites). apt matches a pin by the suite's codename (Release's
    Codename, `n=`)."""
    stanzas, pins = [], []
    for repository in repositories:
        stanza = [
            "Types: deb",
            f"URIs: {repository['uri']}",
            f"Suites: {repository['suite']}",
            f"Components: {' '.join(repository.get('components') or ['main'])}",
            f"Signed-By: {repository['signed_by']}",
        ]
        if not repository.get("check_valid_until", True):
            stanza.append("Check-Valid-Until: no")
        stanzas.append("\n".join(stanza))
        release = f"Pin: release n={repository['suite']}"
        pins.append(f"Package: *\n{release}\nPin-Priority: -1")
        pins.append(f"Package: {' '.join(repository['packages'])}\n{release}\nPin-Priority: 990")
    managed = "# Managed by slurm-app-bundle: the site's source of this release's Slurm.\n"
    return [
        {"path": sources, "content": managed + "\n\n".join(stanzas) + "\n", "mode": "0644"},
        {"path": preferences, "content": managed + "\n\n".join(pins) + "\n", "mode": "0644"},
    ]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "slurm_install_plan": slurm_install_plan,
            "slurm_apt_source_files": slurm_apt_source_files,
        }
