"""How the bundle asks Slurm about its state and how it reads the answers.

One module for every reader: the roles use it as Ansible filters, the driver imports it, and
the monitoring exporter ships it to the controller. It is plain Python 3.9+ with the standard
library only, so it runs on any customer host without pip.

Readers accept either answer: `--json` (stable field names, no quoting problems) or the text
of the formats below, which are faster where many jobs are read. The JSON shapes differ across
versions: 22.05 (openapi v0.0.38) gives scalar states and plain numbers; 23.02+ give state
lists and {set, infinite, number} wrappers; per-node records come from `sinfo --json` before
23.02 and from `scontrol show nodes --json` after (24.11's `sinfo --json` groups nodes). Both
are read into the same records.

Slurm prints a job's name and a node's reason as given, newlines and `|` included, so no fixed
character tells a text field from the next. Each text query separates its fields with a
separator of its own (`|`, 24 random hex digits, `|`; new at every call), which no job name
submitted before the call can hold; the reader takes the first one in the answer, which
follows the first record's first field (a job id or node name: Slurm makes those). A record
may then hold newlines anywhere but in its first field. A user who reads the command line in
the process list while the query runs and renames a pending job before slurmctld answers
(milliseconds) could still learn one separator; what that job can then forge is one query's
reading, for that query alone.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from typing import Any

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
NODE_FIELDS = ("%N", "%T", "%C", "%m", "%G", "%P", "%E")
ACCOUNTING_FIELDS = ("JobID", "State", "User", "NNodes", "NodeList", "ExitCode")
# What stands between two fields of a text answer; SEPARATOR_MARK in a format is replaced by a
# new one per call (text_command).
SEPARATOR_MARK = "{separator}"
_SEPARATOR = re.compile(r"\|[0-9a-f]{24}\|")
TEXT_COMMANDS: dict[str, list[str]] = {
    "nodes": ["sinfo", "-h", "-N", "-o", SEPARATOR_MARK.join(NODE_FIELDS)],
    "jobs": [
        "squeue",
        "-h",
        "-a",
        "-O",
        ",".join([f"{field}:{SEPARATOR_MARK}" for field in JOB_FIELDS[:-1]] + ["Name:"]),
    ],
    # The jobs that left the queue, one row each (-X: no steps), for the Jobs tab's completed
    # and failed views; slurm_command adds the window's start.
    "history": [
        "sacct",
        "-n",
        "-P",
        f"--delimiter={SEPARATOR_MARK}",
        "-X",
        "-a",
        "-o",
        ",".join(HISTORY_FIELDS),
    ],
    "accounting": [
        "sacct",
        "-n",
        "-P",
        f"--delimiter={SEPARATOR_MARK}",
        "-a",
        "-o",
        ",".join(ACCOUNTING_FIELDS),
    ],
}
_TEXT_FIELDS = {
    "nodes": len(NODE_FIELDS),
    "jobs": len(JOB_FIELDS),
    "accounting": len(ACCOUNTING_FIELDS),
    "history": len(HISTORY_FIELDS),
}

# Each query's JSON form, from the first version where it is right. 22.05's `sacct --json`
# reports exit code 0 for a job that exited 3 (openapi dbv0.0.38), so accounting uses the text
# form there; 22.05's `scontrol` has no --json at all (nodes come from its `sinfo --json`).
JSON_SINCE = {"nodes": (21, 8), "jobs": (21, 8), "accounting": (23, 2)}
SCONTROL_JSON_SINCE = (23, 2)
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
_NULLS = (None, "", "(null)", "N/A", "None", "none", "None assigned")

# What sinfo's %T prints for a drained node, by whether it still runs something.
_DRAIN_WORDS = {"drained": "idle", "draining": "allocated"}


def slurm_version_tuple(version: str) -> tuple[int, ...]:
    """'24.11.5' (or 'slurm-wlm 24.11.5', or 'slurm 22.05.8') -> (24, 11, 5)."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", str(version))
    if not match:
        raise ValueError(f"not a Slurm version: {version!r}")
    return tuple(int(part) for part in match.groups(default="0"))


def slurm_version(output: str) -> str:
    """'slurm-wlm 24.11.5' (any daemon's -V) -> '24.11.5'; '22.05.8' keeps its zero."""
    match = re.search(r"\d+\.\d+(?:\.\d+)?", str(output))
    if not match:
        raise ValueError(f"not a Slurm version: {output!r}")
    return match.group(0)


def slurm_command_forms(what: str, prefix: str = "") -> dict[str, list[str]]:
    """Every JSON form of `what` across the Slurm versions the bundle reads, keyed by `prefix`
    and the command's name: a read that cannot ask for the version first runs them all in the
    same round trip, then keeps the one named by `(what | slurm_command(version))[0]`."""
    forms = (
        slurm_command(what, ".".join(map(str, since)))
        for since in (JSON_SINCE[what], SCONTROL_JSON_SINCE)
    )
    return {prefix + argv[0]: argv for argv in forms}


def slurm_command(
    what: str,
    version: str = "",
    json: bool = True,
    job_ids: list[Any] | None = None,
    nodes: list[str] | None = None,
    ended: bool = False,
    since_days: int = 7,
) -> list[str]:
    """The argv that asks this Slurm version about `what` (nodes, jobs, accounting): its JSON
    form where the version has a right one and `json` is true, else the text form (which any
    version reads alike: the version may then be empty). `nodes` narrows a nodes or jobs
    query; a narrowed query is always the text form (22.05's `sinfo --json` ignores `-n`,
    the text forms filter alike in every version). `job_ids` narrows an accounting query.
    `ended` makes the text jobs query list the jobs that ended but slurmctld still holds, as
    `squeue --json` always does. `history` (text in every version) covers `since_days`."""
    if what not in TEXT_COMMANDS:
        raise ValueError(f"unknown Slurm query {what!r}; expected one of {sorted(TEXT_COMMANDS)}")
    node_list = ",".join(nodes or [])
    if node_list:
        json = False
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
        argv = text_command(what)
        if node_list:
            argv[1:1] = ["-n" if what == "nodes" else "-w", node_list]
        if what == "jobs" and ended:
            argv[1:1] = ["-t", "all"]
    if what == "history":
        argv += ["-S", f"now-{int(since_days)}days"]
    if what == "accounting" and job_ids:
        # With -j sacct searches from the epoch, not from today's midnight.
        argv += ["-j", ",".join(str(job_id) for job_id in job_ids)]
    return argv


def text_command(what: str) -> list[str]:
    """The text form of `what` with a separator of its own: a new random one at each call."""
    separator = f"|{secrets.token_hex(12)}|"
    return [arg.replace(SEPARATOR_MARK, separator) for arg in TEXT_COMMANDS[what]]


def slurm_node_hardware(output: str) -> dict[str, Any]:
    """The first line of `slurmd -C` as the numbers a NodeName line needs."""
    fields = dict(
        pair.split("=", 1) for pair in output.strip().splitlines()[0].split() if "=" in pair
    )
    try:
        return {
            "name": fields["NodeName"],
            "cpus": int(fields["CPUs"]),
            "boards": int(fields.get("Boards", 1)),
            "sockets_per_board": int(fields["SocketsPerBoard"]),
            "cores_per_socket": int(fields["CoresPerSocket"]),
            "threads_per_core": int(fields["ThreadsPerCore"]),
            "real_memory": int(fields["RealMemory"]),
        }
    except (KeyError, ValueError) as error:
        raise ValueError(f"unexpected `slurmd -C` output: {output[:200]!r}") from error


def slurm_gres_gpus(gres: str | None) -> int:
    """GPUs in a gres string: 'gpu:h200:8(S:0-1),nic:2' -> 8; '' or '(null)' -> 0."""
    total = 0
    for item in re.split(r",(?![^(]*\))", gres or ""):
        parts = re.sub(r"\(.*\)$", "", item).split(":")
        if parts[0] == "gpu" and len(parts) > 1 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def slurm_nodes(output: str) -> list[dict[str, Any]]:
    """One record per node: name, state (sinfo's word), base_state, flags, cpus, alloc_cpus,
    real_memory, gres, gpus, partitions, reason, version."""
    if _is_json(output):
        return [_node_from_json(node) for node in _json(output, "nodes")]
    nodes: dict[str, dict[str, Any]] = {}
    for fields in _text_rows(output, "nodes"):
        name, state, cpus, memory, gres, partition, reason = fields
        base, flags = _text_state(state)
        alloc, _idle, _other, total = (_int(n) for n in [*cpus.split("/"), "", "", ""][:4])
        node = nodes.setdefault(
            name,
            {
                "name": name,
                "state": _state_word(base, flags),
                "base_state": base,
                "flags": flags,
                "cpus": total,
                "alloc_cpus": alloc,
                "real_memory": _int(memory),
                "gres": _none_if_null(gres),
                "gpus": slurm_gres_gpus(_none_if_null(gres)),
                "partitions": [],
                "reason": _none_if_null(reason),
                "version": None,
            },
        )
        # sinfo -N prints a node once per partition.
        node["partitions"].append(partition.rstrip("*"))
    return list(nodes.values())


def slurm_node_usage(output: str) -> list[dict[str, Any]]:
    """slurm_nodes' records of a `--json` answer, with `alloc_gpus` from each node's
    gres_used and `alloc_memory` (MB; the text forms carry neither)."""
    return [
        {
            **_node_from_json(node),
            "alloc_gpus": slurm_gres_gpus(_none_if_null(node.get("gres_used"))),
            "alloc_memory": _int(node.get("alloc_memory")),
        }
        for node in _json(output, "nodes")
    ]


def slurm_jobs(output: str, ended: bool = False) -> list[dict[str, Any]]:
    """One record per job in the queue: job_id, state, user, account, partition, nodes (count),
    cpus, gpus (held when running, asked for when pending), submit_time and start_time (epoch
    seconds; None while pending, whatever the scheduler estimates), time_limit (minutes; None:
    unlimited), node_list, reason, name. With `ended`, also the jobs that ended but slurmctld
    still holds (MinJobAge), which `squeue --json` lists and the text form when asked with
    `ended`. The text form prints times in the local time zone of the host that ran squeue:
    they are read in this process's."""
    if _is_json(output):
        jobs = [_job_from_json(job) for job in _json(output, "jobs")]
        return sorted((job for job in jobs if ended or job["state"] not in _ENDED), key=_job_order)
    jobs = []
    for row in _text_rows(output, "jobs"):
        job_id, state, user, account, partition, nodes, cpus, tres = row[:8]
        submit_time, start_time, time_limit, node_list, reason, name = row[8:]
        jobs.append(
            {
                "job_id": job_id,
                "state": state.upper(),
                "user": user,
                "account": _none_if_null(account),
                "partition": partition,
                "nodes": _int(nodes),
                "cpus": _int(cpus),
                "gpus": slurm_tres_gpus(tres),
                "submit_time": _local_time(submit_time),
                "start_time": _started(state.upper(), _local_time(start_time)),
                "time_limit": _minutes(time_limit),
                "node_list": node_list or None,
                "reason": _none_if_null(reason),
                "name": name,
            }
        )
    return sorted(jobs, key=_job_order)


def _tres(tres: str | None) -> dict[str, str]:
    return dict(item.split("=", 1) for item in (tres or "").split(",") if "=" in item)


def _tres_count(tres: str | None, name: str) -> int | None:
    return _int(_tres(tres).get(name))


def slurm_tres_gpus(tres: str | None) -> int:
    """GPUs in a TRES string ('cpu=2,node=1,gres/gpu=1'; a typed gres may be listed beside
    its total as 'gres/gpu:h200=1', or alone)."""
    counts = _tres(tres)
    if "gres/gpu" in counts:
        return _int(counts["gres/gpu"]) or 0
    return sum(_int(v) or 0 for k, v in counts.items() if k.startswith("gres/gpu:"))


def slurm_history(output: str) -> list[dict[str, Any]]:
    """The jobs of `sacct -X` (slurm_command's `history`) as slurm_jobs' records, plus elapsed
    (seconds); reason is None (sacct keeps none worth showing for ended jobs)."""
    jobs = []
    for row in _text_rows(output, "history"):
        job_id, state, user, account, partition, nodes, node_list, tres = row[:8]
        submit_time, start_time, elapsed, time_limit, name = row[8:]
        state = state.split()[0].upper() if state else ""  # "CANCELLED by 1000"
        jobs.append(
            {
                "job_id": job_id,
                "state": state,
                "user": user,
                "account": _none_if_null(account),
                "partition": partition,
                "nodes": _int(nodes),
                "cpus": _tres_count(tres, "cpu"),
                "gpus": slurm_tres_gpus(tres),
                "submit_time": _local_time(submit_time),
                "start_time": _started(state, _local_time(start_time)),
                "time_limit": _minutes(time_limit),
                "node_list": _none_if_null(node_list),
                "reason": None,
                "name": name,
                "elapsed": _seconds(elapsed),
            }
        )
    return sorted(jobs, key=_job_order)


def slurm_accounting(output: str) -> list[dict[str, Any]]:
    """One record per job and per step: id ('12', '12.batch', '12.0'), job_id, state, user,
    nodes (count), node_list, exit_code."""
    if not _is_json(output):
        records: list[dict[str, Any]] = []
        for record_id, state, user, nodes, node_list, exit_code in _text_rows(output, "accounting"):
            job_id = record_id.split(".")[0]
            if not user and records and records[-1]["job_id"] == job_id:
                user = records[-1]["user"]  # sacct names the user on the job's row only
            records.append(
                {
                    "id": record_id,
                    "job_id": job_id,
                    # sacct prints "CANCELLED by 1000".
                    "state": state.split()[0] if state else "",
                    "user": user or None,
                    "nodes": _int(nodes) if _none_if_null(node_list) else None,
                    "node_list": _none_if_null(node_list),
                    "exit_code": exit_code or None,
                }
            )
        return records
    records = []
    for job in _json(output, "jobs"):
        job_id = str(job["job_id"])
        records.append(
            {
                "id": job_id,
                "job_id": job_id,
                "state": _first(job["state"]["current"]),
                "user": job.get("user") or None,
                "nodes": _int(job.get("allocation_nodes"))
                if _none_if_null(job.get("nodes"))
                else None,
                "node_list": _none_if_null(job.get("nodes")),
                "exit_code": _exit_code(job.get("exit_code")),
            }
        )
        for step in job.get("steps") or []:
            step_id = _step_id(step, job_id)
            step_nodes = step.get("nodes") or {}
            records.append(
                {
                    "id": step_id,
                    "job_id": job_id,
                    "state": _first(step["state"]),
                    "user": job.get("user") or None,
                    "nodes": _int(step_nodes.get("count")),
                    "node_list": _none_if_null(step_nodes.get("range")),
                    "exit_code": _exit_code(step.get("exit_code")),
                }
            )
    return records


# Words in GPU model names that say nothing about the model.
_GPU_NAME_NOISE = {"nvidia", "tesla", "geforce", "quadro"}


def slurm_gpu_type(model: str) -> str:
    """A Slurm gres type from an NVIDIA model name, so users ask for --gres=gpu:h200:1:
    'NVIDIA H200' -> 'h200', 'NVIDIA A100-SXM4-80GB' -> 'a100', 'NVIDIA H100 80GB HBM3' ->
    'h100', 'NVIDIA RTX A6000' -> 'rtxa6000', 'NVIDIA GeForce RTX 4090' -> 'rtx4090'."""
    words = [w for w in re.split(r"\s+", model.strip().lower()) if w and w not in _GPU_NAME_NOISE]
    if not words:
        raise ValueError(f"not a GPU model name: {model!r}")
    first = words[0].split("-")[0]
    if first in ("rtx", "gtx") and len(words) > 1:
        first += words[1].split("-")[0]
    gres_type = re.sub(r"[^a-z0-9]", "", first)
    if not gres_type:
        raise ValueError(f"no gres type in GPU model name {model!r}")
    return gres_type


# What the worker asks nvidia-smi (after `nvidia-smi`, the path is the host's).
NVIDIA_SMI_QUERY = ["--query-gpu=index,name", "--format=csv,noheader"]


def slurm_gpu_query(nvidia_smi: str) -> list[str]:
    """The argv that asks this nvidia-smi what slurm_gpus reads."""
    return [nvidia_smi, *NVIDIA_SMI_QUERY]


# A GPU's device file, matched whole: the names come from a host whose root is the customer,
# and end up in the controller's gres.conf (`$` would let "/dev/nvidia0\n..." through).
GPU_DEVICE_FILE = re.compile(r"/dev/nvidia[0-9]{1,4}")


def slurm_gpus(query_csv: str, device_files: list[str]) -> dict[str, Any]:
    """The node's GPUs for gres, from `nvidia-smi NVIDIA_SMI_QUERY` (empty when nvidia-smi is
    missing) and the /dev/nvidiaN files found (any other name is ignored). The type is given
    only when nvidia-smi named every GPU and all are the same model; otherwise the count is
    untyped."""
    files = sorted(
        (f for f in device_files if GPU_DEVICE_FILE.fullmatch(f)),
        key=lambda f: int(f.removeprefix("/dev/nvidia")),
    )
    models = []
    for line in query_csv.splitlines():
        fields = [field.strip() for field in line.split(",", 1)]
        if len(fields) == 2 and fields[0].isdigit():
            models.append(fields[1])
    kinds = {slurm_gpu_type(model) for model in models}
    return {
        "count": len(files),
        "files": files,
        "models": models,
        "type": kinds.pop() if len(kinds) == 1 and len(models) == len(files) else None,
    }


def slurm_unit_states_command(units: list[str]) -> list[str]:
    """One `systemctl show` for every unit: a fraction of what service_facts costs a host."""
    return [
        "systemctl",
        "show",
        "--property=Id,LoadState,ActiveState,SubState",
        "--",
        *(f"{unit}.service" for unit in units),
    ]


def slurm_unit_states(output: str, units: list[str]) -> dict[str, str]:
    """{unit: state} from slurm_unit_states_command's answer: 'running', 'failed', 'stopped',
    or 'absent' when the unit is not installed."""
    shown: dict[str, dict[str, str]] = {}
    for block in output.strip().split("\n\n"):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if "Id" in fields:
            shown[fields["Id"].removesuffix(".service")] = fields
    states = {}
    for unit in units:
        fields = shown.get(unit, {})
        if fields.get("LoadState", "not-found") == "not-found":
            states[unit] = "absent"
        elif fields.get("ActiveState") == "failed":
            states[unit] = "failed"
        elif fields.get("SubState") == "running":
            states[unit] = "running"
        else:
            states[unit] = "stopped"
    return states


def slurm_job_ended(state: str) -> bool:
    """Whether a job in this state (squeue's %T word) has ended."""
    return state.strip().upper() in _ENDED


def slurm_taking_jobs(nodes: list[dict[str, Any]], drain_ok: bool = False) -> list[str]:
    """Names of the nodes slurmctld schedules on now: responding, idle or running jobs. With
    drain_ok a drained node counts too (it is up; an operator's drain stays)."""
    key = "base_state" if drain_ok else "state"
    return [
        node["name"]
        for node in nodes
        if node[key] in ("idle", "mixed", "allocated") and "not_responding" not in node["flags"]
    ]


def du_sizes(output: str) -> list[dict[str, Any]]:
    """`du -sb -- PATH...` as [{path, bytes}] (what a teardown reports it destroyed); a
    `linked<TAB>PATH` line (measure.yml: a link on its way, not followed) as bytes None and
    linked true."""
    sizes: list[dict[str, Any]] = []
    for line in output.splitlines():
        size, _, path = line.partition("\t")
        if path and size.isdigit():
            sizes.append({"path": path, "bytes": int(size)})
        elif path and size == "linked":
            sizes.append({"path": path, "bytes": None, "linked": True})
    return sizes


def outside_of(paths: list[str], measured: list[dict[str, Any]]) -> list[str]:
    """The paths that are not, and are not inside, one already measured on this host: a
    teardown that removed /var/lib/prometheus took /var/lib/prometheus/node-exporter with it,
    so its preview must not count that twice either."""
    taken = [str(entry["path"]).rstrip("/") for entry in measured]
    return [
        path
        for path in paths
        if not any(path == done or path.startswith(done + "/") for done in taken)
    ]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "outside_of": outside_of,
            "slurm_command": slurm_command,
            "slurm_command_forms": slurm_command_forms,
            "slurm_version": slurm_version,
            "slurm_unit_states": slurm_unit_states,
            "slurm_unit_states_command": slurm_unit_states_command,
            "du_sizes": du_sizes,
            "slurm_gpu_type": slurm_gpu_type,
            "slurm_gpus": slurm_gpus,
            "slurm_gpu_query": slurm_gpu_query,
            "slurm_node_hardware": slurm_node_hardware,
            "slurm_gres_gpus": slurm_gres_gpus,
            "slurm_nodes": slurm_nodes,
            "slurm_taking_jobs": slurm_taking_jobs,
            "slurm_job_ended": slurm_job_ended,
            "slurm_jobs": slurm_jobs,
            "slurm_history": slurm_history,
            "slurm_accounting": slurm_accounting,
        }


def _is_json(output: str) -> bool:
    return output.lstrip().startswith("{")


def _json(output: str, key: str) -> list[dict[str, Any]]:
    document = json.loads(output)
    errors = [e for e in document.get("errors") or [] if e]
    if errors:
        raise ValueError(f"Slurm reported errors: {errors}")
    return list(document.get(key) or [])


def _text_rows(output: str, what: str) -> list[list[str]]:
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


def _number(value: Any) -> Any:
    """23.02+ wrap numbers as {set, infinite, number}; an unset one is None."""
    if isinstance(value, dict) and "number" in value:
        if value.get("infinite"):
            return "infinite"
        return value["number"] if value.get("set", True) else None
    return value


def _int(value: Any) -> int | None:
    value = _number(value)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _first(value: Any) -> str:
    """A state: 'RUNNING' (22.05) or ['RUNNING'] (23.02+)."""
    if isinstance(value, list):
        return str(value[0]).upper() if value else ""
    return str(value).upper()


def _none_if_null(value: Any) -> Any:
    return None if value in _NULLS else value


def _state_word(base: str, flags: list[str]) -> str:
    """The word sinfo's %T prints."""
    if "drain" in flags and base not in ("down",):
        return "draining" if base in ("allocated", "mixed") or "completing" in flags else "drained"
    if "completing" in flags and base == "idle":
        return "completing"
    return base


def _text_state(word: str) -> tuple[str, list[str]]:
    """sinfo's %T word: 'idle', 'drained', 'mixed+drain', 'idle*' (not responding)."""
    suffixes = word[len(word.rstrip("*~#!%$@^-")) :]
    extra = ["not_responding"] if "*" in suffixes else []
    word = word.rstrip("*~#!%$@^-").lower()
    if word in _DRAIN_WORDS:
        return _DRAIN_WORDS[word], ["drain", *extra]
    base, *flags = word.split("+")
    if base == "completing":
        return "allocated", ["completing", *extra]
    return base, [*flags, *extra]


def _node_from_json(node: dict[str, Any]) -> dict[str, Any]:
    state = node.get("state")
    if isinstance(state, list):  # 23.02+: ["IDLE", "DRAIN"]
        base = str(state[0]).lower() if state else "unknown"
        flags = [str(flag).lower() for flag in state[1:]]
    else:  # 22.05: "idle" plus state_flags ["DRAIN"]
        base = str(state).lower()
        flags = [str(flag).lower() for flag in node.get("state_flags") or []]
    flags = ["not_responding" if flag == "not_responding" else flag for flag in flags]
    gres = _none_if_null(node.get("gres"))
    return {
        "name": node["name"],
        "state": _state_word(base, flags),
        "base_state": base,
        "flags": flags,
        "cpus": _int(node.get("cpus")),
        "alloc_cpus": _int(node.get("alloc_cpus")),
        "real_memory": _int(node.get("real_memory")),
        "gres": gres,
        "gpus": slurm_gres_gpus(gres),
        "partitions": list(node.get("partitions") or []),
        "reason": _none_if_null(node.get("reason")),
        "version": node.get("version") or node.get("slurmd_version"),
    }


def _job_from_json(job: dict[str, Any]) -> dict[str, Any]:
    limit = _number(job.get("time_limit"))
    return {
        "job_id": str(job["job_id"]),
        "state": _first(job.get("job_state")),
        "user": job.get("user_name") or None,
        "account": _none_if_null(job.get("account")),
        "partition": job.get("partition") or None,
        "nodes": _int(job.get("node_count")),
        "cpus": _int(job.get("cpus")),
        # what squeue -O tres-alloc prints: held once running, asked for before
        "gpus": slurm_tres_gpus(job.get("tres_alloc_str") or job.get("tres_req_str")),
        "submit_time": _int(job.get("submit_time")) or None,
        "start_time": _started(_first(job.get("job_state")), _int(job.get("start_time"))),
        "time_limit": limit if isinstance(limit, int) else None,
        "node_list": _none_if_null(job.get("nodes")),
        "reason": _none_if_null(job.get("state_reason")),
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


def _step_id(step: dict[str, Any], job_id: str) -> str:
    """'12.0' / '12.batch': 23.02+ give the whole id; 22.05 only the step's part."""
    ident = (step.get("step") or {}).get("id")
    if isinstance(ident, str) and "." in ident:
        return ident
    return f"{job_id}.{ident}"


def _exit_code(value: Any) -> str | None:
    """'0:0' from 23.02+'s {status, return_code, signal} or 22.05's plain fields."""
    if not isinstance(value, dict):
        return None if value is None else str(value)
    code = _int(value.get("return_code"))
    signal = value.get("signal") or {}
    number = _int(signal.get("id")) if isinstance(signal, dict) else _int(signal)
    return f"{code or 0}:{number or 0}"
