"""The `job` task: one job's detail, its parts (an array's tasks, a het job's components),
from slurmctld while it runs, from accounting once it ended."""

from __future__ import annotations

from typing import Any

from slurm_readers.commands import JOB_RECORD_PATHS_SINCE, slurm_command
from slurm_readers.job_detail import job_part_answer, slurm_job_detail
from slurm_readers.versions import slurm_version_tuple

from slurm_tasks import core
from slurm_tasks.core import TaskError, cluster_user


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


TASKS = {"job": task_job}
