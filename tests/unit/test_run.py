"""`slurm-app-driver run` without containers: the lock, and a host that cannot be reached."""

import json
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, example, run_events

from driver.runner.locks import instance_lock
from driver.runner.run import file_size_limit

# a W3C traceparent as the platform would send it: trace id, then its own span's id
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _request(tmp_path: Path) -> Path:
    """A deploy whose key lies in its instance's folder under the credentials root tmp_path."""
    request = example("slurm-reference/deploy")
    key = tmp_path / request["project_id"] / request["instance"]["id"] / "id_ed25519"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text("placeholder, never used to connect\n")
    key.chmod(0o600)
    request["credentials"] = {"ssh_private_key_file": str(key)}
    request["instance"]["config"] = {"cluster_name": "research"}
    for allocation in request["allocations"]:
        # The reserved .invalid domain never resolves: the run fails as unreachable at once,
        # without sending anything anywhere.
        allocation["address"] = f"{allocation['hostname']}.invalid"
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    return path


def _run(path: Path, state: Path, *options: str, **env: str) -> subprocess.CompletedProcess:
    """The console script by its full path with a PATH that lacks the venv, as the platform
    calls it: the driver must find the ansible-playbook of its own installation."""
    return subprocess.run(
        [str(Path(sys.executable).parent / "slurm-app-driver"), "run", str(path), *options],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            "SLURM_APP_STATE_DIR": str(state),
            "SLURM_APP_CREDENTIALS_ROOT": str(path.parent),
            "PATH": "/usr/bin:/bin",
            **env,
        },
        check=False,
        timeout=300,
    )


def _bundle(tmp_path: Path, playbooks: dict[str, str]) -> Path:
    """The real manifests and roles with playbooks of the test's own."""
    bundle = tmp_path / "bundle"
    (bundle / "playbooks").mkdir(parents=True)
    for name in ("manifests", "roles", "ansible.cfg"):
        (bundle / name).symlink_to(ROOT / name)
    for name, text in playbooks.items():
        (bundle / "playbooks" / name).write_text(text)
    return bundle


def test_busy_instance_exits_three(tmp_path, monkeypatch):
    path = _request(tmp_path)
    monkeypatch.setenv("SLURM_APP_STATE_DIR", str(tmp_path / "state"))
    instance = json.loads(path.read_text())["instance"]["id"]
    with instance_lock(instance):
        result = _run(path, tmp_path / "state")
    assert result.returncode == 3, result.stdout + result.stderr
    events = run_events(result.stdout)
    assert [e["event"] for e in events] == ["operation.failed", "operation.result"]
    final = events[-1]["result"]
    assert final["error"]["code"] == "instance_busy"
    _assert_untouched(final, json.loads(path.read_text()))


def _assert_untouched(final: dict, request: dict) -> None:
    """A result of an operation that reached no host echoes the request's members."""
    assert final["status"] == "failed" and final["touched_hosts"] is False
    assert "nothing was changed on any host" in final["error"]["message"]
    assert final["instance"] == {"id": request["instance"]["id"], "status": "unchanged"}
    assert [(m["member_id"], m["status"]) for m in final["members"]] == [
        (m["member_id"], m["status"]) for m in request["members"]
    ]


def test_an_operation_without_a_playbook_reports_members_unchanged(tmp_path):
    path = _request(tmp_path)
    result = _run(path, tmp_path / "state", SLURM_APP_BUNDLE=str(_bundle(tmp_path, {})))
    assert result.returncode == 1, result.stdout + result.stderr
    final = run_events(result.stdout)[-1]["result"]
    assert final["error"]["code"] == "playbook_missing"
    _assert_untouched(final, json.loads(path.read_text()))


def test_unreachable_hosts_fail_the_operation(tmp_path):
    result = _run(_request(tmp_path), tmp_path / "state")
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    events = run_events(result.stdout)
    unreachable = [e for e in events if e["event"] == "host.unreachable"]
    # The preflight play reaches every host before anything changes: all three are found out
    assert {e["host"] for e in unreachable} == {"slurm-ctl", "gpu-01", "gpu-02"}
    assert {e["play"] for e in events if e["event"] == "task.started"} == {
        "Preflight - every host answers, with its registered host key"
    }
    final = events[-1]["result"]
    assert final["status"] == "failed"
    assert final["error"]["code"] == "host_unreachable"
    assert final["error"]["host"] in {"slurm-ctl", "gpu-01", "gpu-02"}
    # ssh's cause, on the one line the platform shows (Mitogen sends up to 100 lines)
    assert "\n" not in final["error"]["message"], final["error"]["message"]
    assert "Could not resolve hostname" in final["error"]["message"], final["error"]["message"]
    assert final["instance"]["status"] == "failed"
    statuses = {m["member_id"]: m["status"] for m in final["members"]}
    assert statuses == {"m-ctl": "failed", "m-w1": "failed", "m-w2": "failed"}
    assert final["hosts"]["slurm-ctl"]["unreachable"] == 1
    # what the deploy installs from, as the source policy resolved it (no site: Debian's own)
    assert final["sources"] == [
        {
            "name": "debian",
            "kind": "apt",
            "location": "the Debian mirror each host is configured with",
            "host": None,
            "checksum": None,
            "purpose": "munge, Slurm, MariaDB, Prometheus and node_exporter",
            "tier": "platform",
        }
    ]
    # the platform's lifecycle (product spec 004): requested when the deploy started, failed
    # before the outcome, each with the request's context
    request = json.loads(_request(tmp_path).read_text())
    lifecycle = [e for e in events if e["event"].startswith("apps.instance.")]
    assert [e["event"] for e in lifecycle] == ["apps.instance.requested", "apps.instance.failed"]
    assert [e["event"] for e in events[:2]] == ["operation.started", "apps.instance.requested"]
    assert [e["event"] for e in events[-3:]] == [
        "apps.instance.failed",
        "operation.failed",
        "operation.result",
    ]
    for event in lifecycle:
        assert (event["correlation_id"], event["org_id"], event["project_id"]) == (
            request["correlation_id"],
            request["org_id"],
            request["project_id"],
        )
        assert event["app_slug"] == request["instance"]["app_slug"]
        assert event["app_instance_id"] == request["instance"]["id"]
    assert lifecycle[1]["instance"] == final["instance"]
    assert lifecycle[1]["message"] == final["error"]["message"]
    # no traceparent in the request: the driver started a trace, one id for the whole run
    assert len({e["trace_id"] for e in events}) == 1
    assert re.fullmatch("[0-9a-f]{32}", events[0]["trace_id"])
    assert final["trace_id"] == events[0]["trace_id"]


def test_the_requests_trace_is_every_events_and_the_results(tmp_path):
    """A request with a W3C traceparent: its trace id in every event and in the result file."""
    path = _request(tmp_path)
    request = json.loads(path.read_text())
    request["traceparent"] = TRACEPARENT
    path.write_text(json.dumps(request))
    result_file = tmp_path / "result.json"
    result = _run(path, tmp_path / "state", "--result-file", str(result_file))
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    events = run_events(result.stdout)
    assert {e["trace_id"] for e in events} == {"4bf92f3577b34da6a3ce929d0e0e4736"}
    assert json.loads(result_file.read_text())["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"


def test_the_operation_plays_and_tasks_reach_the_sites_trace_collector(tmp_path, otlp_receiver):
    """Spans through the SDK's OTLP exporter to a receiver process: the operation's span is the
    request's traceparent's child, each play its child, each task its play's, naming hosts."""
    path = _request(tmp_path)
    request = json.loads(path.read_text())
    request["traceparent"] = TRACEPARENT
    path.write_text(json.dumps(request))
    site = otlp_receiver.site_file(tmp_path)
    result = _run(path, tmp_path / "state", SLURM_APP_SITE=str(site))
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    events = run_events(result.stdout)
    spans = otlp_receiver.spans("4bf92f3577b34da6a3ce929d0e0e4736")
    by_id = {span["span_id"]: span for span in spans}
    [operation] = [span for span in spans if span["parent_span_id"] == "00f067aa0ba902b7"]
    assert operation["name"] == "deploy slurm-reference"
    assert operation["resource"]["service.name"] == "slurm-app-driver"
    attributes = operation["attributes"]
    assert attributes["slurm_app.correlation_id"] == request["correlation_id"]
    assert attributes["slurm_app.app_instance_id"] == request["instance"]["id"]
    assert attributes["slurm_app.operation_id"] == request["operation"]["id"]
    assert attributes["slurm_app.result.status"] == "failed"
    assert attributes["slurm_app.error.code"] == "host_unreachable"
    assert operation["status"]["code"] == 2  # STATUS_CODE_ERROR
    assert operation["status"]["message"] == events[-1]["result"]["error"]["message"]
    plays = [span for span in spans if span["parent_span_id"] == operation["span_id"]]
    started = [e["play"] for e in events if e["event"] == "play.started"]
    assert sorted(span["name"] for span in plays) == sorted(started)
    tasks = [span for span in spans if by_id.get(span["parent_span_id"]) in plays]
    assert {span["name"] for span in tasks} == {
        e["task"] for e in events if e["event"] == "task.started"
    }
    unreachable = [span for span in tasks if "ansible.task.hosts_unreachable" in span["attributes"]]
    assert unreachable, [span["attributes"] for span in tasks]
    for span in unreachable:
        assert span["status"]["code"] == 2
        named = set(span["attributes"]["ansible.task.hosts_unreachable"])
        assert named <= {"slurm-ctl", "gpu-01", "gpu-02"}
    assert {
        host
        for span in unreachable
        for host in span["attributes"]["ansible.task.hosts_unreachable"]
    } == {"slurm-ctl", "gpu-01", "gpu-02"}
    for span in spans:
        assert span["start_ns"] <= span["end_ns"]
        parent = by_id.get(span["parent_span_id"])
        if parent is not None:
            assert parent["start_ns"] <= span["start_ns"] and span["end_ns"] <= parent["end_ns"]
    # nothing of the request's key reaches the collector
    key = Path(request["credentials"]["ssh_private_key_file"])
    assert str(key) not in otlp_receiver.spans_file.read_text()


def test_without_a_traceparent_the_drivers_trace_is_the_spans(tmp_path, otlp_receiver):
    result = _run(
        _request(tmp_path),
        tmp_path / "state",
        SLURM_APP_SITE=str(otlp_receiver.site_file(tmp_path)),
    )
    trace_id = run_events(result.stdout)[0]["trace_id"]
    spans = otlp_receiver.spans()
    assert spans and {span["trace_id"] for span in spans} == {trace_id}
    assert [span["name"] for span in spans if not span["parent_span_id"]] == [
        "deploy slurm-reference"
    ]


def test_a_refused_request_has_its_span_and_a_dead_collector_fails_nothing(tmp_path, otlp_receiver):
    path = _request(tmp_path)
    data = json.loads(path.read_text())
    data["traceparent"] = TRACEPARENT
    data["allocations"][0]["project_id"] = "someone-else"
    path.write_text(json.dumps(data))
    site = otlp_receiver.site_file(tmp_path)
    result = _run(path, tmp_path / "state", SLURM_APP_SITE=str(site))
    assert result.returncode == 2, result.stderr
    [span] = otlp_receiver.spans()
    assert span["parent_span_id"] == "00f067aa0ba902b7"
    assert span["attributes"]["slurm_app.error.code"] == "invalid_request"
    # the platform's sampling decision holds: a traceparent flagged "not sampled" sends nothing
    data["traceparent"] = TRACEPARENT[:-2] + "00"
    path.write_text(json.dumps(data))
    result = _run(path, tmp_path / "state", SLURM_APP_SITE=str(site))
    assert result.returncode == 2 and len(otlp_receiver.spans()) == 1, result.stderr
    # the collector gone: the operation ends as it would, with its result, and says why on
    # the driver's stderr
    otlp_receiver.process.terminate()
    otlp_receiver.process.wait(timeout=10)
    data["traceparent"] = TRACEPARENT
    path.write_text(json.dumps(data))
    site.write_text(
        json.dumps({"traces": {"otlp_endpoint": otlp_receiver.endpoint, "timeout_s": 1}})
    )
    result = _run(path, tmp_path / "state", SLURM_APP_SITE=str(site))
    assert result.returncode == 2, result.stderr
    assert run_events(result.stdout)[-1]["result"]["error"]["code"] == "invalid_request"
    assert "slurm-app-driver: traces:" in result.stderr, result.stderr


def test_invalid_request_exits_two_before_any_host(tmp_path):
    path = _request(tmp_path)
    data = json.loads(path.read_text())
    data["allocations"][0]["project_id"] = "someone-else"
    path.write_text(json.dumps(data))
    result = _run(path, tmp_path / "state")
    assert result.returncode == 2
    events = run_events(result.stdout)
    assert [e["event"] for e in events] == ["operation.failed", "operation.result"]
    final = events[-1]
    assert final["correlation_id"] == data["correlation_id"]
    assert final["operation_id"] == data["operation"]["id"]
    error = final["result"]["error"]
    assert error["code"] == "invalid_request" and final["result"]["touched_hosts"] is False
    assert [f["code"] for f in error["findings"]] == ["tenant-boundary"]
    assert error["findings"][0]["path"] == "$.allocations[0].project_id"
    assert final["result"]["instance"] == {"id": data["instance"]["id"], "status": "unchanged"}
    assert not (tmp_path / "state" / "runs").exists()


@pytest.mark.parametrize(
    ("broken", "code"),
    [
        (b"{not json", "json"),
        (b'{"api_version": "v1", "correlation_id": "a b"}', "schema."),
        (b"[]", "schema.type"),
    ],
)
def test_a_request_that_does_not_parse_still_ends_with_a_result(tmp_path, broken, code):
    """Nothing of a broken document reaches the output but the context values that are what
    their fields admit (here none: `a b` is no identifier)."""
    path = tmp_path / "request.json"
    path.write_bytes(broken)
    result_file = tmp_path / "result.json"
    result = _run(path, tmp_path / "state", "--result-file", str(result_file))
    assert result.returncode == 2, result.stderr
    final = run_events(result.stdout)[-1]
    assert final["event"] == "operation.result" and final["correlation_id"] is None
    assert final["result"]["error"]["findings"][0]["code"].startswith(code)
    assert json.loads(result_file.read_text()) == final["result"]
    assert "a b" not in result.stdout


def test_a_missing_request_file_ends_with_a_result(tmp_path):
    result = _run(tmp_path / "absent.json", tmp_path / "state")
    assert result.returncode == 2
    final = run_events(result.stdout)[-1]["result"]
    assert final["error"]["code"] == "invalid_request"
    assert final["error"]["findings"][0]["code"] == "usage"


def test_a_failed_lab_up_prints_no_access_bundle(tmp_path, monkeypatch, capsys):
    from driver.cli import main
    from driver.lab import lab

    request = _request(tmp_path)  # its hosts refuse connections: the deploy fails
    monkeypatch.setenv("SLURM_APP_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("SLURM_APP_CREDENTIALS_ROOT", str(tmp_path))
    monkeypatch.setattr(lab, "up", lambda spec, config: request)
    code = main(["lab", "up", "--name", "failing"])
    out, err = capsys.readouterr()
    assert code == 1
    assert "access" not in out and "ssh -i" not in out and "cluster_name" not in out
    assert "error host_unreachable" in out
    events_file = request.with_name("deploy-events.jsonl")
    assert f"full event log: {events_file}" in err
    assert "no cluster to use" in err
    logged = run_events(events_file.read_text())
    assert logged[-1]["event"] == "operation.result"
    result = json.loads(request.with_name("deploy-result.json").read_text())
    assert result["status"] == "failed" and "access_bundle" not in result["adapter_detail"]


# Longer than any test waits: a playbook let go on after a cancel would still be in it, and its
# process is in the tree the tests find gone.
LONG_TASK = ("sleep", "600")


def _local_bundle(tmp_path: Path, marker: Path) -> Path:
    """The real bundle with a deploy playbook that runs on the control node: a long task, then
    one that would leave a mark if the playbook were ever let go on after a cancel."""
    return _bundle(
        tmp_path,
        {
            "deploy.yml": "- hosts: localhost\n"
            "  gather_facts: false\n"
            "  tasks:\n"
            "    - name: Long task\n"
            f"      ansible.builtin.command: {' '.join(LONG_TASK)}\n"
            "    - name: Leave a mark\n"
            f"      ansible.builtin.copy: {{content: late, dest: {marker}, mode: '0600'}}\n"
        },
    )


@pytest.fixture
def short_state():
    """A state dir with a short path, as in production (SSH control sockets live near it)."""
    state = Path(tempfile.mkdtemp(prefix="sa-", dir="/tmp"))
    yield state
    shutil.rmtree(state, ignore_errors=True)


def _start_local_run(
    tmp_path: Path,
    marker: Path,
    state: Path,
    bundle: Path | None = None,
    long_task: tuple[str, ...] = LONG_TASK,
) -> tuple[subprocess.Popen, dict, list[psutil.Process]]:
    """The driver running `bundle`'s deploy, returned once `long_task`'s process runs, with
    every process under the driver at that moment (the playbook, its workers, the task)."""
    path = _request(tmp_path)
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "slurm-app-driver"), "run", str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={
            "SLURM_APP_STATE_DIR": str(state),
            "SLURM_APP_BUNDLE": str(bundle or _local_bundle(tmp_path, marker)),
            "SLURM_APP_CREDENTIALS_ROOT": str(tmp_path),
            "PATH": "/usr/bin:/bin",
        },
    )
    assert process.stdout is not None
    for line in process.stdout:
        event = json.loads(line)
        if event["event"] == "task.started" and event["task"] == "Long task":
            break
    _wait_for_descendant(process, long_task)
    tree = psutil.Process(process.pid).children(recursive=True)
    return process, json.loads(path.read_text()), tree


def _still_running(tree: list[psutil.Process]) -> list[str]:
    """The processes of `tree` still alive (is_running also tells a reused pid apart)."""
    alive = []
    for process in tree:
        try:
            if process.is_running() and process.status() != psutil.STATUS_ZOMBIE:
                alive.append(" ".join(process.cmdline()))
        except psutil.NoSuchProcess:
            continue
    return alive


def _wait_for_descendant(process: subprocess.Popen, argv: tuple[str, ...]) -> None:
    """Until `argv` runs under `process`: a task's process starts a while after the task's
    event (Mitogen's first task on a host also starts its interpreter there), longer on a
    loaded machine."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in psutil.Process(process.pid).children(recursive=True):
            try:
                if tuple(child.cmdline()) == argv:
                    return
            except psutil.Error:
                continue
        time.sleep(0.2)
    pytest.fail(f"{' '.join(argv)} did not start under the driver within 60 s")


def _playbooks_of(state: Path) -> list[str]:
    found = subprocess.run(["pgrep", "-f", f"{state}/runs"], capture_output=True, text=True)
    return found.stdout.split()


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_signal_cancels_the_run_and_frees_the_instance(
    tmp_path, short_state, signal_name, monkeypatch
):
    marker, state = tmp_path / "late-mark", short_state
    process, request, tree = _start_local_run(tmp_path, marker, state)
    process.send_signal(getattr(signal, signal_name))
    rest, _ = process.communicate(timeout=60)
    stream = run_events(rest)
    assert process.returncode == 1
    assert [e["event"] for e in stream[-2:]] == ["operation.cancelled", "operation.result"]
    result = stream[-1]["result"]
    assert result["status"] == "cancelled" and result["error"]["code"] == "cancelled"
    assert not list((state / "runs").iterdir()), "run dir left behind"
    assert not _playbooks_of(state), "ansible-playbook still running"
    # nothing of the run goes on after its result: the long task and all around it are gone
    assert not _still_running(tree)
    assert not marker.exists()
    monkeypatch.setenv("SLURM_APP_STATE_DIR", str(state))
    with instance_lock(request["instance"]["id"]):
        pass  # free


def test_a_killed_driver_takes_its_playbook_along_and_the_next_run_cleans_up(tmp_path, short_state):
    marker, state = tmp_path / "late-mark", short_state
    process, _, tree = _start_local_run(tmp_path, marker, state)
    process.kill()
    process.wait(timeout=30)
    psutil.wait_procs(tree, timeout=10)
    assert not _still_running(tree), "the playbook outlived the driver"
    assert not _playbooks_of(state), "ansible-playbook outlived the driver"
    left = list((state / "runs").iterdir())
    assert len(left) == 1, "a killed run leaves its folder until the next run"
    assert not marker.exists()
    again = _run(_request(tmp_path), state)  # unreachable hosts: fails, but cleans up first
    assert again.returncode == 1
    assert not list((state / "runs").iterdir())


# A process of the killed run's playbook that only SIGKILL ends; pgrep matches its whole command
# line (a `sleep 420` elsewhere on the machine is not it).
STUBBORN = "sleep 42"


def test_the_next_run_waits_until_a_killed_runs_playbook_is_gone(
    tmp_path, short_state, monkeypatch
):
    """The instance lock dies with a SIGKILLed driver at once; its guard then needs its grace
    time to end a tree that ignores SIGTERM. The next run's lock is granted only once nothing
    of that tree runs any more."""
    stubborn = _bundle(
        tmp_path / "stubborn",
        {
            "deploy.yml": "- hosts: localhost\n"
            "  gather_facts: false\n"
            "  tasks:\n"
            "    - name: Long task\n"
            f"      ansible.builtin.shell: \"trap '' TERM; {STUBBORN}\"\n"
            "      changed_when: false\n"
        },
    )
    process, request, _ = _start_local_run(
        tmp_path, tmp_path / "unused", short_state, stubborn, tuple(STUBBORN.split())
    )
    process.kill()
    process.wait(timeout=30)
    monkeypatch.setenv("SLURM_APP_STATE_DIR", str(short_state))
    with instance_lock(request["instance"]["id"]):
        left = subprocess.run(["pgrep", "-axf", STUBBORN], capture_output=True, text=True)
    assert left.returncode != 0, f"the killed run's playbook still runs: {left.stdout}"


def test_an_exception_inside_run_still_ends_with_a_result(tmp_path):
    state = tmp_path / "state"
    state.write_text("a file where the state folder should be")  # the lock cannot be made
    result = _run(_request(tmp_path), state)
    assert result.returncode == 1
    assert "Traceback" not in result.stdout + result.stderr
    final = run_events(result.stdout)[-1]
    assert final["event"] == "operation.result"
    assert final["result"]["status"] == "failed"
    assert final["result"]["error"]["code"] == "internal_error"
    assert final["result"]["error"]["message"].startswith(("FileExistsError", "NotADirectoryError"))
    # the lock could not be made: no playbook started, no host was touched
    assert final["result"]["touched_hosts"] is False
    assert [m["status"] for m in final["result"]["members"]] == ["pending"] * 3


def test_no_file_a_playbooks_process_writes_grows_past_the_file_size_limit(tmp_path):
    """Issue 65 (1): what a host sends is bounded on the control plane whatever it claimed. A
    child started under the limit (as the runner starts ansible-playbook, and it its sftp or
    Mitogen worker) fails to write past it; the driver's own limit is as it was afterwards."""
    before = resource.getrlimit(resource.RLIMIT_FSIZE)
    written = tmp_path / "fetched"
    with file_size_limit(64 * 1024):
        copied = subprocess.run(
            ["dd", "if=/dev/zero", f"of={written}", "bs=1024", "count=1024"],
            capture_output=True,
            check=False,
        )
    assert copied.returncode != 0
    assert written.stat().st_size == 64 * 1024
    assert resource.getrlimit(resource.RLIMIT_FSIZE) == before
