"""`slurm-app-driver lab`: a local container lab standing in for the platform. One function per
subcommand; each builds what the platform would send and runs it as `run` and `task` do."""

import argparse
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from rich.console import Console
from rich.markup import escape

from driver.catalog import load_entry
from driver.cli import Exit, _load_checked, _usage, cmd_task, execute
from driver.lab import requests as lab_requests
from driver.lab import spec as lab_spec
from driver.lab.distros import DEFAULT_DISTRO, DISTROS
from driver.lab.errors import LabError


def _lab() -> ModuleType | int:
    """The lab's module, or the usage exit when its optional dependencies are missing."""
    try:
        from driver.lab import lab
    except ModuleNotFoundError as exc:
        if exc.name not in ("docker", "filelock"):
            raise
        return _usage(
            f"the lab needs {exc.name}: pip install 'slurm-app-bundle[lab]' "
            "(scripts/setup.sh installs it)",
            "human",
        )
    return lab


def _out() -> Console:
    return Console(file=sys.stdout)


def _failed(exc: LabError) -> int:
    Console(file=sys.stderr).print(f"[red]lab:[/red] {escape(str(exc))}", highlight=False)
    return Exit.FAILED


def _option(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--option {text!r}: expected KEY=VALUE")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _options(texts: list[str], operation: str) -> dict[str, Any]:
    """The options as the operation takes them: an option its schema types as a string stays
    the text given (`to_version=1.0` is the version "1.0", not the number)."""
    loaded = load_entry("slurm-reference")
    specs = [v.operation(operation) for v in loaded.entry.versions] if loaded else []
    properties = next((s.options_schema.get("properties", {}) for s in specs if s), {})
    options = {}
    for text in texts:
        key, value = _option(text)
        if properties.get(key, {}).get("type") == "string" and not isinstance(value, str):
            value = text.partition("=")[2]
        options[key] = value
    return options


def lab_up(args: argparse.Namespace) -> int:
    lab = _lab()
    if isinstance(lab, int):
        return lab
    console, failed = _out(), Console(file=sys.stderr)
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
        request = lab.up(spec)
    except LabError as exc:
        return _failed(exc)
    result_file = request.with_name("deploy-result.json")
    events_file = request.with_name("deploy-events.jsonl")
    console.print(f"deploy request: {request}", highlight=False, markup=False, soft_wrap=True)
    loaded = _load_checked(str(request), "human", files=True)
    if isinstance(loaded, int):
        return loaded
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
    _out().print(f"lab {args.name!r}: host {args.host} started", highlight=False)
    return Exit.OK


def lab_task(args: argparse.Namespace) -> int:
    lab = _lab()
    if isinstance(lab, int):
        return lab
    try:
        given = json.loads(args.input) if args.input else {}
    except ValueError as exc:
        return _usage(f"--input: not JSON ({exc})", "human")
    try:
        request = lab_requests.task_request(args.name, args.task, args.user, given)
    except LabError as exc:
        return _failed(exc)
    return cmd_task(argparse.Namespace(request=str(request)))


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
    _out().print(f"request: {request}", highlight=False, markup=False, soft_wrap=True)
    loaded = _load_checked(str(request), "human", files=True)
    if isinstance(loaded, int):
        return loaded
    stem = request.with_suffix("")
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
    lab_parser = sub.add_parser("lab", help="a local container lab standing in for the platform")
    lab_sub = lab_parser.add_subparsers(dest="lab_command", required=True)
    up = lab_sub.add_parser("up", help="start hosts, deploy through the driver, run a job")
    up.add_argument("--name", default="lab", help="lab name (default: lab)")
    up.add_argument("--workers", type=int, default=2, help="separate workers (default: 2)")
    up.add_argument("--distro", choices=sorted(DISTROS), default=DEFAULT_DISTRO)
    up.add_argument("--placement", choices=("separate", "same_node"), default="separate")
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
        choices=("jupyter",),
        help="an interactive runtime for Open OnDemand's sessions on the workers (repeatable)",
    )
    up.add_argument(
        "--gpus",
        type=int,
        default=0,
        help="NVIDIA GPU device files on each host that runs slurmd (0 to 8; no GPU behind them)",
    )
    up.add_argument("--format", choices=("text", "json"), default="text")
    up.set_defaults(func=lab_up)
    down = lab_sub.add_parser("down", help="remove the lab's containers, network and files")
    down.add_argument("--name", default="lab")
    down.set_defaults(func=lab_down)
    add_host = lab_sub.add_parser(
        "add-host", help="start one more host in a deployed lab (for add_worker)"
    )
    add_host.add_argument("host", help="its host name, e.g. lab-w03")
    add_host.add_argument("--name", default="lab")
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
    add_host.set_defaults(func=lab_add_host)
    op = lab_sub.add_parser(
        "op",
        help="run a member operation on a deployed lab (the request is derived from its deploy)",
    )
    op.add_argument("operation", help="add_worker, drain_worker, status, stop, ...")
    op.add_argument("--name", default="lab")
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
        metavar="KEY=VALUE",
        help="an operation option; VALUE is read as JSON when it parses (600, true), else text",
    )
    op.add_argument("--format", choices=("text", "json"), default="text")
    op.set_defaults(func=lab_op)
    task = lab_sub.add_parser(
        "task", help="run one of the app's typed tasks on the lab's controller (queue, submit, ...)"
    )
    task.add_argument("task", help="queue, nodes, submit or cancel")
    task.add_argument("--name", default="lab")
    task.add_argument("--user", help="the cluster user asking (submit and cancel)")
    task.add_argument("--input", help="the task's input as JSON")
    task.set_defaults(func=lab_task)
    status = lab_sub.add_parser("status", help="list lab hosts (and sinfo for --name)")
    status.add_argument("--name", default=None)
    status.set_defaults(func=lab_status)
