"""Jobs: the queue (squeue) and the jobs that left it (sacct -X), as the same records."""

from __future__ import annotations

import re
import time
from typing import Any

from .answers import first_state, integer, is_json, json_records, none_if_null, number
from .commands import text_rows

# squeue --json also lists jobs that already ended (until MinJobAge); its text form only with
# `-t all` (slurm_command's `ended`).
_ENDED = {
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
}


def slurm_jobs(output: str, ended: bool = False) -> list[dict[str, Any]]:
    """One record per job in the queue: job_id, state, user, account, partition, nodes (count),
    cpus, gpus (held when running, asked for when pending), submit_time and start_time (epoch
    seconds; None while pending, whatever the scheduler estimates), time_limit (minutes; None:
    unlimited), node_list, reason, name. With `ended`, also the jobs that ended but slurmctld
    still holds (MinJobAge), which `squeue --json` lists and the text form when asked with
    `ended`. The text form prints times in the local time zone of the host that ran squeue:
    they are read in this process's."""
    if is_json(output):
        jobs = [_job_from_json(job) for job in json_records(output, "jobs")]
        return sorted((job for job in jobs if ended or job["state"] not in _ENDED), key=_job_order)
    jobs = []
    for row in text_rows(output, "jobs"):
        job_id, state, user, account, partition, nodes, cpus, tres = row[:8]
        submit_time, start_time, time_limit, node_list, reason, name = row[8:]
        jobs.append(
            {
                "job_id": job_id,
                "state": state.upper(),
                "user": user,
                "account": none_if_null(account),
                "partition": partition,
                "nodes": integer(nodes),
                "cpus": integer(cpus),
                "gpus": slurm_tres_gpus(tres),
                "submit_time": _local_time(submit_time),
                "start_time": _started(state.upper(), _local_time(start_time)),
                "time_limit": _minutes(time_limit),
                "node_list": node_list or None,
                "reason": none_if_null(reason),
                "name": name,
            }
        )
    return sorted(jobs, key=_job_order)


def slurm_history(output: str) -> list[dict[str, Any]]:
    """The jobs of `sacct -X` (slurm_command's `history`) as slurm_jobs' records, plus elapsed
    (seconds); reason is None (sacct keeps none worth showing for ended jobs)."""
    jobs = []
    for row in text_rows(output, "history"):
        job_id, state, user, account, partition, nodes, node_list, tres = row[:8]
        submit_time, start_time, elapsed, time_limit, name = row[8:]
        state = state.split()[0].upper() if state else ""  # "CANCELLED by 1000"
        jobs.append(
            {
                "job_id": job_id,
                "state": state,
                "user": user,
                "account": none_if_null(account),
                "partition": partition,
                "nodes": integer(nodes),
                "cpus": _tres_count(tres, "cpu"),
                "gpus": slurm_tres_gpus(tres),
                "submit_time": _local_time(submit_time),
                "start_time": _started(state, _local_time(start_time)),
                "time_limit": _minutes(time_limit),
                "node_list": none_if_null(node_list),
                "reason": None,
                "name": name,
                "elapsed": _seconds(elapsed),
            }
        )
    return sorted(jobs, key=_job_order)


def slurm_job_ended(state: str) -> bool:
    """Whether a job in this state (squeue's %T word) has ended."""
    return state.strip().upper() in _ENDED


def slurm_tres_gpus(tres: str | None) -> int:
    """GPUs in a TRES string ('cpu=2,node=1,gres/gpu=1'; a typed gres may be listed beside
    its total as 'gres/gpu:h200=1', or alone)."""
    counts = _tres(tres)
    if "gres/gpu" in counts:
        return integer(counts["gres/gpu"]) or 0
    return sum(integer(v) or 0 for k, v in counts.items() if k.startswith("gres/gpu:"))


def _tres(tres: str | None) -> dict[str, str]:
    return dict(item.split("=", 1) for item in (tres or "").split(",") if "=" in item)


def _tres_count(tres: str | None, name: str) -> int | None:
    return integer(_tres(tres).get(name))


def _job_from_json(job: dict[str, Any]) -> dict[str, Any]:
    limit = number(job.get("time_limit"))
    return {
        "job_id": str(job["job_id"]),
        "state": first_state(job.get("job_state")),
        "user": job.get("user_name") or None,
        "account": none_if_null(job.get("account")),
        "partition": job.get("partition") or None,
        "nodes": integer(job.get("node_count")),
        "cpus": integer(job.get("cpus")),
        # what squeue -O tres-alloc prints: held once running, asked for before
        "gpus": slurm_tres_gpus(job.get("tres_alloc_str") or job.get("tres_req_str")),
        "submit_time": integer(job.get("submit_time")) or None,
        "start_time": _started(first_state(job.get("job_state")), integer(job.get("start_time"))),
        "time_limit": limit if isinstance(limit, int) else None,
        "node_list": none_if_null(job.get("nodes")),
        "reason": none_if_null(job.get("state_reason")),
        "name": job.get("name") or "",
    }


def _started(state: str, start_time: int | None) -> int | None:
    """A pending job's start time is the scheduler's estimate (a year ahead when it cannot
    tell): only a job that left the queue has one."""
    return None if state == "PENDING" or not start_time else start_time


def _local_time(text: str) -> int | None:
    """squeue's '2026-11-27T14:46:05' (local time) as epoch seconds; N/A, Unknown: None."""
    try:
        return int(time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def _seconds(text: str) -> int | None:
    """An elapsed time as sacct prints it ('00:00:01', '1-02:03:04') in seconds."""
    days, _, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    if len(parts) != 3 or not all(p.isdigit() for p in parts) or not (days or "0").isdigit():
        return None
    hours, minutes, seconds = (int(p) for p in parts)
    return int(days or 0) * 86400 + hours * 3600 + minutes * 60 + seconds


def _minutes(text: str) -> int | None:
    """A time limit as squeue prints it ('5:00', '2:00:00', '1-00:00:00') in minutes;
    UNLIMITED or INVALID: None."""
    days, _, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    if not all(p.isdigit() for p in parts) or not (days or "0").isdigit() or len(parts) > 3:
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    if len(parts) == 1:  # bare minutes; two parts are minutes:seconds
        seconds *= 60
    return int(days or 0) * 1440 + (seconds + 59) // 60


def _job_order(job: dict[str, Any]) -> tuple[int, str]:
    """By the numeric id: 12, an array's 12_3 and 12_[4-9], a heterogeneous job's 12+0."""
    head = re.match(r"[0-9]*", job["job_id"]).group()  # type: ignore[union-attr]
    return (int(head) if head else 0, job["job_id"])
