"""`slurm-app-driver task REQUEST`: one of the app's typed tasks (the manifest's `tasks`), run
the way the platform's node agent runs it: the task's command on its component's host, the
task as JSON on stdin, one JSON answer back. For operators and the lab's tests: one SSH exec,
the host's key checked against the allocation's as `run` does, no playbook.

The request is checked like an operation request before anything connects: the model, the
tenant boundary, the app's task and its input schema, a reserved address, the key file.
"""

import json
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from driver.catalog import instance_credentials_dir, load_entry
from driver.documents import Document
from driver.findings import Finding
from driver.models.common import AppVersion, Identifier, PosixName, Slug, StrictModel
from driver.models.manifest import Task, TaskName
from driver.models.request import Allocation, Credentials
from driver.request_check import contract_checked
from driver.request_check.addresses import (
    RESOLVES_RESERVED,
    address_problem,
    resolves_reserved,
)
from driver.request_check.credentials import private_file
from driver.role_code import reserved_accounts
from driver.schema_check import schema_findings

SSH_TIMEOUT_S = 120
# The task command's own exit codes (the manifest's tasks section), and the driver's for an
# allocation it could not reach.
HOST_UNREACHABLE = 6


class TaskInstance(StrictModel):
    """The instance whose task runs."""

    id: UUID
    """The instance's id."""
    app_slug: Slug
    """The instance's app."""
    version: AppVersion
    """The instance's version: its manifest entry declares the task."""


class TaskCall(StrictModel):
    """The task to run and what it is given."""

    name: TaskName
    """One of the version's tasks."""
    user: PosixName | SkipJsonSchema[None] = None
    """The cluster user the platform maps its user to."""
    input: dict[str, Any] = Field(default_factory=dict)
    """The task's input, validated against its input_schema."""


class TaskRequest(StrictModel):
    """One typed task the platform's node agent (or an operator) runs on a member's host."""

    api_version: Literal["v1"]
    """The contract's version."""
    correlation_id: Identifier
    """The platform's trace id; the task's audit line carries it."""
    org_id: Identifier
    """The organisation the project belongs to."""
    project_id: Identifier
    """The project the allocation must belong to."""
    instance: TaskInstance
    """The instance the task belongs to."""
    allocation: Allocation
    """The host of the task's component."""
    credentials: Credentials
    """Where the SSH key is on the driver's host."""
    task: TaskCall
    """The task and its input."""


@dataclass
class TaskCheck:
    findings: list[Finding] = field(default_factory=list)
    request: TaskRequest | None = None
    spec: Task | None = None


def check_task_request(doc: Document, *, files: bool = True) -> TaskCheck:
    result = TaskCheck()
    request, result.findings = contract_checked(doc, "task-request.schema.json", TaskRequest)
    if request is None:
        return result
    findings = []
    if request.allocation.project_id != request.project_id:
        findings.append(
            doc.finding(
                "tenant-boundary",
                ("allocation", "project_id"),
                "the allocation belongs to another project",
            )
        )
    user = request.task.user
    reserved, reserved_prefixes, _ = reserved_accounts()
    if user is not None and (user in reserved or user.startswith(tuple(reserved_prefixes))):
        # a task answers for a cluster user; root's or a daemon's view is the operator's
        findings.append(
            doc.finding(
                "reserved-name",
                ("task", "user"),
                "expected a cluster user, not a system account, group or bundle daemon",
            )
        )
    problem = address_problem(request.allocation.address)
    if problem is None and files and resolves_reserved(request.allocation.address):
        problem = RESOLVES_RESERVED
    if problem is not None:
        findings.append(doc.finding("reserved-address", ("allocation", "address"), problem))
    loaded = load_entry(request.instance.app_slug)
    version = loaded.entry.version(request.instance.version) if loaded else None
    if version is None:
        findings.append(
            doc.finding(
                "unknown-app",
                ("instance",),
                f"no catalog entry {request.instance.app_slug!r} {request.instance.version!r}",
            )
        )
    else:
        spec = next((t for t in version.tasks if t.name == request.task.name), None)
        if spec is None:
            known = ", ".join(t.name for t in version.tasks) or "none"
            findings.append(
                doc.finding("unknown-task", ("task", "name"), f"the app's tasks: {known}")
            )
        else:
            result.spec = spec
            findings += schema_findings(
                doc, spec.input_schema, request.task.input, ("task", "input"), "input"
            )
    if files:
        findings += private_file(
            doc,
            ("credentials", "ssh_private_key_file"),
            Path(request.credentials.ssh_private_key_file),
            "the SSH private key",
            instance_credentials_dir(request.project_id, request.instance.id),
        )
    result.findings = findings
    if not findings:
        result.request = request
    return result


def run_task(request: TaskRequest, spec: Task) -> tuple[int, dict[str, Any]]:
    """The task's command on the allocation: (exit code, answer)."""
    allocation = request.allocation
    envelope = {
        "task": request.task.name,
        "correlation_id": request.correlation_id,
        "input": request.task.input,
    }
    if request.task.user is not None:
        envelope["user"] = request.task.user
    where = (
        allocation.address
        if allocation.ssh_port == 22
        else f"[{allocation.address}]:{allocation.ssh_port}"
    )
    command = spec.command if allocation.ssh_user == "root" else f"sudo -n {spec.command}"
    with tempfile.TemporaryDirectory(prefix="slurm-app-task-") as private:
        known_hosts = Path(private) / "known_hosts"
        known_hosts.write_text("".join(f"{where} {key}\n" for key in allocation.ssh_host_keys))
        argv = [
            "ssh",
            "-F", "/dev/null",
            "-i", request.credentials.ssh_private_key_file,
            "-p", str(allocation.ssh_port),
            "-o", "BatchMode=yes",
            "-o", "IdentitiesOnly=yes",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "CheckHostIP=no",
            "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "ConnectTimeout=15",
            "--", f"{allocation.ssh_user}@{allocation.address}", command,
        ]  # fmt: skip
        try:
            done = subprocess.run(
                argv,
                input=json.dumps(envelope),
                capture_output=True,
                text=True,
                timeout=SSH_TIMEOUT_S,
                check=False,
                env={"PATH": "/usr/bin:/bin", "HOME": private, "LANG": "C.UTF-8"},
            )
        except subprocess.TimeoutExpired:
            return HOST_UNREACHABLE, unreachable(request, f"no answer in {SSH_TIMEOUT_S} s")
    try:
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        message = (done.stderr.strip() or f"ssh exited {done.returncode}")[-500:]
        return HOST_UNREACHABLE, unreachable(request, message)
    return done.returncode, answer


def unreachable(request: TaskRequest, message: str) -> dict[str, Any]:
    return {
        "task": request.task.name,
        "correlation_id": request.correlation_id,
        "status": "error",
        "error": {
            "code": "host_unreachable",
            "message": f"{request.allocation.hostname}: {message}",
            "retryable": True,
        },
    }
