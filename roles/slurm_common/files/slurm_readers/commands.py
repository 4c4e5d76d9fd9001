"""What the bundle asks Slurm: each query's JSON form where the version has a right one,
else its text form with a separator of its own, and how a text answer splits into records."""

from __future__ import annotations

import re
import secrets
from typing import Any, TypedDict

from .versions import slurm_version_tuple

# Jobs use squeue's -O form: only it has the TRES a job holds (its GPUs, whether asked per node,
# per job or per task); each field but the last ends with the separator (a suffix: -O's
# `field:suffix`) and is printed whole.
JOB_FIELDS = (
    "JobID",
    "State",
    "UserName",
    "Account",
    "Partition",
    "NumNodes",
    "NumCPUs",
    "tres-alloc",
    "SubmitTime",
    "StartTime",
    "TimeLimit",
    "NodeList",
    "Reason",
    "Name",
)


HISTORY_FIELDS = (
    "JobID",
    "State",
    "User",
    "Account",
    "Partition",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "Submit",
    "Start",
    "Elapsed",
    "Timelimit",
    "JobName",
)


# One job in detail (the `job` task), from slurmctld while it holds the job: JobID is the raw
# id there (an array task's own), so the array's and the het job's ids come with it. squeue
# prints StdOut and StdErr as given (`slurm-%A_%a.out`): slurm_output_path expands them.
JOB_DETAIL_FIELDS = (
    "JobID",
    "ArrayJobId",
    "ArrayTaskId",
    "HetJobId",
    "HetJobOffset",
    "State",
    "UserName",
    "Account",
    "QOS",
    "Partition",
    "NumNodes",
    "NumCPUs",
    "tres-alloc",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "TimeUsed",
    "TimeLimit",
    "NodeList",
    "BatchHost",
    "Reason",
    "exit_code",
    "WorkDir",
    "StdOut",
    "StdErr",
    "Name",
)


# The same job from accounting, one row per allocation (-X: an array's tasks and a het job's
# components are rows of their own). 22.05's sacct has no StdOut and StdErr: JOB_RECORD_FIELDS
# names them from 23.02 (slurm_command's `job_record`).
JOB_RECORD_FIELDS = (
    "JobIDRaw",
    "JobID",
    "State",
    "ExitCode",
    "User",
    "Account",
    "QOS",
    "Partition",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "Submit",
    "Start",
    "End",
    "Elapsed",
    "Timelimit",
    "Reason",
    "WorkDir",
    "StdOut",
    "StdErr",
    "JobName",
)
JOB_RECORD_PATHS_SINCE = (23, 2)


# What each allocation used (the `usage` task), its times as epoch seconds (the command runs
# with SLURM_TIME_FORMAT=%s): End is Unknown while it runs, Start while it waits.
USAGE_FIELDS = ("JobIDRaw", "User", "Account", "AllocTRES", "Start", "End")


NODE_FIELDS = ("%N", "%T", "%C", "%m", "%G", "%P", "%E")


ACCOUNTING_FIELDS = ("JobID", "State", "User", "NNodes", "NodeList", "ExitCode")


# What stands between two fields of a text answer; SEPARATOR_MARK in a format is replaced by a
# new one per call (text_command).
SEPARATOR_MARK = "{separator}"
_SEPARATOR = re.compile(r"\|[0-9a-f]{24}\|")

# squeue reads its format from the environment where the command line gives none. Every user
# of the host reads a command line in /proc, never another user's environment: a user who saw
# the separator could rename a pending job to forge the next rows. sinfo -N reads no format
# from its environment (SINFO_FORMAT only without -N), and a node's fields hold nothing a
# cluster user writes (a reason is root's or an operator's): its separator may be seen.
FORMAT_VARIABLES = {"squeue": ("-O", "SQUEUE_FORMAT2")}

# The states a job ends in. sacct has no such variable for its delimiter, so a text query of
# sacct that carries a field its user makes (a name, a path) lists only jobs that had ended
# before the command started (ENDED_BEFORE): a job's record no longer changes once it ended,
# so a user who reads the delimiter in /proc can no longer write it into a row.
ENDED_STATES = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
)
# sacct's end of the window, before its own start by more than the hosts' clocks differ
ENDED_BEFORE = "now-5"


class SlurmCommand(TypedDict):
    """A Slurm command: its argv (no shell) and what it adds to the environment."""

    argv: list[str]
    environment: dict[str, str]


def _squeue(fields: tuple[str, ...], *options: str) -> list[str]:
    """squeue's -O form: each field but the last ends with the separator (a suffix: -O's
    `field:suffix`), and is printed whole."""
    suffixed = [f"{field}:{SEPARATOR_MARK}" for field in fields[:-1]] + [f"{fields[-1]}:"]
    return ["squeue", "-h", "-a", *options, "-O", ",".join(suffixed)]


def _sacct(fields: tuple[str, ...], *options: str) -> list[str]:
    return [
        "sacct",
        "-n",
        "-P",
        f"--delimiter={SEPARATOR_MARK}",
        *options,
        "-a",
        "-o",
        ",".join(fields),
    ]


_ENDED_ONLY = ("-s", ",".join(ENDED_STATES), "-E", ENDED_BEFORE)

TEXT_COMMANDS: dict[str, list[str]] = {
    "nodes": ["sinfo", "-h", "-N", "-o", SEPARATOR_MARK.join(NODE_FIELDS)],
    "jobs": _squeue(JOB_FIELDS),
    # The jobs that left the queue, one row each (-X: no steps), for the Jobs tab's completed
    # and failed views; slurm_command adds the window's start.
    "history": _sacct(HISTORY_FIELDS, "-X", *_ENDED_ONLY),
    "job": _squeue(JOB_DETAIL_FIELDS, "-t", "all"),
    # read once slurmctld holds the job ended or no more; -S: with -s sacct's window would
    # otherwise start now
    "job_record": _sacct(JOB_RECORD_FIELDS, "-X", *_ENDED_ONLY, "-S", "1970-01-01"),
    # no field a user makes: any job
    "accounting": _sacct(ACCOUNTING_FIELDS),
    # -D: every run of a requeued job, as sreport counts them; slurm_command adds the period
    "usage": _sacct(USAGE_FIELDS, "-X", "-D"),
}


_TEXT_FIELDS = {
    "nodes": len(NODE_FIELDS),
    "jobs": len(JOB_FIELDS),
    "accounting": len(ACCOUNTING_FIELDS),
    "history": len(HISTORY_FIELDS),
    "job": len(JOB_DETAIL_FIELDS),
    "job_record": len(JOB_RECORD_FIELDS),
    "usage": len(USAGE_FIELDS),
}


# Each query's JSON form, from the first version where it is right. 22.05's `sacct --json`
# reports exit code 0 for a job that exited 3 (openapi dbv0.0.38), so accounting uses the text
# form there; 22.05's `scontrol` has no --json at all (nodes come from its `sinfo --json`).
JSON_SINCE = {"nodes": (21, 8), "jobs": (21, 8), "accounting": (23, 2)}


SCONTROL_JSON_SINCE = (23, 2)


def slurm_command_forms(what: str, prefix: str = "") -> dict[str, SlurmCommand]:
    """Every JSON form of `what` across the Slurm versions the bundle reads, keyed by `prefix`
    and the command's name: a read that cannot ask for the version first runs them all in the
    same round trip, then keeps the one named by `(what | slurm_command(version)).argv[0]`."""
    forms = (
        slurm_command(what, ".".join(map(str, since)))
        for since in (JSON_SINCE[what], SCONTROL_JSON_SINCE)
    )
    return {prefix + form["argv"][0]: form for form in forms}


def slurm_command(
    what: str,
    version: str = "",
    json: bool = True,
    job_ids: list[Any] | None = None,
    nodes: list[str] | None = None,
    ended: bool = False,
    since_days: int = 7,
    period: tuple[str, str] | None = None,
) -> SlurmCommand:
    """The argv that asks this Slurm version about `what` (nodes, jobs, accounting): its JSON
    form where the version has a right one and `json` is true, else the text form (which any
    version reads alike: the version may then be empty). `nodes` narrows a nodes or jobs
    query; a narrowed query is always the text form (22.05's `sinfo --json` ignores `-n`,
    the text forms filter alike in every version). `job_ids` narrows an accounting query.
    `ended` makes the text jobs query list the jobs that ended but slurmctld still holds, as
    `squeue --json` always does. `history` (text in every version) covers `since_days`;
    `usage` the `period` (sacct's -S and -E, as the host's local times). Run it with its
    environment added (squeue's and sinfo's format)."""
    if what not in TEXT_COMMANDS:
        raise ValueError(f"unknown Slurm query {what!r}; expected one of {sorted(TEXT_COMMANDS)}")
    node_list = ",".join(nodes or [])
    if node_list:
        json = False
    environment: dict[str, str] = {}
    if json and what in JSON_SINCE and slurm_version_tuple(version) >= JSON_SINCE[what]:
        if what == "nodes" and slurm_version_tuple(version) >= SCONTROL_JSON_SINCE:
            argv = ["scontrol", "show", "nodes", "--json"]
        elif what == "nodes":
            argv = ["sinfo", "--json"]
        elif what == "jobs":
            argv = ["squeue", "--json"]
        else:
            argv = ["sacct", "--json", "-a"]
    else:
        text = text_command(what)
        argv, environment = text["argv"], text["environment"]
        if node_list:
            argv[1:1] = ["-n" if what == "nodes" else "-w", node_list]
        if what == "jobs" and ended:
            argv[1:1] = ["-t", "all"]
    if what == "history":
        argv += ["-S", f"now-{int(since_days)}days"]
    if what == "usage" and period:
        argv += ["-S", period[0], "-E", period[1]]
    if what in ("accounting", "job_record", "job") and job_ids:
        # With -j sacct searches from the epoch, not from today's midnight.
        argv += ["-j", ",".join(str(job_id) for job_id in job_ids)]
    if what == "job_record" and slurm_version_tuple(version) < JOB_RECORD_PATHS_SINCE:
        # the same width, JobIDRaw again where the paths are: slurm_job_detail reads them as
        # unknown (with_paths=False)
        fields = [
            "JobIDRaw" if field in ("StdOut", "StdErr") else field for field in JOB_RECORD_FIELDS
        ]
        argv[argv.index("-o") + 1] = ",".join(fields)
    return {"argv": argv, "environment": environment}


def text_command(what: str) -> SlurmCommand:
    """The text form of `what` with a separator of its own, a new random one at each call;
    squeue's format, which holds it, in its environment."""
    separator = f"|{secrets.token_hex(12)}|"
    argv = [arg.replace(SEPARATOR_MARK, separator) for arg in TEXT_COMMANDS[what]]
    if argv[0] not in FORMAT_VARIABLES:
        return {"argv": argv, "environment": {}}
    option, variable = FORMAT_VARIABLES[argv[0]]
    at = argv.index(option)
    return {"argv": argv[:at] + argv[at + 2 :], "environment": {variable: argv[at + 1]}}


def text_rows(output: str, what: str) -> list[list[str]]:
    """The records of a text answer (text_command's), each `width` fields. The separator is the
    first one in the answer: it follows the first record's first field, which Slurm makes. Two
    records meet at the last newline between the separators around them: only a first field
    (a job id, a node name) never holds one."""
    width = _TEXT_FIELDS[what]
    command = TEXT_COMMANDS[what][0]
    if not output.strip():
        return []
    found = _SEPARATOR.search(output)
    if found is None:
        raise ValueError(f"unexpected {command} answer, without its separator: {output[:200]!r}")
    body = output[:-1] if output.endswith("\n") else output
    parts = body.split(found.group())
    if (len(parts) - 1) % (width - 1):
        raise ValueError(f"unexpected {command} answer: {len(parts)} fields in {output[:200]!r}")
    rows = []
    first = parts[0].strip()
    for start in range(1, len(parts), width - 1):
        fields = [first, *parts[start : start + width - 1]]
        if start + width - 1 < len(parts):
            last, newline, first = fields[-1].rpartition("\n")
            if not newline or not first.strip():
                raise ValueError(f"unexpected {command} answer: no record after {fields[0]!r}")
            fields[-1], first = last, first.strip()
        rows.append(fields)
    return rows
