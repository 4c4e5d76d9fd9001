"""Running one operation request, from the file named to its result: the checks that refuse
it, the run, the events and the result, the exit code. The command line (`run`, `lab up`,
`lab op`) and nothing else calls it."""

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from driver import terminal
from driver.arguments import print_document
from driver.catalog import CatalogError
from driver.documents import Document, DocumentError, load_request
from driver.events import (
    LIFECYCLE_AT_START,
    Context,
    ErrorInfo,
    EventSink,
    EventType,
    InstanceOutcome,
    InstanceStatus,
    Result,
    ResultStatus,
    lifecycle_at_end,
    salvaged_traceparent,
)
from driver.findings import Finding, render_human, render_json
from driver.models.request import OperationRequest
from driver.request_check import RequestCheck, check_request
from driver.runner.locks import InstanceBusy, instance_lock
from driver.runner.outcome import untouched
from driver.runner.plan import RunPlan
from driver.runner.progress import TextProgress
from driver.runner.run import run_playbook
from driver.site import Traces, load_site
from driver.task import check_task_request, run_task
from driver.traces import OperationTrace


class Exit(IntEnum):
    """Documented in docs/platform-contract.md; the platform's app controller branches on these."""

    OK = 0
    FAILED = 1  # lint: findings; run: the operation failed
    INVALID = 2  # usage error, or an invalid request
    BUSY = 3  # another operation holds the instance's lock or its lease
    OUTPUT_FAILED = 74  # sysexits' EX_IOERR: the output could not be written (a full disk)
    PIPE_CLOSED = 141  # what a shell reports for a tool SIGPIPE ended: the reader went away


def report(findings: Sequence[Finding], fmt: str, **extra: object) -> None:
    if fmt == "json":
        print(render_json(findings, **extra))
    else:
        render_human(findings, terminal.console(sys.stdout))


def usage(message: str, fmt: str) -> int:
    if fmt == "json":
        print(render_json([Finding(code="usage", path="$", message=message)], valid=False))
    else:
        terminal.console(sys.stderr).print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return Exit.INVALID


@dataclass
class Refusal:
    """Why a request is not run: `validate-request` and `inventory` report it, `run` turns it
    into its result."""

    # invalid_request, or configuration_invalid: the bundle or the site settings are broken
    error_code: str
    findings: list[Finding]
    # the request as parsed, when it parsed: the result's context comes from it
    document: object = None
    # a usage error (no such file, a broken bundle): one finding, said in one line to people
    usage: bool = False
    # how many findings there were (`findings` lists the first of them)
    findings_total: int = 0


def read_request(request: str) -> Document | str:
    """The request document at `request` ('-': stdin), or why it cannot be read. The path and
    the system's reason go to the driver's own stderr: they are the driver host's, and the
    reason given back (a run's result) must not carry them."""
    if request == "-":
        return load_request(sys.stdin.buffer, "<stdin>")
    path = Path(request)
    try:
        with path.open("rb") as stream:
            return load_request(stream, str(path))
    except FileNotFoundError:
        print(f"slurm-app-driver: {request}: no such file", file=sys.stderr)
        return "the request file does not exist (named on the driver's stderr)"
    except OSError as exc:
        print(f"slurm-app-driver: {request}: {exc.strerror}", file=sys.stderr)
        return "the request file cannot be read (named, with why, on the driver's stderr)"


def load_checked(request: str, *, files: bool) -> RequestCheck | Refusal:
    """The validated request at `request` ('-': stdin), or why it is refused."""
    doc = None
    try:
        read = read_request(request)
        if isinstance(read, str):
            finding = Finding(code="usage", path="$", message=read)
            return Refusal("invalid_request", [finding], usage=True)
        doc = read
        result = check_request(doc, files=files)
        load_site()  # a broken site file stops here, before any host is touched
    except DocumentError as exc:
        return Refusal("invalid_request", [exc.finding])
    except CatalogError as exc:
        # its message names files of the driver's host: the driver's own stderr only
        print(f"slurm-app-driver: {exc}", file=sys.stderr)
        finding = Finding(
            code="usage",
            path="$",
            message="the bundle or the site settings are broken; details on the driver's stderr",
        )
        return Refusal("configuration_invalid", [finding], doc.data if doc else None, usage=True)
    if not result.valid:
        return Refusal(
            "invalid_request", result.findings, doc.data, findings_total=result.findings_total
        )
    return result


def report_refusal(refusal: Refusal, fmt: str) -> int:
    if refusal.usage:
        return usage(refusal.findings[0].message, fmt)
    report(refusal.findings, fmt, valid=False)
    return Exit.INVALID


def refused_run(
    refusal: Refusal, fmt: str, result_file: str | None, events_file: str | None
) -> int:
    """A request that is not run ends like every run: an operation.failed event and the
    result, whose error carries the findings; no host was contacted."""
    if fmt == "text":
        report_refusal(refusal, fmt)
    context = Context.salvaged(refusal.document)
    count = max(refusal.findings_total, len(refusal.findings))
    error = ErrorInfo(
        code=refusal.error_code,
        message=(
            refusal.findings[0].message
            if refusal.usage
            else f"the request is invalid: {count} finding(s)"
        )
        + "; nothing was changed on any host",
        findings=refusal.findings,
    )
    result = Result(
        status=ResultStatus.FAILED,
        error=error,
        touched_hosts=False,
        instance=InstanceOutcome(id=context.app_instance_id, status=InstanceStatus.UNCHANGED),
    )
    try:
        traces = load_site().traces
    except CatalogError:
        traces = Traces()  # the broken site file is what the result reports
    trace = OperationTrace.start(traces, context, salvaged_traceparent(refusal.document))
    with _event_sink(context, fmt != "text", events_file) as sink:
        _conclude(sink, result, result_file, trace)
    return Exit.INVALID


@contextlib.contextmanager
def _event_sink(context: Context, emit: bool, events_file: str | None) -> Iterator[EventSink]:
    """The run's events: JSON lines on stdout when `emit`, and a copy in `events_file`."""
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(Path(events_file).open("w")) if events_file else None
        yield EventSink(context, emit=emit, copy_to=log)


def _conclude(
    sink: EventSink, result: Result, result_file: str | None, trace: OperationTrace
) -> None:
    """How every run ends, refused or run: the instance's lifecycle event where the operation
    changed its lifecycle state, the outcome's event, the result, then the operation's spans
    (the platform has its result before the driver waits for the trace collector)."""
    result = result.model_copy(update={"trace_id": sink.context.trace_id})
    succeeded = result.status == ResultStatus.SUCCEEDED
    lifecycle = lifecycle_at_end(sink.context.operation_type, result)
    if lifecycle is not None:
        failed = lifecycle == EventType.INSTANCE_FAILED and result.error is not None
        sink(lifecycle, instance=result.instance, message=result.error.message if failed else None)
    final = {
        "succeeded": EventType.OPERATION_SUCCEEDED,
        "cancelled": EventType.OPERATION_CANCELLED,
    }.get(result.status, EventType.OPERATION_FAILED)
    sink(final, message=None if succeeded else (result.error.message if result.error else None))
    sink(EventType.OPERATION_RESULT, result=result)
    if result_file:
        Path(result_file).write_text(result.model_dump_json(indent=2) + "\n")
    trace.end(result)


def execute(
    loaded: RequestCheck, fmt: str, result_file: str | None, events_file: str | None
) -> int:
    """Runs a validated request; every path ends with a result event and a documented code."""
    request, version = loaded.request, loaded.version
    assert request is not None and version is not None
    text = fmt == "text"
    console = terminal.console(sys.stdout)
    with _event_sink(Context.of(request), not text, events_file) as sink:
        trace = OperationTrace.start(load_site().traces, sink.context, request.traceparent)
        code = Exit.OK
        # Whether a playbook was started: before that, a failure has touched no host.
        started = False
        try:
            with instance_lock(str(request.instance.id)), cancellation() as cancelled:
                sink(EventType.OPERATION_STARTED)
                if request.operation.type in LIFECYCLE_AT_START:
                    sink(LIFECYCLE_AT_START[request.operation.type])
                plan = RunPlan.of(request, version)
                started = True
                if text:
                    with TextProgress(console, plan.plays, len(plan.inventory.hosts)) as progress:
                        result = run_playbook(plan, sink, progress, cancelled, trace)
                else:
                    result = run_playbook(plan, sink, cancelled=cancelled, trace=trace)
        except InstanceBusy as exc:
            result = untouched(request, ErrorInfo(code="instance_busy", message=str(exc)))
        except Exception as exc:  # the platform must always get a result
            # The details (paths of the driver's host) go to its own stderr, not the result.
            print(f"slurm-app-driver: internal error: {exc!r}", file=sys.stderr)
            error = ErrorInfo(
                code="internal_error",
                message=f"{type(exc).__name__} inside the driver; details on its stderr",
            )
            result = (
                Result(status=ResultStatus.FAILED, error=error)
                if started
                else untouched(request, error)
            )
            code = Exit.FAILED
        if result.error is not None and result.error.code == "instance_busy":
            # this host's lock, or the instance's lease that another driver host holds
            code = Exit.BUSY
        if result.status != ResultStatus.SUCCEEDED and code == Exit.OK:
            code = Exit.FAILED
        _conclude(sink, result, result_file, trace)
    if text:
        render_result(console, request, result)
    return code


@contextlib.contextmanager
def cancellation() -> Iterator[Callable[[], bool]]:
    """SIGTERM, SIGINT and SIGHUP cancel the run instead of killing the driver: the playbook's
    whole tree has ended before the lock is released, and the result says `cancelled`."""
    flag = threading.Event()
    signals = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {number: signal.signal(number, lambda *_: flag.set()) for number in signals}
    try:
        yield flag.is_set
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def render_result(console: Console, request: OperationRequest, result: Result) -> None:
    colour = "green" if result.status == ResultStatus.SUCCEEDED else "red"
    instance = result.instance
    state = f"; instance {instance.status} ({instance.health})" if instance else ""
    console.print(
        f"[{colour}]{request.operation.type} {result.status}[/{colour}] in {result.duration_s} s, "
        f"{result.changed} change(s){state}",
        highlight=False,
    )
    if result.error:
        where = f" on {result.error.host}" if result.error.host else ""
        console.print(
            f"[red]error {result.error.code}[/red]{escape(where)}: {escape(result.error.message)}",
            highlight=False,
        )
    detail = result.adapter_detail
    bundle = getattr(detail, "access_bundle", None)
    if detail is not None and bundle is not None:
        shown = detail.model_dump(
            mode="json",
            include={"cluster_name", "daemon_versions", "nodes", "readiness"},
            exclude_none=True,
        )
        console.print_json(json.dumps(shown))
        console.print_json(bundle.model_dump_json())


def task_file(request: str, fmt: str = "json") -> int:
    """One typed task of the app on its component's host, from the request file at `request`
    ('-': stdin); prints the task's answer (json: one line, as the node agent reads it; text:
    YAML) and exits with the task's code (6: the host could not be reached)."""
    try:
        read = read_request(request)
        if isinstance(read, str):
            return usage(read, fmt)
        checked = check_task_request(read)
    except DocumentError as exc:
        report([exc.finding], fmt, valid=False)
        return Exit.INVALID
    except CatalogError as exc:
        return usage(f"the bundle is broken: {exc}", fmt)
    if checked.request is None or checked.spec is None:
        report(checked.findings, fmt, valid=False)
        return Exit.INVALID
    code, answer = run_task(checked.request, checked.spec)
    print_document(answer, fmt, indent=None)
    return code
