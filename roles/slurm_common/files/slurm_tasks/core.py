"""What every typed task shares: the error that becomes an answer, the one way Slurm is run,
what Slurm says of itself (its version, whether accounting is on), and the requesting user."""

from __future__ import annotations

import pwd
import re
import subprocess
from typing import Any

from slurm_readers.versions import slurm_version

SLURM_TIMEOUT_S = 30
EXIT_CODES = {
    "ok": 0,
    "failed": 1,
    "invalid_input": 2,
    "forbidden": 3,
    "not_found": 4,
    "scheduler_unavailable": 5,
    "accounting_off": 7,
}


class TaskError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def slurm(
    argv: list[str],
    environment: dict[str, str] | None = None,
    user: str | None = None,
    stdin: str | None = None,
    epoch_times: bool = False,
) -> str:
    """A Slurm command (as `user` through runuser when given) with `environment` added (a
    slurm_command's: `slurm(**slurm_command(...))`): its stdout; `epoch_times`: it prints
    times as epoch seconds. Slurm that does not answer is scheduler_unavailable; a refusal
    keeps Slurm's own message."""
    if user is not None:
        argv = ["runuser", "-u", user, "--", *argv]
    env = {**(environment or {}), "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    if epoch_times:
        env["SLURM_TIME_FORMAT"] = "%s"
    try:
        done = subprocess.run(
            argv,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=SLURM_TIMEOUT_S,
            check=False,
            env=env,
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


def slurm_facts() -> dict[str, Any]:
    """Slurm's version and whether accounting is on, as slurmctld runs now (so that an upgrade
    or accounting switched on needs no rewritten configuration here)."""
    values = {}
    for line in slurm(["scontrol", "show", "config"]).splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return {
        "version": slurm_version(values.get("SLURM_VERSION", "")),
        "accounting": values.get("AccountingStorageType") == "accounting_storage/slurmdbd",
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
