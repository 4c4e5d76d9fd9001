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
