"""One job's detail and output, and the cluster's usage (billing)."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import slurm_task_core as core
from slurm_readers.commands import JOB_RECORD_PATHS_SINCE, slurm_command
from slurm_readers.job_detail import iso, job_part_answer, slurm_job_detail, slurm_output_path
from slurm_readers.usage import DAY, slurm_usage
from slurm_readers.versions import slurm_version_tuple
from slurm_task_core import TaskError, cluster_user
from slurm_task_output import OutputUnreadable, read_tail_as

# The options slurm_worker starts slurmd with: its -N is this node's name in Slurm.
SLURMD_OPTIONS = Path("/etc/default/slurmd")
# The widest usage period one call reads.
USAGE_MAX_DAYS = 366


def job_parts(config: dict[str, Any], job_id: int) -> tuple[list[dict[str, Any]], str]:
    """The parts of job `job_id` (an array's tasks, a het job's components) and where they were
    read: slurmctld while any part has not ended or when accounting is off, else accounting."""
    version = config["version"]

    def ours(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [p for p in parts if job_id in (p["id"], p["array_job_id"], p["het_job_id"])]

    try:
        answer = core.slurm(**slurm_command("job", version, json=False, job_ids=[job_id]))
        live = ours(slurm_job_detail(answer, "job"))
    except TaskError as error:
        if "Invalid job id" not in error.message:
            raise
        live = []
    ended = live and all(p["exit_code"] is not None for p in live)
    if not config["accounting"] or (live and not ended):
        return live, "slurmctld"
    record = slurm_command("job_record", version, json=False, job_ids=[job_id])
    with_paths = slurm_version_tuple(version) >= JOB_RECORD_PATHS_SINCE
    recorded = ours(slurm_job_detail(core.slurm(**record), "job_record", with_paths=with_paths))
    # accounting lists a part once it ended more than a moment ago (commands.ENDED_BEFORE)
    if not recorded or len(recorded) < len(live):
        return live, "slurmctld"
    if not with_paths:
        # 22.05's accounting keeps no paths: slurmctld's, while it still holds the job
        held = {p["job_id"]: p for p in live}
        for part in recorded:
            paths = held.get(part["job_id"], {})
            part["stdout"], part["stderr"] = paths.get("stdout"), paths.get("stderr")
    return recorded, "accounting"


def first_node(part: dict[str, Any]) -> str | None:
    """The batch host of a part accounting recorded (the first node of its allocation)."""
    if part["batch_host"] or not part["node_list"] or part["node_list"] == "None assigned":
        return part["batch_host"]
    names = core.slurm(["scontrol", "show", "hostnames", part["node_list"]]).split()
    return names[0] if names else None


def task_job(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    user = cluster_user(config, request.get("user"))
    job_id = int(request["input"]["job_id"])  # JSON Schema's integer admits 5.0
    parts, source = job_parts(config, job_id)
    if not parts:
        held = "slurmctld" if not config["accounting"] else "slurmctld or accounting"
        raise TaskError("not_found", f"job_id: no job {job_id} in {held}")
    if any(p["user"] != user["name"] for p in parts) and not user.get("admin"):
        raise TaskError("forbidden", f"job_id: job {job_id} is another user's")
    return {
        "job_id": job_id,
        "source": source,
        "accounting": bool(config["accounting"]),
        "parts": [job_part_answer(part, first_node(part)) for part in parts],
    }


def job_part(parts: list[dict[str, Any]], given: dict[str, Any]) -> dict[str, Any]:
    """The part whose output is asked for: an array's task by array_task_id, a het job's
    component by het_job_offset (the first by default: it runs the batch script)."""
    if "array_task_id" in given:
        chosen = [p for p in parts if p["array_task_id"] == given["array_task_id"]]
    elif "het_job_offset" in given:
        chosen = [p for p in parts if p["het_job_offset"] == given["het_job_offset"]]
    elif len(parts) > 1 and all(p["het_job_offset"] is not None for p in parts):
        chosen = [p for p in parts if p["het_job_offset"] == 0]
    elif len(parts) > 1:
        raise TaskError(
            "invalid_input",
            f"array_task_id: job {given['job_id']} is an array of {len(parts)} parts; name one",
        )
    else:
        chosen = parts
    if len(chosen) != 1:
        raise TaskError("not_found", f"job_id: job {given['job_id']} has no such part")
    return chosen[0]


def this_node() -> str | None:
    """This host's node name in Slurm (slurmd's -N), None where no slurmd was set up."""
    try:
        options = SLURMD_OPTIONS.read_text()
    except OSError:
        return None
    match = re.search(r"(?:^|[\s\"'])-N\s+([A-Za-z0-9._-]+)", options)
    return match.group(1) if match else None


def task_job_output(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    user = cluster_user(config, request.get("user"))
    given = request["input"]
    job_id, stream = int(given["job_id"]), given.get("stream", "stdout")
    limit = int(given.get("tail_kib", 64)) * 1024
    parts, _source = job_parts(config, job_id)
    if not parts:
        raise TaskError("not_found", f"job_id: no job {job_id} in slurmctld or accounting")
    part = job_part(parts, given)
    owner = part["user"]
    if owner is None:
        raise TaskError("not_found", f"job_id: Slurm names no user for job {part['job_id']}")
    if owner != user["name"] and not user.get("admin"):
        raise TaskError("forbidden", f"job_id: job {job_id} is another user's")
    if part["start_time"] is None:
        raise TaskError("not_found", f"job_id: job {part['job_id']} has not started: no output")
    batch_host = part["batch_host"] or first_node(part)
    path = slurm_output_path(part, stream, batch_host)
    if path is None:
        raise TaskError(
            "not_found",
            f"job_id: Slurm recorded no {stream} file for job {part['job_id']} (an interactive "
            "job, or a Slurm before 23.02 whose accounting keeps none, once slurmctld forgot it)",
        )
    mount = config.get("storage_mount") or ""
    # a job may name its output `/workspace/../home/x`: where it lands is the normalised path
    shared = bool(mount) and os.path.normpath(path).startswith(mount.rstrip("/") + "/")
    here = this_node()
    if not shared and here != batch_host:
        raise TaskError(
            "not_found",
            f"job_id: job {part['job_id']}'s {stream} is on {batch_host}'s own disk; "
            f"ask {batch_host}'s member (this is {here or 'no node'})",
        )
    try:
        tail = read_tail_as(owner, path, limit)
    except OutputUnreadable as error:
        code = "forbidden" if error.reason == "forbidden" else "not_found"
        raise TaskError(code, f"job_id: {error}") from error
    return {
        "job_id": job_id,
        "part": part["job_id"],
        "stream": stream,
        "path": path,
        "batch_host": batch_host,
        "read_on": here,
        "read_as": owner,
        "size_bytes": tail["size"],
        "offset": tail["start"],
        "truncated": tail["cut"],
        "content": tail["content"],
    }


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
