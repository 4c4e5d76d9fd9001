"""Accounting: every job and step slurmdbd recorded (sacct), with its exit code."""

from __future__ import annotations

from typing import Any

from .answers import first_state, integer, is_json, json_records, none_if_null
from .commands import text_rows


def slurm_accounting(output: str) -> list[dict[str, Any]]:
    """One record per job and per step: id ('12', '12.batch', '12.0'), job_id, state, user,
    nodes (count), node_list, exit_code."""
    if not is_json(output):
        records: list[dict[str, Any]] = []
        for record_id, state, user, nodes, node_list, exit_code in text_rows(output, "accounting"):
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
                    "nodes": integer(nodes) if none_if_null(node_list) else None,
                    "node_list": none_if_null(node_list),
                    "exit_code": exit_code or None,
                }
            )
        return records
    records = []
    for job in json_records(output, "jobs"):
        job_id = str(job["job_id"])
        records.append(
            {
                "id": job_id,
                "job_id": job_id,
                "state": first_state(job["state"]["current"]),
                "user": job.get("user") or None,
                "nodes": integer(job.get("allocation_nodes"))
                if none_if_null(job.get("nodes"))
                else None,
                "node_list": none_if_null(job.get("nodes")),
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
                    "state": first_state(step["state"]),
                    "user": job.get("user") or None,
                    "nodes": integer(step_nodes.get("count")),
                    "node_list": none_if_null(step_nodes.get("range")),
                    "exit_code": _exit_code(step.get("exit_code")),
                }
            )
    return records


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
    code = integer(value.get("return_code"))
    signal = value.get("signal") or {}
    number = integer(signal.get("id")) if isinstance(signal, dict) else integer(signal)
    return f"{code or 0}:{number or 0}"
