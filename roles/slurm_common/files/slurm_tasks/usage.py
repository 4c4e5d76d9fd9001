"""The `usage` task (billing, and a user's own use): CPU and GPU hours per day, account and
user, from accounting."""

from __future__ import annotations

import time
from typing import Any

from slurm_readers.commands import slurm_command
from slurm_readers.job_detail import iso
from slurm_readers.usage import DAY, slurm_usage

from slurm_tasks import core
from slurm_tasks.core import TaskError, cluster_user

# The widest usage period one call reads.
USAGE_MAX_DAYS = 366


def day_start(text: str) -> int:
    """A YYYY-MM-DD day's first second, UTC."""
    return int(time.mktime(time.strptime(text, "%Y-%m-%d"))) - time.timezone


def usage_figures(figures: dict[str, Any]) -> dict[str, Any]:
    hours = {kind: round(s / 3600, 4) for kind, s in sorted(figures["gpu_seconds_by_type"].items())}
    return {
        "cpu_hours": round(figures["cpu_seconds"] / 3600, 4),
        "gpu_hours": round(figures["gpu_seconds"] / 3600, 4),
        "gpu_hours_by_type": hours,
        "cpu_seconds": figures["cpu_seconds"],
        "gpu_seconds": figures["gpu_seconds"],
    }


def task_usage(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    given = request["input"]
    # the platform's own call (billing) names no user; a user sees their own rows, an admin all
    asker = cluster_user(config, request["user"]) if request.get("user") else None
    try:
        start, end = day_start(given["from"]), day_start(given["to"]) + DAY
    except ValueError as error:
        raise TaskError("invalid_input", "from, to: not a day (YYYY-MM-DD)") from error
    if end <= start:
        raise TaskError("invalid_input", "to: before from")
    if end - start > USAGE_MAX_DAYS * DAY:
        raise TaskError("invalid_input", f"to: over {USAGE_MAX_DAYS} days after from")
    if not config["accounting"]:
        raise TaskError("accounting_off", "usage comes from accounting, which is off")
    now = int(time.time())
    # a day wider on each side: sacct reads -S and -E as local times; the reader clips
    local = [
        time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t)) for t in (start - DAY, end + DAY)
    ]
    usage = slurm_command("usage", config["version"], period=(local[0], local[1]))
    used = slurm_usage(core.slurm(**usage, epoch_times=True), start, end, now)
    accounts = []
    for account, users in sorted(used["accounts"].items()):
        rows = [
            {"user": name, **usage_figures(figures)}
            for name, figures in sorted(users.items())
            if asker is None or asker.get("admin") or name == asker["name"]
        ]
        if rows:
            total = {key: sum(r[key] for r in rows) for key in ("cpu_seconds", "gpu_seconds")}
            by_type: dict[str, int] = {}
            for figures in (users[r["user"]] for r in rows):
                for kind, seconds in figures["gpu_seconds_by_type"].items():
                    by_type[kind] = by_type.get(kind, 0) + seconds
            account_total = usage_figures({**total, "gpu_seconds_by_type": by_type})
            accounts.append({"account": account, **account_total, "users": rows})
    whole = asker is None or asker.get("admin")
    return {
        "from": given["from"],
        "to": given["to"],
        "time_zone": "UTC",
        "as_of": iso(now),
        "scope": "instance" if whole else "user",
        "allocations": used["allocations"],
        "days": [
            {
                "date": time.strftime("%Y-%m-%d", time.gmtime(start + index * DAY)),
                **usage_figures(day),
            }
            for index, day in enumerate(used["days"])
        ]
        if whole
        else [],
        "accounts": accounts,
    }


TASKS = {"usage": task_usage}
