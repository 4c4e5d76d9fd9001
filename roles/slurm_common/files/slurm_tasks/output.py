"""The end of a job's output file, read as the job's user (the typed task `job_output`): the
file is opened by a child process that holds only that user's uid and groups, so the answer
never holds more than the user could read on the node."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
from pathlib import Path
from typing import Any

from slurm_readers.job_detail import slurm_output_path

from slurm_tasks.core import TaskError, cluster_user
from slurm_tasks.jobs import first_node, job_parts

READ_TIMEOUT_S = 10
# The options slurm_worker starts slurmd with: its -N is this node's name in Slurm.
SLURMD_OPTIONS = Path("/etc/default/slurmd")
# Debian's python3, which any user may run (the command's own may live where they may not).
PYTHON = "/usr/bin/python3"

# The child: one open, then fstat and read on that descriptor (a file swapped between a check
# and the read is never the one read); O_NONBLOCK so a FIFO named as output cannot hang it.
_TAIL = r"""
import json, os, stat, sys
path, limit = sys.argv[1], int(sys.argv[2])
try:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
except OSError as error:
    print(json.dumps({"errno": error.errno}))
    sys.exit(0)
info = os.fstat(fd)
if not stat.S_ISREG(info.st_mode):
    print(json.dumps({"errno": -1}))
    sys.exit(0)
start = max(0, info.st_size - limit)
os.lseek(fd, start, os.SEEK_SET)
data = b""
while len(data) < limit:
    chunk = os.read(fd, limit - len(data))
    if not chunk:
        break
    data += chunk
print(json.dumps({"size": info.st_size, "start": start, "data": data.decode("latin-1")}))
"""


class OutputUnreadable(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # missing, forbidden, not_a_file


def read_tail_as(user: str, path: str, limit: int) -> dict[str, Any]:
    """The last `limit` bytes of `path` as `user` reads them: {size, start, content, cut}.
    content is UTF-8 with invalid bytes replaced (a cut may split a character). Raises
    OutputUnreadable: missing, forbidden (root's, or the user may not read it), not_a_file."""
    try:
        account = pwd.getpwnam(user)
    except KeyError as error:
        raise OutputUnreadable("forbidden", f"{user!r} has no account on this node") from error
    if account.pw_uid == 0:
        raise OutputUnreadable("forbidden", "a job of root's: its output is not read")
    groups = os.getgrouplist(account.pw_name, account.pw_gid)
    done = subprocess.run(
        [PYTHON, "-I", "-S", "-c", _TAIL, path, str(limit)],
        capture_output=True,
        text=True,
        timeout=READ_TIMEOUT_S,
        check=True,
        user=account.pw_uid,
        group=account.pw_gid,
        extra_groups=groups,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        cwd="/",
    )
    answer = json.loads(done.stdout)
    errno = answer.get("errno")
    if errno == -1:
        raise OutputUnreadable("not_a_file", f"{path} is not a regular file")
    if errno in (1, 13):  # EPERM, EACCES
        raise OutputUnreadable("forbidden", f"{user} may not read {path}")
    if errno is not None:
        raise OutputUnreadable("missing", f"{path}: {os.strerror(errno)}")
    data = answer["data"].encode("latin-1")
    return {
        "size": answer["size"],
        "start": answer["start"],
        "content": data.decode("utf-8", errors="replace"),
        "cut": answer["start"] > 0,
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


TASKS = {"job_output": task_job_output}
# Each call writes an audit line: a read of a user's files.
AUDITED = {"job_output"}
