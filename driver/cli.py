"""The `slurm-app-driver` command line."""

import argparse
import sys
from collections.abc import Sequence
from enum import IntEnum
from pathlib import Path

from rich.console import Console

from driver import __version__
from driver.catalog import CatalogError
from driver.documents import DocumentError, load_json, load_path
from driver.findings import Finding, Severity, render_human, render_json
from driver.lint import UsageError, lint_paths, resolve_manifests
from driver.request_check import check_request
from driver.schema_check import shipped_schema
from driver.schemagen import SHIPPED, render


class Exit(IntEnum):
    """Documented in the README; the platform's app controller branches on these."""

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
        Console(file=sys.stderr).print(f"[red]error:[/red] {message}", highlight=False)
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
    try:
        if args.request == "-":
            doc = load_json(sys.stdin.read(), "<stdin>")
        else:
            path = Path(args.request)
            if not path.is_file():
                return _usage(f"{path}: no such file", args.format)
            doc = load_path(path)
        result = check_request(doc, files=args.check_files)
    except DocumentError as exc:
        _report([exc.finding], args.format, valid=False)
        return Exit.INVALID
    except CatalogError as exc:
        return _usage(f"the bundle is broken: {exc}", args.format)
    _report(result.findings, args.format, valid=result.valid)
    if args.format == "human" and result.valid:
        assert result.request is not None
        print(
            f"ok: {result.request.operation.type} on {result.request.instance.app_slug} "
            f"{result.request.instance.version} instance {result.request.instance.id}"
        )
    return Exit.OK if result.valid else Exit.INVALID


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
