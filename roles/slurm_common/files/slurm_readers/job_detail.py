"""One job in detail (the typed task `job`): its parts as slurmctld or accounting holds them,
the files slurmd wrote its output to, and the answer's shape."""

from __future__ import annotations

import re
import time
from typing import Any

from .answers import integer, none_if_null
from .commands import text_rows
from .jobs import _job_order, _local_time, _minutes, _started, _tres, _tres_count, slurm_tres_gpus


def slurm_job_detail(output: str, what: str, with_paths: bool = True) -> list[dict[str, Any]]:
    """The parts of one job in detail (an array's tasks, a het job's components, else the job
    alone), from slurmctld (`what` "job": squeue) or from accounting ("job_record": sacct -X).
    Times are epoch seconds, elapsed in seconds, time_limit in minutes (None: unlimited);
    exit_code and signal as Slurm recorded them (None while the job has not ended); stdout and
    stderr as the job gave them, patterns unexpanded (slurm_output_path expands them; stderr
    is stdout's file when the job named none; None where Slurm records none: an interactive
    job, or 22.05's accounting, `with_paths` False)."""
    parts = []
    for row in text_rows(output, what):
        fields = dict(zip(_DETAIL_COLUMNS[what], row, strict=True))
        if what == "job":
            raw = fields["id"]
            array_id, task = fields["array_job_id"], fields["array_task_id"]
            het_id, offset = fields["het_job_id"], fields["het_job_offset"]
            if task.isdigit():
                shown = f"{array_id}_{task}"
            elif task not in ("", "N/A"):
                shown = f"{array_id}_[{task.strip('[]')}]"
            elif het_id.isdigit() and offset.isdigit():
                shown = f"{het_id}+{offset}"
            else:
                shown = raw
        else:
            raw, shown = fields["id"], fields["shown"]
            head, _, tail = shown.partition("_")
            array_id, task = (head, tail) if tail else ("", "N/A")
            het_head, plus, het_offset = shown.partition("+")
            het_id, offset = (het_head, het_offset) if plus else ("", "")
        state = fields["state"].split()[0].upper() if fields["state"] else ""
        exit_code, colon, signal = fields["exit_code"].partition(":")
        if not colon and exit_code.isdigit():  # 22.05's squeue: the wait status itself
            status = int(exit_code)
            exit_code, signal = str(status >> 8), str(status & 0x7F)
        tres = _tres(fields["tres"])
        stdout, stderr = (
            _recorded_path(fields, which, task, raw) if with_paths else None
            for which in ("stdout", "stderr")
        )
        parts.append(
            {
                "job_id": shown,
                "id": integer(raw),
                "array_job_id": integer(array_id) if task not in ("", "N/A") else None,
                "array_task_id": integer(task),
                "het_job_id": integer(het_id),
                "het_job_offset": integer(offset),
                "name": fields["name"],
                "user": none_if_null(fields["user"]),
                "account": none_if_null(fields["account"]),
                "qos": none_if_null(fields["qos"]),
                "partition": none_if_null(fields["partition"]),
                "state": state,
                "reason": none_if_null(fields["reason"]),
                "exit_code": integer(exit_code) if state not in _LIVE else None,
                "signal": integer(signal) if state not in _LIVE else None,
                "submit_time": _local_time(fields["submit_time"]),
                "start_time": _started(state, _local_time(fields["start_time"])),
                "end_time": _local_time(fields["end_time"]) if state not in _LIVE else None,
                "elapsed": _duration(fields["elapsed"]),
                "time_limit": _minutes(fields["time_limit"]),
                "node_list": none_if_null(fields["node_list"]),
                "node_count": integer(fields["node_count"]),
                "batch_host": none_if_null(fields.get("batch_host", "")),
                "cpus": integer(fields["cpus"])
                if "cpus" in fields
                else _tres_count(fields["tres"], "cpu"),
                "memory_mb": _megabytes(tres.get("mem")),
                "gpus": slurm_tres_gpus(fields["tres"]),
                "gpus_by_type": {
                    key.split(":", 1)[1]: integer(value) or 0
                    for key, value in tres.items()
                    if key.startswith("gres/gpu:")
                },
                "work_dir": none_if_null(fields["work_dir"]),
                "stdout": stdout,
                "stderr": stderr if stderr is not None else stdout,
            }
        )
    return sorted(parts, key=_job_order)


def _recorded_path(fields: dict[str, str], which: str, task: str, raw: str) -> str | None:
    path = fields[which]
    if path in ("", "(null)"):
        return None
    work_dir = fields["work_dir"].rstrip("/")
    if task.isdigit() and path == f"{work_dir}/slurm-{raw}.out":
        # 22.05's squeue shows an array task that named no file as slurm-<its own id>.out;
        # slurmd wrote Slurm's default for arrays
        return f"{work_dir}/slurm-%A_%a.out"
    return path


# The states of a job that has not ended: no exit code, end time or signal yet.
_LIVE = {"PENDING", "RUNNING", "SUSPENDED", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING"}

_DETAIL_COLUMNS = {
    "job": (
        "id", "array_job_id", "array_task_id", "het_job_id", "het_job_offset", "state", "user",
        "account", "qos", "partition", "node_count", "cpus", "tres", "submit_time",
        "start_time", "end_time", "elapsed", "time_limit", "node_list", "batch_host", "reason",
        "exit_code", "work_dir", "stdout", "stderr", "name",
    ),
    "job_record": (
        "id", "shown", "state", "exit_code", "user", "account", "qos", "partition",
        "node_count", "node_list", "tres", "submit_time", "start_time", "end_time", "elapsed",
        "time_limit", "reason", "work_dir", "stdout", "stderr", "name",
    ),
}  # fmt: skip


def _duration(text: str) -> int | None:
    """squeue's TimeUsed ('0:04', '1:02:03', '1-02:03:04') or sacct's Elapsed in seconds."""
    days, _, clock = text.strip().rpartition("-")
    parts = clock.split(":")
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    if not (days or "0").isdigit():
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return int(days or 0) * 86400 + seconds


_MEMORY_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _megabytes(text: str | None) -> int | None:
    """A TRES memory amount ('1000M', '2G', '24105M') in MiB, as Slurm counts MB."""
    match = re.fullmatch(r"([0-9.]+)([KMGT]?)", (text or "").strip())
    if match is None:
        return None
    return round(float(match.group(1)) * _MEMORY_UNITS[match.group(2) or "M"])


# sbatch's filename pattern: %% and a letter, an optional zero-padding width between.
_OUTPUT_PATTERN = re.compile(r"%(%|([0-9]*)([AabJjNnstux]))")


def slurm_output_path(part: dict[str, Any], which: str, first_node: str | None) -> str | None:
    """Where a job part's batch stdout or stderr (`which`) went, as slurmd expands the
    pattern it was given (sbatch's --output replacement symbols: %A %a %b %J %j %N %n %s %t %u
    %x, a width such as %3a zero-pads; a backslash anywhere turns the replacements off), made
    absolute from the part's working directory. `first_node`: the batch host's name (%N).
    None where Slurm recorded no path."""
    pattern = part[which]
    if pattern is None:
        return None
    if "\\" in pattern:
        path = pattern.replace("\\", "")
    else:
        array_task = part["array_task_id"]
        values = {
            "A": part["array_job_id"] if array_task is not None else part["id"],
            "a": array_task if array_task is not None else 4294967294,
            "b": array_task % 10 if array_task is not None else 0,
            "J": f"{part['id']}.batch",
            "j": part["id"],
            "N": (first_node or "").split(".")[0],
            "n": 0,
            "s": "batch",
            "t": 0,
            "u": part["user"] or "",
            "x": part["name"],
        }

        def replace(match: re.Match[str]) -> str:
            if match.group(1) == "%":
                return "%"
            value = values[match.group(3)]
            width = int(match.group(2) or 0)
            return str(value).zfill(width) if isinstance(value, int) else str(value)

        path = _OUTPUT_PATTERN.sub(replace, pattern)
    if not path.startswith("/"):
        path = f"{(part['work_dir'] or '').rstrip('/')}/{path}"
    return path


def duration(seconds: int | None) -> str | None:
    """Slurm's way: 1-02:03:04, 02:03:04."""
    if seconds is None or seconds < 0:
        return None
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def iso(epoch: int | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)) if epoch else None


def job_part_answer(part: dict[str, Any], first_node: str | None) -> dict[str, Any]:
    """A part as the `job` task answers it (the manifest's output schema): times in UTC ISO
    8601, durations as Slurm prints them, the output files expanded."""
    return {
        "job_id": part["job_id"],
        "array_job_id": part["array_job_id"],
        "array_task_id": part["array_task_id"],
        "het_job_id": part["het_job_id"],
        "het_job_offset": part["het_job_offset"],
        "name": part["name"],
        "user": part["user"],
        "account": part["account"],
        "qos": part["qos"],
        "partition": part["partition"],
        "state": part["state"].lower(),
        "reason": part["reason"],
        "exit_code": part["exit_code"],
        "signal": part["signal"],
        "submit_time": iso(part["submit_time"]),
        "start_time": iso(part["start_time"]),
        "end_time": iso(part["end_time"]),
        "elapsed": duration(part["elapsed"]),
        "time_limit": duration(part["time_limit"] * 60) if part["time_limit"] else "UNLIMITED",
        "nodes": part["node_list"] or "",
        "node_count": part["node_count"],
        "batch_host": part["batch_host"] or first_node,
        "cpus": part["cpus"],
        "memory_mb": part["memory_mb"],
        "gpus": part["gpus"],
        "gpus_by_type": part["gpus_by_type"],
        "work_dir": part["work_dir"],
        "stdout": slurm_output_path(part, "stdout", part["batch_host"] or first_node),
        "stderr": slurm_output_path(part, "stderr", part["batch_host"] or first_node),
    }
