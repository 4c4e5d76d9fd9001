"""The Jobs tab's queue and its changes: `queue`, `submit` and `cancel`."""

from __future__ import annotations

import time
from typing import Any

from slurm_readers.commands import ENDED_STATES, slurm_command
from slurm_readers.job_detail import duration, iso
from slurm_readers.jobs import slurm_history, slurm_jobs

from slurm_tasks import core
from slurm_tasks.core import TaskError, cluster_user

# What the queue calls each Slurm state; the rest are lower-cased.
STATE_FILTERS = {
    "pending": {"PENDING"},
    "running": {"RUNNING", "SUSPENDED", "COMPLETING"},
    "completed": {"COMPLETED"},
    "failed": set(ENDED_STATES) - {"COMPLETED"},
}
# sacct's --starttime for the completed and failed views: what a queue page shows.
HISTORY_DAYS = 7


def job_answer(job: dict[str, Any], now: int) -> dict[str, Any]:
    # 12, an array task 12_3 (pending: 12_[4-9]), a heterogeneous component 12+0
    head, _, index = job["job_id"].partition("+")[0].partition("_")
    if job["state"] in STATE_FILTERS["running"] and job["start_time"]:
        elapsed = now - job["start_time"]
    else:
        elapsed = job.get("elapsed")
    return {
        "job_id": int(head),
        "array_task_id": int(index) if index.isdigit() else None,
        "name": job["name"],
        "user": job["user"],
        "account": job["account"],
        "state": job["state"].lower(),
        "partition": job["partition"],
        "nodes": job["node_list"] or "",
        "node_count": job["nodes"],
        "gpus": job["gpus"],
        "time_elapsed": duration(elapsed) if elapsed is not None else None,
        "time_limit": duration(job["time_limit"] * 60) if job["time_limit"] else "UNLIMITED",
        "submit_time": iso(job["submit_time"]),
        "reason": job["reason"],
    }


def task_queue(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    wanted = request["input"].get("state")
    owner = request["input"].get("user")
    now = int(time.time())
    jobs = slurm_jobs(
        core.slurm(**slurm_command("jobs", config["version"], json=False, ended=True)),
        ended=True,
    )
    from_history = wanted in ("completed", "failed") and config["accounting"]
    if from_history:
        history = slurm_command("history", config["version"], since_days=HISTORY_DAYS)
        jobs = slurm_history(core.slurm(**history))
    if wanted:
        jobs = [j for j in jobs if j["state"] in STATE_FILTERS[wanted]]
    if owner:
        jobs = [j for j in jobs if j["user"] == owner]
    return {
        "jobs": [job_answer(job, now) for job in jobs],
        "accounting": bool(config["accounting"]),
        # without accounting, ended jobs are only those slurmctld still holds (MinJobAge)
        "ended_jobs_from": "accounting" if from_history else "slurmctld",
    }


def task_submit(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    given = request["input"]
    user = cluster_user(config, request.get("user"))
    script = given["script"]
    if len(script.encode()) > config["max_script_bytes"]:
        raise TaskError("invalid_input", f"script: over {config['max_script_bytes']} bytes")
    if not script.startswith("#!"):
        raise TaskError("invalid_input", "script: must start with an interpreter line (#!)")
    argv = ["sbatch", "--parsable", f"--chdir={user['home']}"]
    if "name" in given:
        argv.append(f"--job-name={given['name']}")
    if "partition" in given:
        argv.append(f"--partition={given['partition']}")
    if "nodes" in given:
        argv.append(f"--nodes={given['nodes']}")
    if given.get("gpus"):
        argv.append(f"--gres=gpu:{given['gpus']}")
    if "time_limit" in given:
        argv.append(f"--time={given['time_limit']}")
    # The script is sbatch's stdin: data, never a shell word or a file path.
    answer = core.slurm(argv, user=user["name"], stdin=script).strip()
    job_id = answer.split(";")[0]
    if not job_id.isdigit():
        raise TaskError("failed", f"sbatch answered {answer[:200]!r}")
    return {"job_id": int(job_id)}


def task_cancel(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    user = cluster_user(config, request.get("user"))
    job_id = int(request["input"]["job_id"])  # JSON Schema's integer admits 5.0
    queue = slurm_command("jobs", config["version"], json=False, ended=True)
    queue["argv"] += ["-j", str(job_id)]
    try:
        listed = slurm_jobs(core.slurm(**queue), ended=True)
    except TaskError as error:
        if "Invalid job id" not in error.message:
            raise
        listed = []
    job = next((j for j in listed if j["job_id"].partition("_")[0] == str(job_id)), None)
    if job is None:
        raise TaskError("not_found", f"job_id: no job {job_id} in the queue")
    if job["user"] != user["name"] and not user.get("admin"):
        raise TaskError("forbidden", f"job_id: job {job_id} is another user's")
    if job["state"] not in STATE_FILTERS["pending"] | STATE_FILTERS["running"]:
        raise TaskError("not_found", f"job_id: job {job_id} already ended ({job['state']})")
    # A user cancels as themself (slurmctld checks the ownership again). An admin's cancel of
    # another user's job runs as root: without accounting Slurm knows no admin but root.
    core.slurm(["scancel", str(job_id)], user=None if job["user"] != user["name"] else user["name"])
    return {"job_id": job_id, "state": "cancelled"}


TASKS = {"queue": task_queue, "submit": task_submit, "cancel": task_cancel}
# Each call writes an audit line.
AUDITED = {"submit", "cancel"}
