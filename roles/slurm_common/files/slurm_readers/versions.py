"""Slurm versions as daemons print them, and as tuples to compare."""

from __future__ import annotations

import re


def slurm_version_tuple(version: str) -> tuple[int, ...]:
    """'24.11.5' (or 'slurm-wlm 24.11.5', or 'slurm 22.05.8') -> (24, 11, 5)."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if not match:
        raise ValueError(f"not a Slurm version: {version!r}")
    return tuple(int(part) for part in match.groups(default="0"))


def slurm_version(output: str) -> str:
    """'slurm-wlm 24.11.5' (any daemon's -V) -> '24.11.5'; '22.05.8' keeps its zero."""
    match = re.search(r"\d+\.\d+(?:\.\d+)?", str(output))
    if not match:
        raise ValueError(f"not a Slurm version: {output!r}")
    return match.group(0)


# Major releases before the six-month cycle, in order; from 24.05 they come each May and
# November.
_NINE_MONTH_MAJORS = ((20, 2), (20, 11), (21, 8), (22, 5), (23, 2), (23, 11))


def _release_index(version: str) -> int:
    year, month = slurm_version_tuple(version)[:2]
    if (year, month) in _NINE_MONTH_MAJORS:
        return _NINE_MONTH_MAJORS.index((year, month))
    if year >= 24 and month in (5, 11):
        return len(_NINE_MONTH_MAJORS) + 2 * (year - 24) + (month == 11)
    raise ValueError(f"not a Slurm major release this bundle knows: {version!r}")


def _state_window(reader: str) -> int:
    return 3 if slurm_version_tuple(reader)[:2] >= (24, 11) else 2


def slurm_reads_state_of(reader: str, writer: str) -> bool:
    """Whether slurmctld and slurmdbd of version `reader` take over the saved state and the
    accounting database `writer`'s left: the same major release or one of the two before it
    (three before it from 24.11, Slurm's upgrade guide), never a newer one."""
    try:
        distance = _release_index(reader) - _release_index(writer)
    except ValueError:
        return False
    return 0 <= distance <= _state_window(reader)


def _major(version: str) -> str:
    year, month = slurm_version_tuple(version)[:2]
    return f"{year}.{month:02d}"


def slurm_upgrade_refusal(running: str, candidate: str) -> str:
    """Why Slurm `running` cannot be upgraded in place to `candidate`, naming both and the
    window; '' when it can (the same version is no upgrade of Slurm and is allowed)."""
    if slurm_version_tuple(candidate) < slurm_version_tuple(running):
        return (
            f"Slurm {candidate} is older than the running {running}: no downgrade, an older "
            "Slurm cannot read the state files and the database a newer one wrote"
        )
    if slurm_reads_state_of(candidate, running):
        return ""
    try:
        index = _release_index(candidate)
        window = _state_window(candidate)
        majors = [
            _major(m) for m in _majors_between(index - window, index) if _release_index(m) < index
        ]
    except ValueError:
        return (
            f"Slurm {candidate} is not a release this bundle knows the upgrade rules of; "
            f"{running} runs"
        )
    named = _major(candidate) + ("" if candidate == _major(candidate) else f" ({candidate})")
    return (
        f"Slurm {named} takes the state and the accounting database "
        f"of {', '.join(majors)} and its own release; {running} is further back, and an "
        "upgrade from it in one step would lose the queue and could not convert the database: "
        "upgrade to one of those first"
    )


def _majors_between(first: int, last: int) -> list[str]:
    """The major releases with index first..last, as 'year.month' strings."""
    names = [f"{y}.{m:02d}" for y, m in _NINE_MONTH_MAJORS]
    year = 24
    while len(names) <= last:
        names += [f"{year}.05", f"{year}.11"]
        year += 1
    return names[max(first, 0) : last + 1]


def slurm_packages(installed: str, policy: str) -> dict[str, dict[str, str | None]]:
    """Each package's installed version (`dpkg-query -W -f '${Package} ${Version}
    ${db:Status-Status}\\n'`) and the one its sources offer (`apt-cache policy`): name to
    {installed, candidate}, None where there is none."""
    packages: dict[str, dict[str, str | None]] = {}
    for line in installed.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "installed":
            packages.setdefault(fields[0], {"installed": None, "candidate": None})
            packages[fields[0]]["installed"] = fields[1]
    name = None
    for line in policy.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            name = line[:-1]
        elif name and line.strip().startswith("Candidate:"):
            candidate = line.split(":", 1)[1].strip()
            entry = packages.setdefault(name, {"installed": None, "candidate": None})
            entry["candidate"] = None if candidate == "(none)" else candidate
    return packages


# A version line of `apt-cache policy`'s version table: " *** 24.11.5-4+deb13u1 500" (the one
# installed) or "     26.05.5-1 990"; the sources under it are indented further.
_TABLE_VERSION = re.compile(r"^ (?:\*\*\*| {3}) (\S+) -?\d+$")


def slurm_offered(policy: str) -> dict[str, list[str]]:
    """Every version `apt-cache policy` lists for each package (its version table: what the
    host's sources offer, pinned away or not, and the one installed), name to versions."""
    offered: dict[str, list[str]] = {}
    name = None
    for line in policy.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            name = line[:-1]
            offered[name] = []
        elif name and (match := _TABLE_VERSION.match(line)):
            offered[name].append(match.group(1))
    return offered


def slurm_downgrade_packages(
    packages: dict[str, dict[str, str | None]], offered: dict[str, list[str]], version: str
) -> dict[str, list[str]]:
    """What puts a member's Slurm back to `version` (a rollback of an upgrade to another Slurm):
    `install`, 'name=version' for each installed Slurm package of another version, taking the
    newest build of `version` its sources offer; `missing`, the packages whose sources offer
    no build of it."""
    plan: dict[str, list[str]] = {"install": [], "missing": []}
    for name, package in sorted(packages.items()):
        installed = package.get("installed")
        if not installed or slurm_version(installed) == version:
            continue
        builds = [v for v in offered.get(name, []) if slurm_version(v) == version]
        if builds:
            plan["install"].append(f"{name}={max(builds, key=_debian_order)}")
        else:
            plan["missing"].append(name)
    return plan


def _debian_order(version: str) -> tuple:
    """A sort key for Debian versions of one Slurm release: their revisions compared by their
    numbers ('4+deb13u1' before '4+deb13u2'), which is all that tells two builds apart."""
    return tuple(int(part) for part in re.findall(r"\d+", version))
