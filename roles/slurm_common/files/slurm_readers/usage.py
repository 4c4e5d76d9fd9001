"""What a cluster used over a period (the typed task `usage`, the billing hook): CPU- and
GPU-seconds per day, per account and per user, from accounting's allocations (sacct -X -D:
every run of a requeued job counts, as sreport counts it)."""

from __future__ import annotations

from typing import Any

from .answers import integer
from .commands import text_rows
from .jobs import _tres, slurm_tres_gpus

DAY = 86400


def slurm_usage(output: str, start: int, end: int, now: int) -> dict[str, Any]:
    """Usage between `start` and `end` (epoch seconds at UTC midnights), from a `usage` answer
    printed with SLURM_TIME_FORMAT=%s. Each allocation counts from its start to its end (now
    while it runs), clipped to the period and to each day: its allocated CPUs and GPUs times
    those seconds. Returns {days: [{cpu_seconds, gpu_seconds, gpu_seconds_by_type}],
    accounts: {account: {user: figures}}, allocations}; days in order from `start`."""
    days = [_figures() for _ in range((end - start) // DAY)]
    accounts: dict[str, dict[str, dict[str, Any]]] = {}
    counted = 0
    last = min(end, now)
    for _job_id, user, account, tres, began, ended in text_rows(output, "usage"):
        first = integer(began)
        if first is None:
            continue  # never started
        until = integer(ended) or now
        first, until = max(first, start), min(until, last)
        if until <= first:
            continue
        counts = _tres(tres)
        cpus = integer(counts.get("cpu")) or 0
        gpus = slurm_tres_gpus(tres)
        typed = {
            key.split(":", 1)[1]: integer(value) or 0
            for key, value in counts.items()
            if key.startswith("gres/gpu:")
        }
        mine = accounts.setdefault(account or "", {}).setdefault(user or "", _figures())
        counted += 1
        day = (first - start) // DAY
        while first < until:
            boundary = min(until, start + (day + 1) * DAY)
            seconds = boundary - first
            for figures in (days[day], mine):
                figures["cpu_seconds"] += cpus * seconds
                figures["gpu_seconds"] += gpus * seconds
                for kind, count in typed.items():
                    by_type = figures["gpu_seconds_by_type"]
                    by_type[kind] = by_type.get(kind, 0) + count * seconds
            first, day = boundary, day + 1
    return {"days": days, "accounts": accounts, "allocations": counted}


def _figures() -> dict[str, Any]:
    return {"cpu_seconds": 0, "gpu_seconds": 0, "gpu_seconds_by_type": {}}
