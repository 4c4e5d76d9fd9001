#!/usr/bin/python3
"""The controller's typed tasks: what the platform's node agent runs for the native Jobs and
Nodes tabs (app.slurm.query: queue, nodes, job; app.slurm.submit: submit, cancel).

One JSON task on stdin, one JSON answer on stdout, the exit code by outcome (EXIT_CODES). The
input is checked against the task's JSON Schema, the one the app's manifest publishes
(installed beside this file by slurm_controller), before anything runs; Slurm is read with the
bundle's own readers (slurm_readers/, beside this file). submit and cancel run as the cluster
user who asked, never as root, and each writes one JSON line to the audit log, which the answer
carries too. Every failure is an answer with a code, never a traceback.

It needs python3 and Debian's python3-jsonschema only (no pip on customer hosts).
"""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
from slurm_readers.commands import JOB_RECORD_PATHS_SINCE, slurm_command
from slurm_readers.job_detail import duration, iso, job_part_answer, slurm_job_detail
from slurm_readers.jobs import slurm_history, slurm_jobs
from slurm_readers.nodes import slurm_node_usage, slurm_nodes
from slurm_readers.versions import slurm_version_tuple

CONFIG = Path("/etc/slurm-app/tasks.json")
SCHEMAS = Path(__file__).resolve().with_name("task-schemas.json")
SLURM_TIMEOUT_S = 30
AUDIT_KEEP = 5
AUDIT_MAX_BYTES = 10 * 2**20
EXIT_CODES = {
    "ok": 0,
    "failed": 1,
    "invalid_input": 2,
    "forbidden": 3,
    "not_found": 4,
    "scheduler_unavailable": 5,
}
# What the queue calls each Slurm state; the rest are lower-cased.
STATE_FILTERS = {
    "pending": {"PENDING"},
    "running": {"RUNNING", "SUSPENDED", "COMPLETING"},
    "completed": {"COMPLETED"},
    "failed": {
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "PREEMPTED",
    },
}
# sacct's --starttime for the completed and failed views: what a queue page shows.
HISTORY_DAYS = 7


class TaskError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def slurm(argv: list[str], user: str | None = None, stdin: str | None = None) -> str:
    """A Slurm command (as `user` through runuser when given): its stdout. Slurm that does
    not answer is scheduler_unavailable; a refusal keeps Slurm's own message."""
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=SLURM_TIMEOUT_S,
            check=False,
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"},
            cwd="/",
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise TaskError("scheduler_unavailable", f"{argv[0]}: {error}") from error
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip()[-500:]
        if re.search(
            r"Unable to contact slurm controller|Socket timed out|Connection refused", message
        ):
            raise TaskError("scheduler_unavailable", message)
        raise TaskError("failed", message or f"{argv[0]} exited {done.returncode}")
    return done.stdout


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
        slurm(slurm_command("jobs", config["version"], json=False, ended=True)),
        ended=True,
    )
    from_history = wanted in ("completed", "failed") and config["accounting"]
    if from_history:
        argv = slurm_command("history", config["version"], since_days=HISTORY_DAYS)
        jobs = slurm_history(slurm(argv))
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


def task_nodes(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    answer = slurm(slurm_command("nodes", config["version"]))
    if answer.lstrip().startswith("{"):
        nodes = slurm_node_usage(answer)
    else:  # a build without the JSON serializer: no GPU or memory use in the text form
        nodes = [{**n, "alloc_gpus": None, "alloc_memory": None} for n in slurm_nodes(answer)]
    return {
        "nodes": [
            {
                "hostname": node["name"],
                "state": node["state"],
                "cpus_total": node["cpus"],
                "cpus_alloc": node["alloc_cpus"],
                "gpus_total": node["gpus"],
                "gpus_alloc": node["alloc_gpus"],
                "memory_total_mb": node["real_memory"],
                "memory_alloc_mb": node["alloc_memory"],
                "partitions": node["partitions"],
                "reason": node["reason"],
            }
            for node in nodes
        ]
    }


def cluster_user(config: dict[str, Any], name: str | None) -> dict[str, Any]:
    """The requesting user, if it is one of the instance's users and an account here with
    the uid the bundle gave it (never root, whatever the configuration says)."""
    user = next((u for u in config["users"] if u["name"] == name), None)
    if user is None:
        raise TaskError("forbidden", f"user: {name!r} is not a user of this cluster")
    try:
        account = pwd.getpwnam(user["name"])
    except KeyError as error:
        raise TaskError("forbidden", f"user: {name!r} has no account on the controller") from error
    if account.pw_uid == 0 or account.pw_uid != user["uid"]:
        raise TaskError("forbidden", f"user: {name!r} may not run jobs")
    return {**user, "home": account.pw_dir}


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
    answer = slurm(argv, user=user["name"], stdin=script).strip()
    job_id = answer.split(";")[0]
    if not job_id.isdigit():
        raise TaskError("failed", f"sbatch answered {answer[:200]!r}")
    return {"job_id": int(job_id)}


def task_cancel(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    user = cluster_user(config, request.get("user"))
    job_id = int(request["input"]["job_id"])  # JSON Schema's integer admits 5.0
    argv = slurm_command("jobs", config["version"], json=False, ended=True)
    try:
        listed = slurm_jobs(slurm([*argv, "-j", str(job_id)]), ended=True)
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
    slurm(["scancel", str(job_id)], user=None if job["user"] != user["name"] else user["name"])
    return {"job_id": job_id, "state": "cancelled"}


def job_parts(config: dict[str, Any], job_id: int) -> tuple[list[dict[str, Any]], str]:
    """The parts of job `job_id` (an array's tasks, a het job's components) and where they were
    read: slurmctld while any part has not ended or when accounting is off, else accounting."""
    version = config["version"]

    def ours(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [p for p in parts if job_id in (p["id"], p["array_job_id"], p["het_job_id"])]

    try:
        answer = slurm(slurm_command("job", version, json=False, job_ids=[job_id]))
        live = ours(slurm_job_detail(answer, "job"))
    except TaskError as error:
        if "Invalid job id" not in error.message:
            raise
        live = []
    ended = live and all(p["exit_code"] is not None for p in live)
    if not config["accounting"] or (live and not ended):
        return live, "slurmctld"
    argv = slurm_command("job_record", version, json=False, job_ids=[job_id])
    with_paths = slurm_version_tuple(version) >= JOB_RECORD_PATHS_SINCE
    recorded = ours(slurm_job_detail(slurm(argv), "job_record", with_paths=with_paths))
    if not recorded:
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
    names = slurm(["scontrol", "show", "hostnames", part["node_list"]]).split()
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


TASKS = {
    "queue": task_queue,
    "nodes": task_nodes,
    "job": task_job,
    "submit": task_submit,
    "cancel": task_cancel,
}
AUDITED = {"submit", "cancel"}


def audit(config: dict[str, Any], line: dict[str, Any]) -> None:
    """One JSON line, appended under a lock; the log is rotated at AUDIT_MAX_BYTES."""
    path = Path(config["audit_log"])
    path.parent.mkdir(mode=0o750, parents=True, exist_ok=True)
    with path.with_suffix(".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists() and path.stat().st_size >= AUDIT_MAX_BYTES:
            for index in range(AUDIT_KEEP - 1, 0, -1):
                older = path.with_name(f"{path.name}.{index}")
                if older.exists():
                    older.rename(path.with_name(f"{path.name}.{index + 1}"))
            path.rename(path.with_name(f"{path.name}.1"))
        descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        with os.fdopen(descriptor, "a") as log:
            log.write(json.dumps(line, sort_keys=True) + "\n")


# What the node agent sends around each task's input (the input's schema is the manifest's).
ENVELOPE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["task", "input"],
    "properties": {
        "task": {"enum": sorted(TASKS)},
        "correlation_id": {"type": "string", "maxLength": 200},
        # the cluster user the platform maps its user to; required by submit and cancel
        "user": {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,31}$"},
        "input": {"type": "object"},
    },
}


def check_input(schemas: dict[str, Any], request: Any) -> None:
    errors = sorted(
        jsonschema.Draft202012Validator(ENVELOPE).iter_errors(request), key=lambda e: e.path
    )
    if not errors:
        schema = schemas[request["task"]]["input_schema"]
        errors = sorted(
            jsonschema.Draft202012Validator(schema).iter_errors(request["input"]),
            key=lambda e: e.path,
        )
        prefix = "input."
    else:
        prefix = ""
    if errors:
        where = prefix + ".".join(str(p) for p in errors[0].absolute_path) or "(the task)"
        raise TaskError("invalid_input", f"{where.rstrip('.')}: {errors[0].message[:300]}")
    # Python's `$` also matches before a final newline, which the schemas' patterns (ECMA 262,
    # as the platform checks them) do not admit: no control character outside declared data.
    data = {
        key
        for key, sub in schema.get("properties", {}).items()
        if isinstance(sub, dict) and "contentMediaType" in sub
    }
    for key, value in request["input"].items():
        if key not in data and isinstance(value, str) and re.search(r"[\x00-\x1f\x7f]", value):
            raise TaskError("invalid_input", f"input.{key}: a control character")


def bounded(value: Any, limit: int) -> str | None:
    return value if isinstance(value, str) and len(value) <= limit else None


def stdin_limit(config: dict[str, Any]) -> int:
    return int(config["max_script_bytes"]) * 2 + 65536


def answer_for(raw: str, config: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    request: Any = None
    try:
        if len(raw) > stdin_limit(config):
            raise TaskError("invalid_input", f"task: over {stdin_limit(config)} bytes")
        try:
            request = json.loads(raw)
        except ValueError as error:
            raise TaskError("invalid_input", f"not one JSON task: {error}") from error
        check_input(schemas, request)
        output = TASKS[request["task"]](config, request)
        answer = {"status": "ok", "output": output}
    except TaskError as error:
        answer = {"status": "error", "error": {
            "code": error.code,
            "message": error.message,
            "retryable": error.code == "scheduler_unavailable",
        }}  # fmt: skip
    except Exception as error:  # an answer, never a traceback
        answer = {"status": "error", "error": {
            "code": "failed", "message": f"{type(error).__name__}: {error}"[:500],
            "retryable": False,
        }}  # fmt: skip
    known = request if isinstance(request, dict) else {}
    given = known.get("input") if isinstance(known.get("input"), dict) else {}
    answer = {
        "task": known.get("task") if known.get("task") in TASKS else None,
        "correlation_id": bounded(known.get("correlation_id"), 200),
        **answer,
    }
    # every attempt to submit or cancel, refused ones too; of a refused input only what is
    # bounded (the line must stay one short line, whatever was sent)
    if answer["task"] in AUDITED:
        checked = answer["status"] == "ok" or answer["error"]["code"] != "invalid_input"
        job_id = (answer.get("output") or {}).get("job_id", given.get("job_id"))
        line = {
            "time": iso(int(time.time())),
            "task": answer["task"],
            "user": bounded(known.get("user"), 32),
            "correlation_id": answer["correlation_id"],
            "job_id": job_id if isinstance(job_id, int) and not isinstance(job_id, bool) else None,
            "outcome": "ok" if answer["status"] == "ok" else answer["error"]["code"],
        }
        if answer["task"] == "submit":
            fields = ("name", "partition", "nodes", "gpus", "time_limit")
            line["request"] = {k: given[k] for k in fields if k in given} if checked else {}
            script = given.get("script")
            line["script_bytes"] = len(script.encode()) if isinstance(script, str) else None
        audit(config, line)
        answer["audit"] = line
    return answer


def main() -> int:
    config = json.loads(CONFIG.read_text())
    schemas = json.loads(SCHEMAS.read_text())
    # One task, bounded: a larger stdin is refused before it is parsed (a script may double
    # in size as JSON escapes).
    raw = sys.stdin.read(stdin_limit(config) + 1)
    answer = answer_for(raw, config, schemas)
    print(json.dumps(answer))
    return EXIT_CODES["ok" if answer["status"] == "ok" else answer["error"]["code"]]


if __name__ == "__main__":
    sys.exit(main())
