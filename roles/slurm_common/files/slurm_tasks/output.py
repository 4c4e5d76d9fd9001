"""The end of a job's output file, read as the job's user (the typed task `job_output`): the
file is opened by a child process that holds only that user's uid and groups, so the answer
never holds more than the user could read on the node."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
from typing import Any

READ_TIMEOUT_S = 10
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
