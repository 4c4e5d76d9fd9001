"""`slurm-app-driver run`: one validated request -> one playbook run -> events and a result."""

import contextlib
import os
import resource
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
from ansible_runner.interface import init_runner
from ansible_runner.utils import get_callback_dir

from driver.catalog import bundle_root, state_dir
from driver.events import ErrorInfo, EventSink, Result
from driver.inventory import inventory_yaml
from driver.runner.collector import Collector, host_stats
from driver.runner.guard import end_tree
from driver.runner.lease import RENEW_PLAYBOOK, LeaseKeeper
from driver.runner.locks import renewal_tree_lock, tree_lock
from driver.runner.outcome import adapter_detail, member_statuses, untouched
from driver.runner.plan import RunPlan
from driver.site import Runs, load_site
from driver.traces import OperationTrace


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
    root: Path, private_dir: Path, control_dir: Path, binary: Path, runs: Runs
) -> dict[str, str]:
    """Everything ansible-playbook gets: nothing of the driver's own environment, which may
    hold the platform's tokens (ansible-runner would pass it on and write it to disk). The
    site's `runs` decide the forks and whether Mitogen runs the plays."""
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
        "ANSIBLE_FORKS": str(runs.forks),
        # what ansible-runner needs to receive the events
        "ANSIBLE_CALLBACK_PLUGINS": get_callback_dir(),
        "ANSIBLE_STDOUT_CALLBACK": "awx_display",
        **(MITOGEN_ENVIRONMENT if runs.mitogen else {}),
    }


# The end of a run on the hosts an operation's own last play did not reach (a failure, a
# cancel): their journal entries (slurm_common's `journal`) say how it ended.
JOURNAL_PLAYBOOK = Path("playbooks") / "journal.yml"


@dataclass
class Launch:
    """How the driver starts ansible-playbook in a run's folder: the bundle's, the run's
    inventory and known hosts, the environment of playbook_environment, under the guard."""

    root: Path
    private_dir: Path
    control_dir: Path
    binary: Path
    inventory_file: Path
    instance_id: str
    runs: Runs
    # the largest file a playbook may write on the control plane: a backup's share
    max_file_bytes: int

    def run(
        self,
        playbook: Path,
        collector: Collector,
        cancelled: Callable[[], bool],
        extravars: dict[str, Any],
        limit: str | None = None,
        tree: Path | None = None,
    ) -> Any:
        """Runs `playbook` to its end; `tree`: the lock its guard holds (the instance's tree
        lock by default, which the instance's next run waits for)."""
        runner = init_runner(
            private_data_dir=str(self.private_dir),
            project_dir=str(self.root),
            playbook=str(playbook),
            inventory=str(self.inventory_file),
            extravars=extravars,
            limit=limit,
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
            str(tree or tree_lock(self.instance_id)),
            str(self.binary),
        ]
        runner.config.env = {
            **playbook_environment(
                self.root, self.private_dir, self.control_dir, self.binary, self.runs
            ),
            "AWX_ISOLATED_DATA_DIR": runner.config.artifact_dir,
        }
        runner.run()
        return runner


@contextmanager
def file_size_limit(max_bytes: int) -> Iterator[None]:
    """No file the playbook's processes write on the control plane grows past `max_bytes`
    (RLIMIT_FSIZE, inherited by the whole tree the runner starts). It holds what a host sends
    whatever it claimed: a controller's backup is admitted by the sizes the controller claims,
    and the transfer itself (sftp, or Mitogen's worker) writes whatever arrives; a write past
    the limit fails, and so does the fetch (slurm_controller's slurm_backup_receive then finds
    the file short of what was admitted). Only the soft limit is lowered: the driver's own
    processes are trusted, the hosts' data is what is bounded."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    lowered = max_bytes if hard == resource.RLIM_INFINITY else min(max_bytes, hard)
    resource.setrlimit(resource.RLIMIT_FSIZE, (lowered, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _hosts_left_unjournaled(collector: Collector) -> list[str]:
    """The hosts the run reached (its preflight, or a read-only playbook's member report) that
    the operation's last play did not journal, less any that stopped answering since."""
    reached = set(collector.artifact_data.get("slurm_app_reached") or {})
    journaled = set(collector.artifact_data.get("slurm_app_journaled") or {})
    lost = {name for name, host in host_stats(collector.stats).items() if host.unreachable}
    return sorted(reached - journaled - lost)


def run_playbook(
    plan: RunPlan,
    sink: EventSink,
    on_progress: Callable[[str, dict[str, Any]], None] | None = None,
    cancelled: Callable[[], bool] = lambda: False,
    trace: OperationTrace | None = None,
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
    collector = Collector(sink, on_progress, trace)
    started = time.monotonic()
    instance_id = str(plan.request.instance.id)
    with run_dir(instance_id) as (private_dir, control_dir):
        inventory_file = private_dir / "inventory.yml"
        inventory_file.write_text(inventory_yaml(inventory.as_runner_inventory()))
        (private_dir / "known_hosts").write_text(inventory.known_hosts_text())
        site = load_site()
        launch = Launch(
            root,
            private_dir,
            control_dir,
            binary,
            inventory_file,
            instance_id,
            site.runs,
            site.backups.instance_max_bytes,
        )
        extravars = {name: int(value) for name, value in inventory.extra_vars.items()}
        lease = inventory.group_vars.get("slurm_common_lease")

        def renew(renewal: Collector, stop: Callable[[], bool]) -> Any:
            return launch.run(
                root / RENEW_PLAYBOOK,
                renewal,
                stop,
                extravars,
                tree=renewal_tree_lock(instance_id),
            )

        keeper = LeaseKeeper(renew, lease["expiry_s"], collector, sink) if lease else None
        # the whole tree the runs start, the keeper's renewals included
        with file_size_limit(launch.max_file_bytes):
            with keeper or contextlib.nullcontext():
                runner = launch.run(
                    playbook,
                    collector,
                    lambda: cancelled() or (keeper is not None and keeper.lost is not None),
                    extravars,
                )
            unjournaled = _hosts_left_unjournaled(collector)
            if unjournaled:
                outcome = {"successful": "succeeded", "canceled": "cancelled"}.get(runner.status)
                launch.run(
                    root / JOURNAL_PLAYBOOK,
                    Collector(EventSink(sink.context, emit=False), None, trace),
                    lambda: False,
                    extravars={
                        "slurm_common_journal_outcome": outcome or "failed",
                        "slurm_app_journal_hosts": "all",
                    },
                    limit=",".join(unjournaled),
                )
    hosts = host_stats(collector.stats)
    failed = any(h.failed or h.unreachable for h in hosts.values()) or runner.status != "successful"
    if keeper is not None and keeper.lost is not None:
        collector.first_error = ErrorInfo(
            code="lease_lost",
            message=f"the instance's lease was taken over while this run held it: {keeper.lost}."
            " The run was stopped; hosts may be partly changed, and the instance is that "
            "operation's now: re-run the request once it ended",
        )
    elif runner.status == "canceled":
        collector.first_error = ErrorInfo(
            code="cancelled",
            message=f"cancelled by a signal after {time.monotonic() - started:.0f} s; the "
            "playbook was stopped, hosts may be partly changed: re-run the same request to "
            "converge",
        )
    stopped = runner.status == "canceled" and (keeper is None or keeper.lost is None)
    result = Result(
        status="cancelled" if stopped else "failed" if failed else "succeeded",
        error=collector.error() if failed else None,
        changed=sum(h.changed for h in hosts.values()),
        hosts=hosts,
        duration_s=round(time.monotonic() - started, 1),
    )
    refusal = result.error.refusal if result.error is not None else None
    if failed and refusal is not None and refusal[0] == "instance_busy":
        # the preflight's lease: another operation (from any driver host) holds the instance,
        # and this run stopped before it wrote anything on any host
        return untouched(
            request, ErrorInfo(code="instance_busy", message=refusal[1], host=result.error.host)
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
    installed_from = plan.adapter.sources(request, plan.version, load_site())
    result.sources = [needed.source for needed in installed_from] or None
    member_statuses(plan, result, failed, collector.artifact_data)
    result.adapter_detail = adapter_detail(plan, collector.artifact_data, failed)
    return result
