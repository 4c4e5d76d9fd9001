"""`slurm-app-driver lab`: a local container lab standing in for the platform. One function per
subcommand; each builds what the platform would send and runs it as `run` and `task` do."""

import argparse
import contextlib
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape

from driver import terminal
from driver.arguments import add_command, add_format_option, print_document
from driver.catalog import load_entry
from driver.lab import requests as lab_requests
from driver.lab import spec as lab_spec
from driver.lab.distros import DEFAULT_DISTRO, DISTROS
from driver.lab.errors import LabError
from driver.operation import Exit, Refusal, execute, load_checked, refused_run, task_file, usage


def _lab() -> ModuleType | int:
    """The lab's module, or the usage exit when its optional dependencies are missing."""
    try:
        from driver.lab import lab
    except ModuleNotFoundError as exc:
        if exc.name not in ("docker", "filelock"):
            raise
        return usage(
            f"the lab needs {exc.name}: pip install 'slurm-app-bundle[lab]' "
            "(scripts/setup.sh installs it)",
            "text",
        )
    return lab


def _out(fmt: str = "text") -> Console:
    """Where the lab's lines for people go: stdout, unless stdout carries JSON (`--format
    json`: one document, or the run's JSON lines, and nothing else)."""
    return terminal.console(sys.stdout if fmt == "text" else sys.stderr)


def _failed(exc: LabError) -> int:
    terminal.console(sys.stderr).print(f"[red]lab:[/red] {escape(str(exc))}", highlight=False)
    return Exit.FAILED


def _option(text: str) -> tuple[str, str]:
    """`--option KEY=VALUE` as argparse reads it: a malformed one is a usage error (exit 2)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key, value


def _options(given: list[tuple[str, str]], operation: str) -> dict[str, Any]:
    """The options as the operation takes them: VALUE read as JSON where it parses (600,
    true), except for an option its schema types as a string, which stays the text given
    (`to_version=1.0` is the version "1.0", not the number)."""
    loaded = load_entry("slurm-reference")
    specs = [v.operation(operation) for v in loaded.entry.versions] if loaded else []
    properties = next((s.options_schema.get("properties", {}) for s in specs if s), {})
    options: dict[str, Any] = {}
    for key, text in given:
        value: Any = text
        if properties.get(key, {}).get("type") != "string":
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(text)
        options[key] = value
    return options


def _config(path: str | None) -> dict[str, Any] | str:
    """`lab up --config FILE`: a YAML (or JSON) mapping of instance.config keys, or why not."""
    if path is None:
        return {}
    try:
        config = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        return f"--config {path}: {exc.strerror}"
    except yaml.YAMLError as exc:
        return f"--config {path}: not YAML ({exc})"
    if not isinstance(config, dict):
        return f"--config {path}: expected a mapping of instance.config keys"
    return config


def lab_up(args: argparse.Namespace) -> int:
    lab = _lab()
    if isinstance(lab, int):
        return lab
    config = _config(args.config)
    if isinstance(config, str):
        return usage(config, args.format)
    console, failed = _out(args.format), terminal.console(sys.stderr)
    spec = lab_spec.LabSpec(
        name=args.name,
        workers=args.workers,
        distro=args.distro,
        placement=args.placement,
        storage=args.storage,
        interactive_runtimes=tuple(args.runtime or ()),
        gpus=args.gpus,
    )
    try:
        request = lab.up(spec, config)
    except LabError as exc:
        return _failed(exc)
    if args.slurm_26_05:
        lab.write_lab_site(slurm_26_05=True)
    result_file = request.with_name("deploy-result.json")
    events_file = request.with_name("deploy-events.jsonl")
    console.print(f"deploy request: {request}", highlight=False, markup=False, soft_wrap=True)
    loaded = load_checked(str(request), files=True)
    if isinstance(loaded, Refusal):
        return refused_run(loaded, args.format, str(result_file), str(events_file))
    code = execute(loaded, args.format, str(result_file), str(events_file))
    if code != Exit.OK:
        failed.print(
            f"[red]lab up failed:[/red] the deploy did not succeed; no cluster to use.\n"
            f"result: {result_file}\nfull event log: {events_file}\n"
            f"remove the hosts with `slurm-app-driver lab down --name {args.name}`",
            highlight=False,
            soft_wrap=True,
        )
        return code
    try:
        console.print(
            f"test job across every node, as {lab_spec.LAB_USER['name']}:", highlight=False
        )
        console.print(lab.test_job(args.name), highlight=False, markup=False, end="")
    except LabError as exc:
        return _failed(exc)
    console.print(
        f"result: {result_file}; remove the lab with "
        f"`slurm-app-driver lab down --name {args.name}`",
        highlight=False,
        soft_wrap=True,
    )
    return Exit.OK


def lab_down(args: argparse.Namespace) -> int:
    lab = _lab()
    if isinstance(lab, int):
        return lab
    try:
        removed = lab.down(args.name)
    except LabError as exc:
        return _failed(exc)
    if args.format == "json":
        print_document({"lab": args.name, "removed_containers": removed}, "json")
    else:
        _out().print(f"lab {args.name!r}: removed {removed} container(s)", highlight=False)
    return Exit.OK


def lab_add_host(args: argparse.Namespace) -> int:
    lab = _lab()
    if isinstance(lab, int):
        return lab
    try:
        lab.add_host(args.name, args.host, storage=not args.without_storage, gpus=args.gpus)
    except LabError as exc:
        return _failed(exc)
    if args.format == "json":
        print_document({"lab": args.name, "host": args.host, "started": True}, "json")
    else:
        _out().print(f"lab {args.name!r}: host {args.host} started", highlight=False)
    return Exit.OK


def lab_task(args: argparse.Namespace) -> int:
    lab = _lab()
    if isinstance(lab, int):
        return lab
    try:
        given = json.loads(args.input) if args.input else {}
    except ValueError as exc:
        return usage(f"--input: not JSON ({exc})", "text")
    try:
        request = lab_requests.task_request(args.name, args.task, args.user, given, args.host)
    except LabError as exc:
        return _failed(exc)
    return task_file(str(request), args.format)


def lab_op(args: argparse.Namespace) -> int:
    lab = _lab()
    if isinstance(lab, int):
        return lab
    options = _options(args.option, args.operation)
    try:
        request = lab_requests.operation_request(
            args.name, args.operation, args.target, options, args.replacement
        )
    except LabError as exc:
        return _failed(exc)
    _out(args.format).print(f"request: {request}", highlight=False, markup=False, soft_wrap=True)
    stem = request.with_suffix("")
    loaded = load_checked(str(request), files=True)
    if isinstance(loaded, Refusal):
        return refused_run(loaded, args.format, f"{stem}-result.json", f"{stem}-events.jsonl")
    code = execute(loaded, args.format, f"{stem}-result.json", f"{stem}-events.jsonl")
    try:
        lab_requests.record_members(args.name, Path(f"{stem}-result.json"))
    except LabError as exc:
        return _failed(exc)
    return code


def lab_status(args: argparse.Namespace) -> int:
    lab = _lab()
    if isinstance(lab, int):
        return lab
    console = _out()
    try:
        rows = lab.status(args.name)
        if args.format == "json":
            sinfo = (
                lab.sinfo(args.name)
                if args.name and any(r["host"].endswith("-ctl") for r in rows)
                else None
            )
            print_document({"hosts": rows, "sinfo": sinfo}, "json")
            return Exit.OK
        for row in rows:
            console.print(
                f"{row['lab']:<12} {row['host']:<16} {row['state']:<10} {row['container']}",
                highlight=False,
            )
        if not rows:
            console.print("no lab hosts", highlight=False)
        elif args.name and any(r["host"].endswith("-ctl") for r in rows):
            console.print(lab.sinfo(args.name), highlight=False, markup=False, end="")
    except LabError as exc:
        return _failed(exc)
    return Exit.OK


def add_lab_parser(sub: Any) -> None:
    """`lab` and its subcommands on the driver's parser, each dispatched to its function."""
    lab_parser = add_command(
        sub,
        "lab",
        "a local container lab standing in for the platform",
        "slurm-app-driver lab up && slurm-app-driver lab op status && slurm-app-driver lab down",
    )
    lab_sub = lab_parser.add_subparsers(dest="lab_command", required=True)
    up = add_command(
        lab_sub,
        "up",
        "start hosts, deploy through the driver, run a job",
        "slurm-app-driver lab up --name demo --workers 3 --storage platform_mount",
    )
    up.add_argument("--name", default="lab", help="lab name (default: lab)")
    up.add_argument("--workers", type=int, default=2, help="separate workers (default: 2)")
    up.add_argument(
        "--distro",
        choices=sorted(DISTROS),
        default=DEFAULT_DISTRO,
        help=f"the hosts' Debian release (default: {DEFAULT_DISTRO})",
    )
    up.add_argument(
        "--placement",
        choices=("separate", "same_node"),
        default="separate",
        help="same_node: one host is controller and worker (default: separate)",
    )
    up.add_argument(
        "--storage",
        choices=("allocation_local", "platform_mount"),
        default="allocation_local",
        help="platform_mount: one volume mounted at /workspace on every host, as the "
        "platform's storage (default: allocation_local)",
    )
    up.add_argument(
        "--runtime",
        action="append",
        choices=("jupyter", "desktop", "vscode"),
        help="an interactive runtime for Open OnDemand's sessions on the workers (repeatable)",
    )
    up.add_argument(
        "--gpus",
        type=int,
        default=0,
        help="NVIDIA GPU device files on each host that runs slurmd (0 to 8; no GPU behind them)",
    )
    up.add_argument(
        "--slurm-26-05",
        action="store_true",
        help="the lab's site settings name Debian's forky as the source of Slurm 26.05, so that "
        "`lab op upgrade --option to_version=2.0.0` upgrades Slurm itself",
    )
    up.add_argument(
        "--config",
        metavar="FILE",
        help="a YAML or JSON mapping of the deploy's instance.config keys (accounts, qos, backup, "
        "partitions, ...) that replace the lab's own: docs/lab.md",
    )
    add_format_option(up, "text", "text: progress for people; json: the run's JSON-lines events")
    up.set_defaults(func=lab_up)
    down = add_command(
        lab_sub,
        "down",
        "remove the lab's containers, network and files",
        "slurm-app-driver lab down --name demo",
    )
    down.add_argument("--name", default="lab", help="lab name (default: lab)")
    add_format_option(down, "text", "text: a line for people; json: the lab and how many removed")
    down.set_defaults(func=lab_down)
    add_host = add_command(
        lab_sub,
        "add-host",
        "start one more host in a deployed lab (for add_worker)",
        "slurm-app-driver lab add-host lab-w03 && slurm-app-driver lab op add_worker "
        "--target lab-w03",
    )
    add_host.add_argument("host", help="its host name, e.g. lab-w03")
    add_host.add_argument("--name", default="lab", help="lab name (default: lab)")
    add_host.add_argument(
        "--without-storage",
        action="store_true",
        help="a platform_mount lab: start it without the storage volume (a broken mount)",
    )
    add_host.add_argument(
        "--gpus",
        type=int,
        default=0,
        help="NVIDIA GPU device files to create on it (0 to 8; no GPU behind them)",
    )
    add_format_option(add_host, "text", "text: a line for people; json: the lab and the host")
    add_host.set_defaults(func=lab_add_host)
    op = add_command(
        lab_sub,
        "op",
        "run a member operation on a deployed lab (the request is derived from its deploy)",
        "slurm-app-driver lab op drain_worker --target lab-w01 --option reason=maintenance",
    )
    op.add_argument("operation", help="add_worker, drain_worker, status, stop, ...")
    op.add_argument("--name", default="lab", help="lab name (default: lab)")
    op.add_argument(
        "--target",
        action="append",
        help="the lab host the operation acts on (e.g. lab-w01); add_worker takes it several "
        "times to join several hosts in one run",
    )
    op.add_argument(
        "--replacement",
        help="replace_worker, replace_controller: the lab host (started with add-host) that "
        "takes the target's place",
    )
    op.add_argument(
        "--option",
        action="append",
        default=[],
        type=_option,
        metavar="KEY=VALUE",
        help="an operation option; VALUE is read as JSON when it parses (600, true), else text",
    )
    add_format_option(op, "text", "text: progress for people; json: the run's JSON-lines events")
    op.set_defaults(func=lab_op)
    task = add_command(
        lab_sub,
        "task",
        "run one of the app's typed tasks on a lab host (queue, submit, job_output, ...)",
        "slurm-app-driver lab task job --user labuser --input '{\"job_id\": 2}'",
    )
    task.add_argument("task", help="queue, nodes, job, job_output, usage, submit or cancel")
    task.add_argument("--name", default="lab", help="lab name (default: lab)")
    task.add_argument("--user", help="the cluster user asking (job, job_output, submit and cancel)")
    task.add_argument(
        "--host",
        help="the lab host it runs on (default: the controller; job_output: the batch host)",
    )
    task.add_argument("--input", help="the task's input as JSON")
    add_format_option(
        task, "json", "json: the answer in one line, as the node agent reads it; text: YAML"
    )
    task.set_defaults(func=lab_task)
    status = add_command(
        lab_sub,
        "status",
        "list lab hosts (and sinfo for --name)",
        "slurm-app-driver lab status --name lab",
    )
    status.add_argument("--name", default=None, help="one lab (default: every lab)")
    add_format_option(status, "text", "text: a table and sinfo; json: the hosts and sinfo's text")
    status.set_defaults(func=lab_status)
