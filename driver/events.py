"""The JSON-lines event stream and the final result the platform's app controller reads."""

import functools
import json
import secrets
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TextIO
from uuid import UUID

from pydantic import ConfigDict, Field, PrivateAttr, TypeAdapter, ValidationError

from driver import terminal
from driver.details.open_ondemand import PortalDetail
from driver.details.slurm import SlurmDetail
from driver.findings import Finding
from driver.models.common import (
    Identifier,
    OperationType,
    OutputModel,
    Slug,
    SparseOutput,
    TraceParent,
    traceparent_ids_valid,
)
from driver.models.request import MemberStatus, OperationRequest
from driver.models.sources import Source


class Context(OutputModel):
    """Carried by every event so each line can be traced on its own (correlation first). A
    field is null only in the result of a request too broken to give it (invalid_request)."""

    model_config = ConfigDict(frozen=True)

    correlation_id: str | None
    """The platform's trace id, from the request."""
    org_id: str | None
    """The request's organisation."""
    project_id: str | None
    """The request's project."""
    app_slug: str | None
    """The instance's app."""
    app_instance_id: str | None
    """The instance's id."""
    operation_id: str | None
    """The operation's id."""
    operation_type: str | None
    """The operation's type."""
    trace_id: str | None
    """The run's trace id (32 hex digits): the request's traceparent's, else one the driver
    started; every host journal entry of the run carries it too."""

    @classmethod
    def of(cls, request: OperationRequest) -> "Context":
        return cls(
            trace_id=request.trace_id,
            correlation_id=request.correlation_id,
            org_id=request.org_id,
            project_id=request.project_id,
            app_slug=request.instance.app_slug,
            app_instance_id=str(request.instance.id),
            operation_id=request.operation.id,
            operation_type=request.operation.type,
        )

    @classmethod
    def salvaged(cls, document: object) -> "Context":
        """What an invalid request's document gives of the context: each value only where it
        is what its field in the contract admits (nothing else of the document is echoed)."""
        doc = document if isinstance(document, dict) else {}
        instance = doc.get("instance") if isinstance(doc.get("instance"), dict) else {}
        operation = doc.get("operation") if isinstance(doc.get("operation"), dict) else {}
        traceparent = salvaged_traceparent(doc)
        return cls(
            trace_id=traceparent.split("-")[1] if traceparent else secrets.token_hex(16),
            correlation_id=_admitted(Identifier, doc.get("correlation_id")),
            org_id=_admitted(Identifier, doc.get("org_id")),
            project_id=_admitted(Identifier, doc.get("project_id")),
            app_slug=_admitted(Slug, instance.get("app_slug")),
            app_instance_id=_admitted(UUID, instance.get("id")),
            operation_id=_admitted(Identifier, operation.get("id")),
            operation_type=_admitted(OperationType, operation.get("type")),
        )


def salvaged_traceparent(document: object) -> str | None:
    """An invalid request's traceparent, where it is one the contract admits."""
    doc = document if isinstance(document, dict) else {}
    traceparent = _admitted(TraceParent, doc.get("traceparent"))
    return traceparent if traceparent is not None and traceparent_ids_valid(traceparent) else None


@functools.cache
def _adapter(kind: Any) -> TypeAdapter:
    return TypeAdapter(kind)


def _admitted(kind: Any, value: object) -> str | None:
    try:
        return str(_adapter(kind).validate_python(value))
    except ValidationError:
        return None


class EventType(StrEnum):
    OPERATION_STARTED = "operation.started"
    PLAY_STARTED = "play.started"
    TASK_STARTED = "task.started"
    HOST_OK = "host.ok"
    HOST_CHANGED = "host.changed"
    HOST_FAILED = "host.failed"
    HOST_UNREACHABLE = "host.unreachable"
    OPERATION_SUCCEEDED = "operation.succeeded"
    OPERATION_FAILED = "operation.failed"
    OPERATION_CANCELLED = "operation.cancelled"
    OPERATION_RESULT = "operation.result"
    # The instance's lifecycle as the platform's events name it (product spec 004): requested
    # when a deploy starts, running when one leaves the instance running (or degraded), failed
    # when any operation leaves it failed, deleting when a decommission starts, deleted when
    # it leaves the instance deleted.
    INSTANCE_REQUESTED = "apps.instance.requested"
    INSTANCE_RUNNING = "apps.instance.running"
    INSTANCE_FAILED = "apps.instance.failed"
    INSTANCE_DELETING = "apps.instance.deleting"
    INSTANCE_DELETED = "apps.instance.deleted"


class ErrorInfo(OutputModel):
    """Why an operation did not succeed."""

    code: str
    """The error's code (docs/platform-contract.md lists each)."""
    message: str
    """What happened, for people; never a secret's value."""
    host: str | None = None
    """The host it happened on, when one."""
    findings: list[Finding] | None = None
    """invalid_request: what is wrong with the request, each naming the field and what was
    expected."""
    # A refusal a playbook reported on purpose: its code and its message less the marker. Set
    # only from a fail or assert task whose msg starts with "[code]" (driver.runner.collector),
    # never read out of other output; the result shows code and message alone.
    _refusal: tuple[str, str] | None = PrivateAttr(default=None)

    @property
    def refusal(self) -> tuple[str, str] | None:
        return self._refusal

    def refused(self, code: str, message: str) -> "ErrorInfo":
        self._refusal = (code, message)
        return self


def connection_reason(message: str) -> str:
    """Why a host was not reached, on one line. Mitogen (the driver's connection) puts its own
    words first and then ssh's stderr, up to 100 lines; the last of those names the cause."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if len(lines) <= 1:
        return lines[0] if lines else "unreachable"
    return f"{lines[0]} … {lines[-1]}"


class MemberResult(OutputModel):
    """A member and its status after the operation."""

    member_id: str | None
    """The platform's id of the member."""
    component_key: str
    """The component it serves."""
    allocation_id: str
    """Its allocation."""
    status: MemberStatus
    """Its status now: the platform records it."""


class InstanceStatus(StrEnum):
    """The instance's status after the operation; `unchanged`: keep the one recorded."""

    RUNNING = "running"
    DEGRADED = "degraded"
    FAILED = "failed"
    STOPPED = "stopped"
    DELETED = "deleted"
    UNCHANGED = "unchanged"


class Health(StrEnum):
    """The instance's health after the operation."""

    HEALTHY = "healthy"
    DEGRADED = "degraded"
    FAILED = "failed"
    UNKNOWN = "unknown"


class InstanceOutcome(SparseOutput):
    """The instance's status and health after the operation."""

    id: str | None
    """The instance's id (null only for a request too broken to give it)."""
    status: InstanceStatus
    """Its status; `unchanged` when the operation touched no host or only previewed."""
    health: Health | None = None
    """Its health; absent with status `unchanged`."""


class HostStats(OutputModel):
    """What the run did on one host: its tasks by outcome."""

    ok: int = 0
    """Tasks that found the host as wanted."""
    changed: int = 0
    """Tasks that changed it."""
    failed: int = 0
    """Tasks that failed."""
    unreachable: int = 0
    """Tasks that could not reach it."""
    skipped: int = 0
    """Tasks skipped."""


class ResultStatus(StrEnum):
    """How the operation ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Result(OutputModel):
    """What an operation did: the last event's `result`, and `run --result-file`."""

    status: ResultStatus
    """succeeded, failed (judged by the hosts' failures and unreachables, not rc) or
    cancelled."""
    error: ErrorInfo | None = None
    """Why it did not succeed."""
    touched_hosts: bool = True
    """False when the operation stopped before any host was contacted: members as sent."""
    members: list[MemberResult] = Field(default_factory=list)
    """Every member with its new status."""
    instance: InstanceOutcome | None = None
    """The instance's status and health."""
    changed: int = 0
    """Changed tasks in total."""
    hosts: dict[str, HostStats] = Field(default_factory=dict)
    """Per host, its tasks by outcome."""
    duration_s: float = 0.0
    """How long the run took, in seconds."""
    adapter_detail: SlurmDetail | PortalDetail | None = None
    """The app's detail of what the run found and did (which keys an operation gives is in
    docs/platform-contract.md)."""
    trace_id: str | None = None
    """The run's trace id, as every event of the run carries it."""
    sources: list[Source] | None = None
    """What an operation that installs software installed from, as the source policy allowed
    it (the site's deny list, then the request's `source_policy`); null for one that installs
    nothing."""


class Event(Context):
    """One line of `run`'s JSON-lines output."""

    ts: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))
    """When, in UTC (ISO 8601, milliseconds)."""
    event: EventType
    """What happened."""
    play: str | None = None
    """play.started: the play's name."""
    task: str | None = None
    """task.started and host events: the task's name."""
    host: str | None = None
    """Host events: the host."""
    message: str | None = None
    """host.failed, host.unreachable, operation.failed, apps.instance.failed: what happened."""
    instance: InstanceOutcome | None = None
    """apps.instance.running, .failed and .deleted: the instance's status and health."""
    result: Result | None = None
    """operation.result: the operation's result."""


# The lifecycle event an operation's start means, by its type.
LIFECYCLE_AT_START = {
    "deploy": EventType.INSTANCE_REQUESTED,
    "decommission": EventType.INSTANCE_DELETING,
}


def lifecycle_at_end(operation_type: str | None, result: Result) -> EventType | None:
    """The lifecycle event the operation's end means, from the instance's status in its result.
    None where the instance did not change its lifecycle state: a deploy refused before any
    host changed reports the instance `unchanged`, and the platform keeps the status it has."""
    status = result.instance.status if result.instance else None
    if status == InstanceStatus.FAILED:
        return EventType.INSTANCE_FAILED
    if operation_type == "deploy" and status in (InstanceStatus.RUNNING, InstanceStatus.DEGRADED):
        return EventType.INSTANCE_RUNNING
    if operation_type == "decommission" and status == InstanceStatus.DELETED:
        return EventType.INSTANCE_DELETED
    return None


class EventSink:
    """Writes events as JSON lines; `text` mode leaves the terminal to the progress view."""

    def __init__(
        self,
        context: Context,
        stream: TextIO | None = None,
        *,
        emit: bool = True,
        copy_to: TextIO | None = None,
    ) -> None:
        self.context = context
        self.streams = [s for s in ((stream or sys.stdout) if emit else None, copy_to) if s]
        self.events: list[Event] = []

    def __call__(self, event: EventType, **fields: Any) -> Event:
        record = Event(event=event, **self.context.model_dump(), **fields)
        self.events.append(record)
        # an event's own fields are absent where they say nothing; the context's are always
        # there (null only for a request too broken to give them), the result keeps its nulls
        dumped = record.model_dump(mode="json")
        line = (
            json.dumps(
                {
                    key: value
                    for key, value in dumped.items()
                    if value is not None or key in Context.model_fields
                }
            )
            + "\n"
        )
        for stream in list(self.streams):
            try:
                stream.write(line)
                stream.flush()
            except OSError:
                if stream is not sys.stdout:
                    raise
                # the platform stopped reading (or stdout's disk is full): the operation goes on
                # to its end, its events in --events-file and its result in --result-file
                terminal.silence_stdout()
                self.streams.remove(stream)
        return record
