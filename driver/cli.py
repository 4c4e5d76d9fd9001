"""The `slurm-app-driver` command line."""

import argparse
import errno
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import shtab

from driver import __version__, terminal
from driver.arguments import add_command, add_format_option, print_document
from driver.findings import Severity
from driver.inventory import inventory_yaml
from driver.lint import UsageError, lint_paths, resolve_manifests
from driver.operation import (
    Exit,
    Refusal,
    execute,
    load_checked,
    refused_run,
    report,
    report_refusal,
    task_file,
    usage,
)
from driver.request_check import RequestCheck
from driver.runner.plan import RunPlan
from driver.schema_check import shipped_schema
from driver.schemagen import SHIPPED, render

# A write to stdout or to a file the command was asked to write that the system refused.
OUTPUT_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def cmd_lint(args: argparse.Namespace) -> int:
    paths = args.paths or [Path("manifests")]
    try:
        findings = lint_paths(paths)
    except UsageError as exc:
        return usage(str(exc), args.format)
    report(findings, args.format)
    errors = [f for f in findings if f.severity is Severity.ERROR or args.strict]
    if args.format == "text" and not findings:
        print(f"ok: {len(resolve_manifests(paths))} manifest(s), no findings")
    return Exit.FAILED if errors else Exit.OK


def cmd_validate_request(args: argparse.Namespace) -> int:
    loaded = _load_request(args, files=args.check_files)
    if isinstance(loaded, Refusal):
        return report_refusal(loaded, args.format)
    request = loaded.request
    assert request is not None
    if args.format == "json":
        report([], "json", valid=True)
    else:
        print(
            f"ok: {request.operation.type} on {request.instance.app_slug} "
            f"{request.instance.version} instance {request.instance.id}"
        )
    return Exit.OK


def _load_request(args: argparse.Namespace, *, files: bool) -> RequestCheck | Refusal:
    """The validated request named on the command line, or why it is refused."""
    return load_checked(args.request, files=files)


def cmd_inventory(args: argparse.Namespace) -> int:
    loaded = _load_request(args, files=False)
    if isinstance(loaded, Refusal):
        return report_refusal(loaded, args.format)
    assert loaded.request is not None and loaded.version is not None
    body = RunPlan.of(loaded.request, loaded.version).inventory.as_runner_inventory()
    if args.format == "json":
        print(json.dumps(body, indent=2))
    else:
        print(inventory_yaml(body), end="")
    return Exit.OK


def cmd_run(args: argparse.Namespace) -> int:
    loaded = _load_request(args, files=True)
    if isinstance(loaded, Refusal):
        return refused_run(loaded, args.format, args.result_file, args.events_file)
    return execute(loaded, args.format, args.result_file, args.events_file)


def cmd_task(args: argparse.Namespace) -> int:
    return task_file(args.request, args.format)


def cmd_schema(args: argparse.Namespace) -> int:
    schema = shipped_schema(f"{args.name}.schema.json")
    if args.format == "json":
        sys.stdout.write(render(schema))
    else:
        print_document(schema, "text")
    return Exit.OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="slurm-app-driver",
        description="Slurm reference app bundle: manifest linter, request validation, operations.",
        epilog="exit codes: 0 ok, 1 findings / operation failed, 2 invalid request or usage, "
        "3 instance busy, 74 the output could not be written, 141 stdout's reader went away",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    shtab.add_argument_to(
        parser,
        ["--print-completion"],
        help="print the completion script of a shell (bash, zsh, tcsh) and exit",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    lint = add_command(
        sub,
        "lint",
        "lint catalog entries (manifests)",
        "slurm-app-driver lint manifests/ --strict --format json",
    )
    lint.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="manifest files, folders holding them, or files beside one (default: ./manifests)",
    )
    add_format_option(lint, "text", "text: one finding a line; json: one document")
    lint.add_argument("--strict", action="store_true", help="warnings fail too")
    lint.set_defaults(func=cmd_lint)

    validate = add_command(
        sub,
        "validate-request",
        "validate an operation request",
        "slurm-app-driver validate-request --check-files --format json request.json",
    )
    validate.add_argument("request", help="request JSON file, or - for stdin")
    add_format_option(validate, "text", "text: one finding a line; json: one document")
    validate.add_argument(
        "--check-files",
        action="store_true",
        help="also check that the referenced secret files exist and are private",
    )
    validate.set_defaults(func=cmd_validate_request)

    run = add_command(
        sub,
        "run",
        "run one operation request (JSON events, or text progress)",
        "slurm-app-driver run request.json --result-file result.json",
    )
    run.add_argument("request", help="request JSON file, or - for stdin")
    add_format_option(
        run, "json", "json: JSON-lines events, last line the result; text: progress for people"
    )
    run.add_argument("--result-file", help="also write the result JSON here")
    run.add_argument(
        "--events-file", help="also write the JSON-lines events here (useful with --format text)"
    )
    run.set_defaults(func=cmd_run)

    task = add_command(
        sub,
        "task",
        "run one of the app's typed tasks on its host (as the platform's node agent does)",
        "slurm-app-driver task queue-request.json",
    )
    task.add_argument("request", help="the task request (JSON) file, or - for stdin")
    add_format_option(
        task, "json", "json: the answer in one line, as the node agent reads it; text: YAML"
    )
    task.set_defaults(func=cmd_task)
    inventory = add_command(
        sub,
        "inventory",
        "print the inventory a request would run on",
        "slurm-app-driver inventory request.json > inventory.yml",
    )
    inventory.add_argument("request", help="request JSON file, or - for stdin")
    add_format_option(inventory, "text", "text: YAML, as ansible-playbook -i reads it; json")
    inventory.set_defaults(func=cmd_inventory)

    # Imported here, once this module is whole: the lab's commands use its request checks,
    # its run and its exit codes.
    from driver.lab.commands import add_lab_parser

    add_lab_parser(sub)

    schema = add_command(
        sub,
        "schema",
        "print a shipped JSON Schema",
        "slurm-app-driver schema operation-result > operation-result.schema.json",
    )
    schema.add_argument(
        "name",
        choices=[n.removesuffix(".schema.json") for n in SHIPPED],
        help="the contract: what the driver reads (catalog-entry, operation-request, "
        "task-request) or answers (operation-result, event)",
    )
    add_format_option(schema, "json", "json: the schema file as shipped; text: YAML, to read")
    schema.set_defaults(func=cmd_schema)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # `| head`: the reader has what it wanted; quiet, as a Unix tool SIGPIPE ends
        terminal.silence_stdout()
        return Exit.PIPE_CLOSED
    except OSError as exc:
        if exc.errno not in OUTPUT_ERRORS:
            raise
        print(f"slurm-app-driver: cannot write the output: {exc.strerror}", file=sys.stderr)
        terminal.silence_stdout()
        return Exit.OUTPUT_FAILED
    return code


if __name__ == "__main__":
    sys.exit(main())
