"""The operation's spans, exported over OTLP when the site names a collector (product spec 004's
"trace by trace_id"): one for the operation, one per play, one per task naming the hosts it
ran on. The request's W3C traceparent is the operation span's parent; without one the span
starts the run's own trace, whose id every event, journal entry and the result carry.

OpenTelemetry's SDK is imported only where the site asks for traces: a driver without a
collector pays nothing for it at start."""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

from driver import __version__
from driver.site import Traces

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span

    from driver.events import Context, Result

# a task's span lists at most this many hosts in each of its host attributes, the rest counted
MAX_HOSTS_LISTED = 1000

HOST_OUTCOMES = ("ok", "changed", "failed", "ignored", "unreachable", "skipped")


class OperationTrace:
    """The spans of one operation; every method is a no-op without a collector. Fed by the run's
    Collector from ansible-runner's events, which arrive while the playbook runs, so each span
    starts and ends when its play or task did (within the event stream's delay)."""

    def __init__(self, provider: TracerProvider | None, operation: Span | None) -> None:
        self._provider = provider
        self._operation = operation
        self._play: Span | None = None
        self._task: Span | None = None
        self._task_hosts: dict[str, list[str]] = {}
        self._task_failure: str | None = None

    @classmethod
    def start(cls, settings: Traces, context: Context, traceparent: str | None) -> OperationTrace:
        """The operation's span started; none where the site names no collector, or where the
        SDK cannot start (said on stderr: a trace never stops an operation)."""
        if settings.otlp_endpoint is None:
            return cls(None, None)
        try:
            return cls._started(settings, context, traceparent)
        except Exception as exc:  # the SDK's own errors, whichever: the operation goes on
            print(f"slurm-app-driver: traces: not sent: {exc!r}", file=sys.stderr)
            return cls(None, None)

    @classmethod
    def _started(
        cls, settings: Traces, context: Context, traceparent: str | None
    ) -> OperationTrace:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        class RunTraceIds(RandomIdGenerator):
            """The run's trace id for a root span: the id the events already carry."""

            def generate_trace_id(self) -> int:
                return int(context.trace_id or "0", 16) or super().generate_trace_id()

        _export_failures_to_stderr()
        provider = TracerProvider(
            resource=Resource.create(
                {"service.name": "slurm-app-driver", "service.version": __version__}
            ),
            id_generator=RunTraceIds(),
        )
        exporter = OTLPSpanExporter(endpoint=settings.otlp_endpoint, timeout=settings.timeout_s)
        provider.add_span_processor(
            BatchSpanProcessor(exporter, export_timeout_millis=settings.timeout_s * 1000)
        )
        parent = TraceContextTextMapPropagator().extract(
            {"traceparent": traceparent} if traceparent else {}
        )
        operation = provider.get_tracer("slurm-app-driver").start_span(
            f"{context.operation_type or 'operation'} {context.app_slug or ''}".strip(),
            context=parent,
            attributes={
                f"slurm_app.{name}": value
                for name, value in context.model_dump(exclude={"trace_id"}).items()
                if value is not None
            },
        )
        return cls(provider, operation)

    def _child(self, parent: Span | None, name: str, attributes: dict[str, Any]) -> Span | None:
        if self._provider is None or parent is None:
            return None
        from opentelemetry import trace

        return self._provider.get_tracer("slurm-app-driver").start_span(
            name, context=trace.set_span_in_context(parent), attributes=attributes
        )

    def play(self, name: str, pattern: str) -> None:
        self._end_play()
        self._play = self._child(
            self._operation, name, {"ansible.play.name": name, "ansible.play.hosts": pattern}
        )

    def task(self, name: str, action: str) -> None:
        self._end_task()
        self._task = self._child(
            self._play or self._operation,
            name,
            {"ansible.task.name": name, "ansible.task.action": action},
        )

    def host(self, host: str | None, outcome: str, failure: str | None = None) -> None:
        """One host's answer to the current task: one of HOST_OUTCOMES."""
        if self._task is None or host is None:
            return
        self._task_hosts.setdefault(outcome, []).append(host)
        if failure is not None and self._task_failure is None:
            self._task_failure = failure

    def _end_task(self) -> None:
        if self._task is None:
            return
        from opentelemetry.trace import Status, StatusCode

        hosts = [host for outcome in HOST_OUTCOMES for host in self._task_hosts.get(outcome, [])]
        self._task.set_attribute("ansible.task.hosts", hosts[:MAX_HOSTS_LISTED])
        self._task.set_attribute("ansible.task.host_count", len(hosts))
        for outcome in HOST_OUTCOMES:
            listed = self._task_hosts.get(outcome)
            if listed:
                self._task.set_attribute(f"ansible.task.hosts_{outcome}", listed[:MAX_HOSTS_LISTED])
        if self._task_failure is not None:
            self._task.set_status(Status(StatusCode.ERROR, self._task_failure))
        self._task.end()
        self._task, self._task_hosts, self._task_failure = None, {}, None

    def _end_play(self) -> None:
        self._end_task()
        if self._play is not None:
            self._play.end()
            self._play = None

    def end(self, result: Result) -> None:
        """Ends every open span with the operation's outcome, then sends what is left."""
        if self._provider is None or self._operation is None:
            return
        from opentelemetry.trace import Status, StatusCode

        self._end_play()
        self._operation.set_attribute("slurm_app.result.status", str(result.status))
        if result.error is not None:
            self._operation.set_attribute("slurm_app.error.code", result.error.code)
            if result.error.host:
                self._operation.set_attribute("slurm_app.error.host", result.error.host)
        if result.status != "succeeded":
            message = result.error.message if result.error is not None else str(result.status)
            self._operation.set_status(Status(StatusCode.ERROR, message))
        self._operation.end()
        self._operation = None
        try:
            # a collector that does not answer costs the run at most the site's timeout, here
            self._provider.shutdown()
        except Exception as exc:  # as in start: a trace never fails an operation
            print(f"slurm-app-driver: traces: not sent: {exc!r}", file=sys.stderr)


def _export_failures_to_stderr() -> None:
    """The SDK says why an export failed through logging: to the driver's own stderr, never to
    stdout (the platform reads the events there), and never failing the operation."""
    logger = logging.getLogger("opentelemetry")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("slurm-app-driver: traces: %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
