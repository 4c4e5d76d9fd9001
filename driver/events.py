"""The JSON-lines event stream and the final result the platform's app controller reads."""

import json
import sys
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TextIO

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from driver.models.request import MemberStatus, OperationRequest


class Context(BaseModel):
    """Carried by every event so each line can be traced on its own (correlation first)."""

    model_config = ConfigDict(frozen=True)

    correlation_id: str
    org_id: str
    project_id: str
    app_slug: str
    app_instance_id: str
    operation_id: str
    operation_type: str

    @classmethod
    def of(cls, request: OperationRequest) -> "Context":
        return cls(
            correlation_id=request.correlation_id,
            org_id=request.org_id,
            project_id=request.project_id,
            app_slug=request.instance.app_slug,
            app_instance_id=str(request.instance.id),
            operation_id=request.operation.id,
            operation_type=request.operation.type,
        )


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


class Event(Context):
    ts: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="milliseconds"))
    event: EventType
    play: str | None = None
    task: str | None = None
    host: str | None = None
    message: str | None = None
    result: dict[str, Any] | None = None


class ErrorInfo(BaseModel):
    code: str
    message: str
    host: str | None = None
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


class MemberResult(BaseModel):
    member_id: str | None
    component_key: str
    allocation_id: str
    status: MemberStatus


class InstanceStatus(StrEnum):
    RUNNING = "running"
    DEGRADED = "degraded"
    FAILED = "failed"
    STOPPED = "stopped"
    DELETED = "deleted"


class Health(StrEnum):
    HEALTHY = "healthy"
    DEGRADED = "degraded"
    FAILED = "failed"
    UNKNOWN = "unknown"


class HostStats(BaseModel):
    ok: int = 0
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    skipped: int = 0


class Result(BaseModel):
    status: str
    error: ErrorInfo | None = None
    # False when the operation stopped before any host was contacted (members as sent)
    touched_hosts: bool = True
    members: list[MemberResult] = Field(default_factory=list)
    instance: dict[str, str] = Field(default_factory=dict)
    changed: int = 0
    hosts: dict[str, HostStats] = Field(default_factory=dict)
    duration_s: float = 0.0
    adapter_detail: dict[str, Any] = Field(default_factory=dict)


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
        line = json.dumps(record.model_dump(mode="json", exclude_none=True)) + "\n"
        for stream in self.streams:
            stream.write(line)
            stream.flush()
        return record
