"""`slurm-app-driver run`: one validated request -> one playbook run -> events and a result."""

import contextlib
import fcntl
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import yaml
from ansible_runner.interface import init_runner
from ansible_runner.utils import get_callback_dir

from driver.apps import adapter_for
from driver.apps.base import AppAdapter, OperationError
from driver.catalog import bundle_root, state_dir
from driver.events import (
    ErrorInfo,
    EventSink,
    EventType,
    Health,
    HostStats,
    InstanceStatus,
    MemberResult,
    Result,
    connection_reason,
)
from driver.inventory import Inventory, build_inventory, inventory_yaml
from driver.models.manifest import Version
from driver.models.request import MemberStatus, OperationRequest
from driver.runner.guard import GRACE_S, end_tree


class InstanceBusy(Exception):
    """Another operation holds this instance's lock."""


def tree_lock(instance_id: str) -> Path:
    """Held by the guard of the instance's playbook for as long as any of its tree lives."""
    return state_dir() / "locks" / f"{instance_id}.tree"


# How long a new run waits for a killed run's playbook to end: the guard's SIGTERM, its grace
# time, then SIGKILL and the reaping.
TREE_WAIT_S = 3 * GRACE_S


@contextmanager
def instance_lock(instance_id: str) -> Iterator[Path]:
    """A non-blocking per-instance lock: a second concurrent operation fails at once. A run
    whose driver was killed releases it at once, while its guard may still be ending the
    playbook's tree: the next run waits for that tree's lock before it goes on."""
    folder = state_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{instance_id}.lock"
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InstanceBusy(f"instance {instance_id} is busy: {path} is locked") from None
        try:
            _wait_for_the_last_tree(tree_lock(instance_id))
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _wait_for_the_last_tree(path: Path) -> None:
    deadline = time.monotonic() + TREE_WAIT_S
    with path.open("a") as tree:
        while True:
            try:
                fcntl.flock(tree, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InstanceBusy(
                        f"the playbook of the instance's previous run is still ending ({path} "
                        "is held)"
                    ) from None
                time.sleep(0.1)
                continue
            fcntl.flock(tree, fcntl.LOCK_UN)
            return


def count_plays(playbook: Path) -> int:
    plays = yaml.safe_load(playbook.read_text()) or []
    return len(plays) if isinstance(plays, list) else 1


# A member an operator drained, or whose drain waits for its jobs.
DRAINED_STATUSES = frozenset({MemberStatus.DRAINED, MemberStatus.DRAINING})
# How a playbook marks a failure it reports on purpose: a fail or assert task whose msg starts
# "[drain_timeout] node w01 still ...". Nothing else a host prints (a module's output, stderr,
# a path in du's answer) can carry a code.
DELIBERATE_ERROR = re.compile(r"\[(?P<code>[a-z][a-z_]{2,40})\]\s*")
REFUSING_ACTIONS = frozenset({"fail", "assert"})
# What OpenSSH, then Mitogen (through which the driver's runs connect), say when a host's key
# is not the one known for it.
HOST_KEY_SIGNS = (
    "Host key verification failed",
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "SSH reported an unrecognized or mismatching host key",
)


class _Collector:
    """Turns ansible-runner events into ours; keeps nothing of task results but names and msg."""

    def __init__(
        self, sink: EventSink, on_progress: Callable[[str, dict[str, Any]], None] | None
    ) -> None:
        self.sink = sink
        self.on_progress = on_progress
        self.play = ""
        self.task = ""
        self.first_error: ErrorInfo | None = None
        # each host's latest failure: where a rescue handled the first, it reports the cause
        self.last_error: dict[str, ErrorInfo] = {}
        self.artifact_data: dict[str, Any] = {}
        # what ansible-playbook printed outside any task (its own errors), last lines only
        self.verbose_tail: list[str] = []
        # From the stats event itself: runner.stats reads the on-disk events we never write.
        self.stats: dict[str, Any] = {}

    def _refusal(self, data: dict[str, Any]) -> tuple[str, str] | None:
        """A fail or assert task's "[code] ..." msg: (code, the message less the marker)."""
        action = str(data.get("task_action") or "").rsplit(".", 1)[-1]
        result = data.get("res") or {}
        message = str(result.get("msg") or "")
        match = DELIBERATE_ERROR.match(message)
        if action not in REFUSING_ACTIONS or result.get("censored") or match is None:
            return None
        return match["code"], f"{self.task}: {message[match.end() :]}"

    def _failure_message(self, data: dict[str, Any]) -> str:
        result = data.get("res") or {}
        if result.get("censored"):
            return f"{self.task}: output hidden (no_log)"
        message = str(result.get("msg") or "failed")
        stderr = [line for line in str(result.get("stderr") or "").splitlines() if line][-3:]
        return f"{self.task}: {message}" + (f" ({' | '.join(stderr)})" if stderr else "")

    def error(self) -> ErrorInfo | None:
        """The run's error: the first failure, unless a rescue handled it on its host; then
        that host's last failure, which a rescue raises with what it did about the first."""
        first = self.first_error
        if first is not None and first.host and (self.stats.get("rescued") or {}).get(first.host):
            return self.last_error.get(first.host, first)
        return first

    def ansible_said(self) -> str:
        """Its error lines first, then the last lines (where it shows the origin)."""
        errors = [line for line in self.verbose_tail if "ERROR" in line][:2]
        tail = [line for line in self.verbose_tail[-5:] if line not in errors]
        return " | ".join(errors + tail)[:1500]

    def __call__(self, raw: dict[str, Any]) -> bool:
        kind = raw.get("event", "")
        data = raw.get("event_data") or {}
        host = data.get("host")
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
            self.sink(EventType.PLAY_STARTED, play=self.play)
        elif kind == "playbook_on_task_start":
            self.task = data.get("task", "")
            self.sink(EventType.TASK_STARTED, play=self.play, task=self.task)
        elif kind == "runner_on_ok":
            changed = bool((data.get("res") or {}).get("changed"))
            self.sink(
                EventType.HOST_CHANGED if changed else EventType.HOST_OK,
                play=self.play,
                task=self.task,
                host=host,
            )
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            message = self._failure_message(data)
            self.sink(
                EventType.HOST_FAILED, play=self.play, task=self.task, host=host, message=message
            )
            error = ErrorInfo(code="host_failed", message=message, host=host)
            refusal = self._refusal(data)
            if refusal is not None:
                error.refused(*refusal)
            self.first_error = self.first_error or error
            if host:
                self.last_error[host] = error
        elif kind == "runner_on_unreachable":
            said = str((data.get("res") or {}).get("msg") or "")
            message = f"{self.task}: {connection_reason(said)}"
            code = "host_unreachable"
            if any(sign in said for sign in HOST_KEY_SIGNS):
                code = "host_key_mismatch"
                message = (
                    f"{self.task}: the host did not present the SSH host key the request "
                    "carries for it; nothing was sent to it"
                )
            self.sink(
                EventType.HOST_UNREACHABLE,
                play=self.play,
                task=self.task,
                host=host,
                message=message,
            )
            self.first_error = self.first_error or ErrorInfo(code=code, message=message, host=host)
        elif kind == "verbose":
            lines = [line for line in str(raw.get("stdout", "")).splitlines() if line.strip()]
            self.verbose_tail = (self.verbose_tail + lines)[-50:]
        elif kind == "playbook_on_stats":
            self.artifact_data = data.get("artifact_data") or {}
            self.stats = data
        if self.on_progress is not None:
            self.on_progress(kind, data)
        # Returning False keeps the event out of the on-disk artifacts altogether.
        return False


def _host_stats(stats: dict[str, Any] | None) -> dict[str, HostStats]:
    hosts: dict[str, HostStats] = {}
    keys = {
        "ok": "ok",
        "changed": "changed",
        "failures": "failed",
        "dark": "unreachable",
        "skipped": "skipped",
    }
    for source, target in keys.items():
        for host, count in ((stats or {}).get(source) or {}).items():
            setattr(hosts.setdefault(host, HostStats()), target, count)
    return hosts


def ansible_playbook() -> Path | None:
    """The ansible-playbook of the driver's own installation, never whatever PATH finds: the
    platform calls the console script by its full path, without activating anything."""
    for folder in (sysconfig.get_path("scripts"), str(Path(sys.executable).parent)):
        candidate = Path(folder) / "ansible-playbook"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _stop_when(cancelled: Callable[[], bool]) -> Callable[[], bool]:
    """ansible-runner's cancel hook: once cancelled, end the guard (which ends the playbook's
    whole tree, workers included) before ansible-runner reports the run cancelled."""

    def check() -> bool:
        if not cancelled():
            return False
        # The guard stays until its tree is gone: while it lives, what the tree forks late or
        # orphans stays its descendant; ansible-runner SIGKILLs it as soon as this returns.
        for guard in psutil.Process().children():
            with contextlib.suppress(psutil.NoSuchProcess):
                end_tree(guard)
                guard.terminate()
        # The guard itself is left to ansible-runner to reap (pexpect must see its exit).
        return True

    return check


@contextmanager
def run_dir(instance_id: str) -> Iterator[tuple[Path, Path]]:
    """The run's private 0700 folder, `<state dir>/runs/<instance>`, and a short-named folder
    for SSH control sockets (their paths must fit in 108 bytes). Called under the instance
    lock: whatever a killed run of this instance left there is removed first; both are
    removed again when the run ends, however it ends."""
    runs = state_dir() / "runs"
    runs.mkdir(parents=True, exist_ok=True, mode=0o700)
    private_dir = runs / instance_id
    _remove_run_dir(private_dir)
    private_dir.mkdir(mode=0o700)
    control_dir = Path(tempfile.mkdtemp(prefix="slurm-app-cp-"))
    (private_dir / "control-dir").write_text(str(control_dir))
    try:
        yield private_dir, control_dir
    finally:
        _remove_run_dir(private_dir)


def _remove_run_dir(private_dir: Path) -> None:
    if not private_dir.exists():
        return
    with contextlib.suppress(OSError):
        control_dir = Path((private_dir / "control-dir").read_text())
        if control_dir.name.startswith("slurm-app-cp-"):
            shutil.rmtree(control_dir, ignore_errors=True)
    shutil.rmtree(private_dir, ignore_errors=True)


# Mitogen keeps one Python per host for the run: a task is a call into it, not a new
# interpreter and a module copied over ssh. The driver's runs, the render tests and the
# `monitoring` Molecule scenario use it; ansible.cfg (operators) keeps Ansible's own linear.
MITOGEN_ENVIRONMENT = {
    "ANSIBLE_STRATEGY_PLUGINS": str(Path(__file__).parent / "strategy"),
    "ANSIBLE_STRATEGY": "mitogen_linear_unpinned",
}


def playbook_environment(
    root: Path, private_dir: Path, control_dir: Path, binary: Path
) -> dict[str, str]:
    """Everything ansible-playbook gets: nothing of the driver's own environment, which may
    hold the platform's tokens (ansible-runner would pass it on and write it to disk)."""
    return {
        "PATH": f"{binary.parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(private_dir),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "ANSIBLE_CONFIG": str(root / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(root / "roles"),
        "ANSIBLE_HOME": str(private_dir / "ansible"),
        "ANSIBLE_LOCAL_TEMP": str(private_dir / "tmp"),
        "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
        # Only the host keys the request carries: whatever else answers at an allocation's
        # address gets nothing (it would receive the munge key, which forges credentials).
        "ANSIBLE_HOST_KEY_CHECKING": "True",
        "ANSIBLE_SSH_ARGS": " ".join(
            (
                "-o ControlMaster=auto -o ControlPersist=60s",
                "-o StrictHostKeyChecking=yes -o CheckHostIP=no",
                f"-o UserKnownHostsFile={private_dir / 'known_hosts'}",
                "-o GlobalKnownHostsFile=/dev/null",
            )
        ),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        # what ansible-runner needs to receive the events
        "ANSIBLE_CALLBACK_PLUGINS": get_callback_dir(),
        "ANSIBLE_STDOUT_CALLBACK": "awx_display",
        **MITOGEN_ENVIRONMENT,
    }


def untouched(request: OperationRequest, error: ErrorInfo) -> Result:
    """The result of an operation that never reached a host: members and instance as sent."""
    error.message += "; nothing was changed on any host"
    return Result(
        status="failed",
        error=error,
        touched_hosts=False,
        members=members_as_sent(request),
        instance={"id": str(request.instance.id), "status": "unchanged"},
    )


def members_as_sent(request: OperationRequest) -> list[MemberResult]:
    return [
        MemberResult(
            member_id=m.member_id,
            component_key=m.component_key,
            allocation_id=str(m.allocation_id),
            status=m.status,
        )
        for m in request.members
    ]


@dataclass
class RunPlan:
    """Everything a run needs, computed once (the text progress reads its size from it)."""

    request: OperationRequest
    version: Version
    adapter: AppAdapter
    playbook: Path
    read_only: bool
    inventory: Inventory

    @classmethod
    def of(cls, request: OperationRequest, version: Version) -> "RunPlan":
        spec = version.operation(request.operation.type)
        assert spec is not None  # the validator checked the operation exists
        adapter = adapter_for(request.instance.app_slug)
        return cls(
            request=request,
            version=version,
            adapter=adapter,
            playbook=bundle_root() / spec.playbook,
            read_only=spec.read_only,
            inventory=build_inventory(request, version, adapter.inventory_vars),
        )

    @property
    def plays(self) -> int:
        return count_plays(self.playbook) if self.playbook.is_file() else 0


def run_playbook(
    plan: RunPlan,
    sink: EventSink,
    on_progress: Callable[[str, dict[str, Any]], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
) -> Result:
    request, inventory, playbook = plan.request, plan.inventory, plan.playbook
    root = bundle_root()
    if not playbook.is_file():
        return untouched(
            request,
            ErrorInfo(
                code="playbook_missing",
                message=f"{playbook.relative_to(root)} is not in the bundle",
            ),
        )
    binary = ansible_playbook()
    if binary is None:
        return untouched(
            request,
            ErrorInfo(
                code="ansible_missing",
                message=f"no ansible-playbook beside {sys.executable}: reinstall the driver",
            ),
        )
    if cancelled():
        return untouched(request, ErrorInfo(code="cancelled", message="cancelled before start"))
    collector = _Collector(sink, on_progress)
    started = time.monotonic()
    with run_dir(str(request.instance.id)) as (private_dir, control_dir):
        inventory_file = private_dir / "inventory.yml"
        inventory_file.write_text(inventory_yaml(inventory.as_runner_inventory()))
        (private_dir / "known_hosts").write_text(inventory.known_hosts_text())
        runner = init_runner(
            private_data_dir=str(private_dir),
            project_dir=str(root),
            playbook=str(playbook),
            inventory=str(inventory_file),
            event_handler=collector,
            cancel_callback=_stop_when(cancelled),
            quiet=True,
            settings={
                "suppress_ansible_output": True,
                "suppress_output_file": True,
                # how often the cancel flag is looked at while the playbook runs
                "pexpect_timeout": 1,
            },
        )
        # ansible-runner would look ansible-playbook up on PATH: name ours, started through
        # the guard that kills it if the driver dies
        runner.config.command[:1] = [
            sys.executable,
            "-m",
            "driver.runner.guard",
            str(tree_lock(str(plan.request.instance.id))),
            str(binary),
        ]
        runner.config.env = {
            **playbook_environment(root, private_dir, control_dir, binary),
            "AWX_ISOLATED_DATA_DIR": runner.config.artifact_dir,
        }
        runner.run()
    hosts = _host_stats(collector.stats)
    failed = any(h.failed or h.unreachable for h in hosts.values()) or runner.status != "successful"
    if runner.status == "canceled":
        collector.first_error = ErrorInfo(
            code="cancelled",
            message=f"cancelled by a signal after {time.monotonic() - started:.0f} s; the "
            "playbook was stopped, hosts may be partly changed: re-run the same request to "
            "converge",
        )
    result = Result(
        status="cancelled" if runner.status == "canceled" else "failed" if failed else "succeeded",
        error=collector.error() if failed else None,
        changed=sum(h.changed for h in hosts.values()),
        hosts=hosts,
        duration_s=round(time.monotonic() - started, 1),
    )
    if failed and result.error is None:
        said = collector.ansible_said()
        result.error = ErrorInfo(
            code="runner_failed",
            message=f"ansible-playbook ended {runner.status} (rc {runner.rc})"
            + (f": {said}" if said else ""),
        )
    if (plan.read_only or plan.adapter.previews(request)) and result.changed and not failed:
        # the manifest promises this operation changes nothing: a change is a bundle defect
        result.status, failed = "failed", True
        result.error = ErrorInfo(
            code="read_only_violated",
            message=f"{request.operation.type} is read-only (or a preview) but changed "
            f"{result.changed} task(s)",
        )
    _members(plan, result, failed, collector.artifact_data)
    result.adapter_detail = _adapter_detail(plan, collector.artifact_data, failed)
    return result


def _deliberate_error(plan: RunPlan, error: ErrorInfo | None) -> OperationError | None:
    """A playbook's "[code] ..." failure that the app declares; the error takes its code."""
    if error is None or error.code != "host_failed" or error.refusal is None:
        return None
    code, message = error.refusal
    if code not in plan.adapter.operation_errors:
        return None
    error.code, error.message = code, message.strip()
    return plan.adapter.operation_errors[code]


def _members(plan: RunPlan, result: Result, failed: bool, reported: dict[str, Any]) -> None:
    """Members' and the instance's status after the run. A targeted operation (add, drain,
    resume, remove) changes its targets' statuses only; a failure of targets alone leaves the
    rest of the cluster as it was (degraded, not failed), and where it acts on several, the
    targets that did not fail got what it did (a join of k: those that joined are ready). A
    replacement joins before its target leaves: it is ready once the run got past the join."""
    request = plan.request
    if plan.adapter.previews(request) and not failed:
        # a preview changes nothing: members and the instance stay as they were
        result.members = members_as_sent(request)
        result.instance = {"id": str(request.instance.id), "status": "unchanged"}
        return
    after = plan.adapter.status_after.get(request.operation.type)
    targets = set(request.operation.target_ids)
    touched = plan.inventory.allocation_hosts
    target_hosts = {touched[t] for t in targets if t in touched}
    replacement = request.operation.replacement
    replacement_id = replacement.allocation_id if replacement is not None else None
    replacement_host = touched.get(replacement_id) if replacement_id is not None else None
    bad_hosts = {h for h, s in result.hosts.items() if s.failed or s.unreachable}
    joining = {replacement_host} if replacement_host is not None else set()
    targets_alone = failed and bool(bad_hosts) and bad_hosts <= target_hosts | joining
    # where several targets were acted on, those the run finished with got what it did
    partly_done = targets_alone and len(target_hosts) > 1
    reported_done = plan.adapter.hosts_done(request, reported)
    done = {h for h in target_hosts if reported_done is None or h in reported_done}
    done |= joining & (reported_done or set())
    done -= bad_hosts
    deliberate = _deliberate_error(plan, result.error) if failed else None
    left_out = plan.adapter.hosts_left_out(request, reported)
    for member in request.members:
        status = member.status
        host = touched.get(member.allocation_id)
        changes = member.allocation_id in targets if targets else host is not None
        if member.allocation_id == replacement_id:
            status = _replacement_status(plan, member.status, failed, bad_hosts, done)
        elif deliberate is not None:
            if member.allocation_id in targets and deliberate.target_status is not None:
                status = deliberate.target_status
        elif (failed and host is not None and host in bad_hosts) or host in left_out:
            status = MemberStatus.FAILED
        elif (not failed or (partly_done and host in done)) and changes and after is not None:
            status = after
            if (
                member.status in DRAINED_STATUSES
                and after is MemberStatus.READY
                and request.operation.type not in plan.adapter.ends_drain
            ):
                status = member.status
        result.members.append(
            MemberResult(
                member_id=member.member_id,
                component_key=member.component_key,
                allocation_id=str(member.allocation_id),
                status=status,
            )
        )
    if partly_done and result.error is not None:
        finished = sorted(done & target_hosts)
        result.error.message += (
            f"; failed on {len(bad_hosts)} of {len(target_hosts)} targets "
            f"({', '.join(sorted(bad_hosts))}), done on "
            + (", ".join(finished) if finished else "none")
        )
    if deliberate is not None:
        status, health = deliberate.instance
    elif targets_alone:
        status, health = InstanceStatus.RUNNING, Health.DEGRADED
    elif failed:
        status, health = InstanceStatus.FAILED, Health.FAILED
    else:
        status, health = plan.adapter.observed_state(
            request, reported
        ) or plan.adapter.instance_after.get(
            request.operation.type, (InstanceStatus.RUNNING, Health.HEALTHY)
        )
    result.instance = {
        "id": str(request.instance.id),
        "status": status.value,
        "health": health.value,
    }


def _replacement_status(
    plan: RunPlan, sent: MemberStatus, failed: bool, bad_hosts: set[str], done: set[str]
) -> MemberStatus:
    """The replacement joins first: failed where its host failed, joined where the run
    succeeded or the app reports the join done before a later step failed (the target's drain
    ran out of time, its host could not be cleaned), else as sent."""
    operation = plan.request.operation
    assert operation.replacement is not None
    host = plan.inventory.allocation_hosts.get(operation.replacement.allocation_id)
    if host in bad_hosts:
        return MemberStatus.FAILED
    if not failed or host in done:
        return plan.adapter.replacement_status_after
    return sent


def _adapter_detail(plan: "RunPlan", reported: dict[str, Any], failed: bool) -> dict[str, Any]:
    return {
        "app_version_label": plan.request.instance.version,
        "hosts_touched": sorted(plan.inventory.hosts),
        **plan.adapter.detail(plan.request, plan.inventory, reported, failed),
    }
