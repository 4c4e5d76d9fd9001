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


def slurm_reads_state_of(reader: str, writer: str) -> bool:
    """Whether slurmctld and slurmdbd of version `reader` take over the saved state and the
    accounting database `writer`'s left: the same major release or one of the two before it
    (three before it from 24.11, Slurm's upgrade guide), never a newer one."""
    try:
        distance = _release_index(reader) - _release_index(writer)
    except ValueError:
        return False
    window = 3 if slurm_version_tuple(reader)[:2] >= (24, 11) else 2
    return 0 <= distance <= window
