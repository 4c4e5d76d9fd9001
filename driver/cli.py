"""The `slurm-app-driver` command line."""

import argparse
import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from enum import IntEnum
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from driver import __version__
from driver.catalog import CatalogError
from driver.documents import DocumentError, load_request
from driver.events import Context, ErrorInfo, EventSink, EventType, Result
from driver.findings import Finding, Severity, render_human, render_json
from driver.inventory import inventory_yaml
from driver.lint import UsageError, lint_paths, resolve_manifests
from driver.models.request import OperationRequest
from driver.request_check import RequestCheck, check_request
from driver.runner.locks import InstanceBusy, instance_lock
from driver.runner.outcome import untouched
from driver.runner.plan import RunPlan
from driver.runner.progress import TextProgress
from driver.runner.run import run_playbook
from driver.schema_check import shipped_schema
from driver.schemagen import SHIPPED, render
from driver.site import load_site
from driver.task import check_task_request, run_task


class Exit(IntEnum):
    """Documented in docs/platform-contract.md; the platform's app controller branches on these."""

    OK = 0
    FAILED = 1  # lint: findings; run: the operation failed
    INVALID = 2  # usage error, or an invalid request
    BUSY = 3  # another operation holds the instance lock


def _report(findings: Sequence[Finding], fmt: str, **extra: object) -> None:
    if fmt == "json":
        print(render_json(findings, **extra))
    else:
        render_human(findings, Console(file=sys.stdout))


def _usage(message: str, fmt: str) -> int:
    if fmt == "json":
        print(render_json([Finding(code="usage", path="$", message=message)], valid=False))
    else:
        Console(file=sys.stderr).print(f"[red]error:[/red] {escape(message)}", highlight=False)
    return Exit.INVALID


def cmd_lint(args: argparse.Namespace) -> int:
    paths = args.paths or [Path("manifests")]
    try:
        findings = lint_paths(paths)
    except UsageError as exc:
        return _usage(str(exc), args.format)
    _report(findings, args.format)
    errors = [f for f in findings if f.severity is Severity.ERROR or args.strict]
    if args.format == "human" and not findings:
        print(f"ok: {len(resolve_manifests(paths))} manifest(s), no findings")
    return Exit.FAILED if errors else Exit.OK


def cmd_validate_request(args: argparse.Namespace) -> int:
    loaded = _load_request(args, files=args.check_files)
    if isinstance(loaded, int):
        return loaded
    request = loaded.request
    assert request is not None
    if args.format == "json":
        _report([], "json", valid=True)
    else:
        print(
            f"ok: {request.operation.type} on {request.instance.app_slug} "
            f"{request.instance.version} instance {request.instance.id}"
        )
    return Exit.OK


def _load_request(args: argparse.Namespace, *, files: bool) -> RequestCheck | int:
    """The validated request named on the command line, or the exit code after reporting why
    it is invalid."""
    return _load_checked(args.request, args.format, files=files)


def _load_checked(request: str, output_format: str, *, files: bool) -> RequestCheck | int:
    """The validated request at `request` ('-': stdin), or the exit code after reporting why
    it is invalid."""
    style = "json" if output_format == "json" else "human"
    try:
        if request == "-":
            doc = load_request(sys.stdin.buffer, "<stdin>")
        else:
            path = Path(request)
            if not path.is_file():
                return _usage(f"{path}: no such file", output_format)
            with path.open("rb") as stream:
                doc = load_request(stream, str(path))
        result = check_request(doc, files=files)
        load_site()  # a broken site file stops here, before any host is touched
    except DocumentError as exc:
        _report([exc.finding], style, valid=False)
        return Exit.INVALID
    except CatalogError as exc:
        return _usage(f"the bundle or the site settings are broken: {exc}", output_format)
    if not result.valid:
        _report(result.findings, style, valid=False)
        return Exit.INVALID
    return result


def cmd_inventory(args: argparse.Namespace) -> int:
    loaded = _load_request(args, files=False)
    if isinstance(loaded, int):
        return loaded
    assert loaded.request is not None and loaded.version is not None
    body = RunPlan.of(loaded.request, loaded.version).inventory.as_runner_inventory()
    if args.format == "json":
        print(json.dumps(body, indent=2))
    else:
        print(inventory_yaml(body), end="")
    return Exit.OK


def cmd_run(args: argparse.Namespace) -> int:
    loaded = _load_request(args, files=True)
    if isinstance(loaded, int):
        return loaded
    return execute(loaded, args.format, args.result_file, args.events_file)


def execute(
    loaded: RequestCheck, fmt: str, result_file: str | None, events_file: str | None
) -> int:
    """Runs a validated request; every path ends with a result event and a documented code."""
    request, version = loaded.request, loaded.version
    assert request is not None and version is not None
    text = fmt == "text"
    console = Console(file=sys.stdout)
    with contextlib.ExitStack() as stack:
        log = stack.enter_context(Path(events_file).open("w")) if events_file else None
        sink = EventSink(Context.of(request), emit=not text, copy_to=log)
        code = Exit.OK
        # Whether a playbook was started: before that, a failure has touched no host.
        started = False
        try:
            with instance_lock(str(request.instance.id)), cancellation() as cancelled:
                sink(EventType.OPERATION_STARTED)
                plan = RunPlan.of(request, version)
                started = True
                if text:
                    with TextProgress(console, plan.plays, len(plan.inventory.hosts)) as progress:
                        result = run_playbook(plan, sink, progress, cancelled)
                else:
                    result = run_playbook(plan, sink, cancelled=cancelled)
        except InstanceBusy as exc:
            result = untouched(request, ErrorInfo(code="instance_busy", message=str(exc)))
            code = Exit.BUSY
        except Exception as exc:  # the platform must always get a result
            # The details (paths of the driver's host) go to its own stderr, not the result.
            print(f"slurm-app-driver: internal error: {exc!r}", file=sys.stderr)
            error = ErrorInfo(
                code="internal_error",
                message=f"{type(exc).__name__} inside the driver; details on its stderr",
            )
            result = Result(status="failed", error=error) if started else untouched(request, error)
            code = Exit.FAILED
        succeeded = result.status == "succeeded"
        if not succeeded and code == Exit.OK:
            code = Exit.FAILED
        final = {
            "succeeded": EventType.OPERATION_SUCCEEDED,
            "cancelled": EventType.OPERATION_CANCELLED,
        }.get(result.status, EventType.OPERATION_FAILED)
        sink(final, message=None if succeeded else (result.error.message if result.error else None))
        sink(EventType.OPERATION_RESULT, result=result.model_dump(mode="json"))
    if result_file:
        Path(result_file).write_text(result.model_dump_json(indent=2) + "\n")
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
    colour = "green" if result.status == "succeeded" else "red"
    console.print(
        f"[{colour}]{request.operation.type} {result.status}[/{colour}] in {result.duration_s} s, "
        f"{result.changed} change(s); instance {result.instance.get('status')} "
        f"({result.instance.get('health')})",
        highlight=False,
    )
    if result.error:
        console.print(
            f"[red]error {result.error.code}[/red] on {result.error.host}: "
            f"{escape(result.error.message)}",
            highlight=False,
        )
    bundle = result.adapter_detail.get("access_bundle")
    if bundle:
        console.print_json(
            json.dumps(
                {
                    k: result.adapter_detail.get(k)
                    for k in ("cluster_name", "daemon_versions", "nodes", "readiness")
                    if k in result.adapter_detail
                }
            )
        )
        console.print_json(json.dumps(bundle))


def cmd_task(args: argparse.Namespace) -> int:
    """One typed task of the app on its component's host; prints the task's JSON answer and
    exits with the task's code (6: the host could not be reached)."""
    path = Path(args.request)
    if not path.is_file():
        return _usage(f"{path}: no such file", "json")
    try:
        with path.open("rb") as stream:
            doc = load_request(stream, str(path))
        checked = check_task_request(doc)
    except DocumentError as exc:
        _report([exc.finding], "json", valid=False)
        return Exit.INVALID
    except CatalogError as exc:
        return _usage(f"the bundle is broken: {exc}", "json")
    if checked.request is None or checked.spec is None:
        _report(checked.findings, "json", valid=False)
        return Exit.INVALID
    code, answer = run_task(checked.request, checked.spec)
    print(json.dumps(answer))
    return code


def cmd_schema(args: argparse.Namespace) -> int:
    sys.stdout.write(render(shipped_schema(f"{args.name}.schema.json")))
    return Exit.OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slurm-app-driver",
        description="Slurm reference app bundle: manifest linter, request validation, operations.",
        epilog="exit codes: 0 ok, 1 findings / operation failed, 2 invalid request or usage, "
        "3 instance busy",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    lint = sub.add_parser("lint", help="lint catalog entries (manifests)")
    lint.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="manifest files, folders holding them, or files beside one (default: ./manifests)",
    )
    lint.add_argument("--format", choices=("human", "json"), default="human")
    lint.add_argument("--strict", action="store_true", help="warnings fail too")
    lint.set_defaults(func=cmd_lint)

    validate = sub.add_parser("validate-request", help="validate an operation request")
    validate.add_argument("request", help="request JSON file, or - for stdin")
    validate.add_argument("--format", choices=("human", "json"), default="human")
    validate.add_argument(
        "--check-files",
        action="store_true",
        help="also check that the referenced secret files exist and are private",
    )
    validate.set_defaults(func=cmd_validate_request)

    run = sub.add_parser("run", help="run one operation request (JSON events, or text progress)")
    run.add_argument("request", help="request JSON file, or - for stdin")
    run.add_argument(
        "--format",
        choices=("json", "text"),
        default="json",
        help="json: JSON-lines events, last line the result; text: progress for people",
    )
    run.add_argument("--result-file", help="also write the result JSON here")
    run.add_argument(
        "--events-file", help="also write the JSON-lines events here (useful with --format text)"
    )
    run.set_defaults(func=cmd_run)

    task = sub.add_parser(
        "task",
        help="run one of the app's typed tasks on its host (as the platform's node agent does)",
    )
    task.add_argument("request", help="the task request (JSON)")
    task.set_defaults(func=cmd_task)
    inventory = sub.add_parser("inventory", help="print the inventory a request would run on")
    inventory.add_argument("request", help="request JSON file, or - for stdin")
    inventory.add_argument("--format", choices=("yaml", "json"), default="yaml")
    inventory.set_defaults(func=cmd_inventory)

    # Imported here, once this module is whole: the lab's commands use its request checks,
    # its run and its exit codes.
    from driver.lab.commands import add_lab_parser

    add_lab_parser(sub)

    schema = sub.add_parser("schema", help="print a shipped JSON Schema")
    schema.add_argument("name", choices=[n.removesuffix(".schema.json") for n in SHIPPED])
    schema.set_defaults(func=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
