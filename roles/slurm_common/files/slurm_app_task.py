#!/usr/bin/python3
"""The app's typed tasks: what the platform's node agent runs on a member for the native Jobs
and Nodes tabs (app.slurm.query: queue, nodes, job, job_output; app.slurm.submit: submit,
cancel) and for billing (usage). The same command on every member: job_output reads a job's
output on the node that wrote it, the others ask Slurm wherever they run (the manifest names
the controller).

One JSON task on stdin, one JSON answer on stdout, the exit code by outcome (EXIT_CODES). The
input is checked against the task's JSON Schema, the one the app's manifest publishes
(installed beside this file by slurm_common), before anything runs. Each task is handled by
its domain's module (slurm_tasks/, beside this file), which reads Slurm with the bundle's own
readers (slurm_readers/, beside it too), its version and whether accounting is on from Slurm
itself at each call. submit and cancel run as the cluster user who asked, never
as root; job_output reads as the job's user. Each of those three writes one JSON line to the
audit log, which the answer carries too. Every failure is an answer with a code, never a
traceback.

It needs python3 and Debian's python3-jsonschema only (no pip on customer hosts).
"""

from __future__ import annotations

import fcntl
import importlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
from slurm_readers.job_detail import iso
from slurm_tasks import DOMAINS, core
from slurm_tasks.core import EXIT_CODES, TaskError

CONFIG = Path("/etc/slurm-app/tasks.json")
SCHEMAS = Path(__file__).resolve().with_name("task-schemas.json")
AUDIT_KEEP = 5
AUDIT_MAX_BYTES = 10 * 2**20


_DOMAINS = [importlib.import_module(f"slurm_tasks.{domain}") for domain in DOMAINS]
TASKS = {name: handler for domain in _DOMAINS for name, handler in domain.TASKS.items()}
# Each call writes an audit line: the changes, and the reads of a user's files.
AUDITED = {name for domain in _DOMAINS for name in getattr(domain, "AUDITED", ())}


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
        output = TASKS[request["task"]]({**config, **core.slurm_facts()}, request)
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
