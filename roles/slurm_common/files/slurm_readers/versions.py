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
