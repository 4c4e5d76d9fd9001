"""The app controller's view: deploy a 2-worker lab cluster through the driver CLI."""

import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml
from conftest import VENV, console_script, run_events
from job_checks import print_for_the_note
from lab_tools import (
    WebhookSink,
    check_a_hostile_job_name_is_read_as_a_name,
    check_controller_replacement,
    check_gpu_job_mapping,
    check_homes_are_their_users_alone,
    check_no_reader_separator_reaches_another_user,
    journal_of,
    kill_host,
    lab_gateway,
    lab_operation,
    on_host,
    platform_env,
    run_request,
    teardown_paths,
    upload,
    wait_on_host,
)

from driver.catalog import credentials_root
from driver.lab import lab
from driver.lab import requests as lab_requests
from driver.lab import spec as lab_spec
from driver.lab.engine import docker_client
from driver.lab.hosts import LABEL
from driver.runner.locks import instance_lock

# slurm_common's one install step: a run that skipped the converge never starts it
INSTALL_STEP = "Install munge, the Slurm client and the host's other packages in one transaction"

pytestmark = pytest.mark.containers

CONTEXT_FIELDS = (
    "correlation_id",
    "org_id",
    "project_id",
    "app_slug",
    "app_instance_id",
    "operation_id",
)
SPEC = lab_spec.LabSpec(name="e2e", workers=2, distro="trixie", placement="separate")


# The platform's own secret in the driver's environment: it must reach no host, file or output.
PLANTED = "PLATFORM_API_TOKEN", "planted-" + "9f3a" * 8


def driver(*args: str, env: dict[str, str], venv: Path = VENV) -> subprocess.CompletedProcess:
    """The console script by its full path, no venv on PATH, as the platform calls it."""
    return console_script(*args, env=env, venv=venv, timeout=1200)


def driver_watching_run_dir(*args: str, env: dict[str, str], state: Path) -> tuple:
    """`driver` that also reads every file of the run dir while the playbook runs (the run dir
    is gone afterwards): returns the completed process and those files' contents."""
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "slurm-app-driver"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    lines, seen = [], {}
    for line in process.stdout:
        lines.append(line)
        if '"task.started"' in line and not seen:
            seen = {str(f): f.read_bytes() for f in (state / "runs").rglob("*") if f.is_file()}
    stderr = process.stderr.read() if process.stderr else ""
    process.wait(timeout=60)
    completed = subprocess.CompletedProcess(
        process.args, process.returncode, "".join(lines), stderr
    )
    return completed, seen


def events(stdout: str) -> list[dict]:
    return run_events(stdout)


# The platform's alert endpoint token: sent by Alertmanager, never in any output.
WEBHOOK_TOKEN = "alert-token-" + "5c1e" * 6


def _with_alerting(request: Path, sink: WebhookSink) -> None:
    """The platform's alert webhook (its token as a secret file in the instance's credentials
    folder), short notification intervals and a 10 s scrape interval so that an alert fires
    and resolves within a test."""
    secrets = lab_spec.key_dir(SPEC.name) / "secrets"
    secrets.mkdir(parents=True, exist_ok=True, mode=0o700)
    (secrets / "alert-webhook-token").touch(mode=0o600)
    (secrets / "alert-webhook-token").write_text(WEBHOOK_TOKEN)
    data = json.loads(request.read_text())
    data["credentials"]["secrets_dir"] = str(secrets)
    data["instance"]["config"]["monitoring"] = {
        "scrape_interval": "10s",
        "alerting": {
            "webhook": {"url": sink.url, "bearer_token_secret_ref": "alert-webhook-token"},
            "group_wait": "5s",
            "group_interval": "10s",
        },
    }
    request.write_text(json.dumps(data, indent=2) + "\n")


@pytest.fixture(scope="module")
def alert_sink(docker_engine, tmp_path_factory):
    lab.down(SPEC.name)
    request = lab.up(SPEC)  # the hosts and their network first: the sink listens on it
    sink = WebhookSink(lab_gateway(SPEC.name), tmp_path_factory.mktemp("webhook-tls"))
    # the customer's trust store knows the endpoint's CA (the platform's has a public one)
    on_host(
        SPEC.name,
        "e2e-ctl",
        f"cat > /usr/local/share/ca-certificates/lab-webhook.crt <<'EOF'\n{sink.ca}EOF\n"
        "update-ca-certificates >/dev/null",
    )
    yield sink, request
    sink.close()


@pytest.fixture(scope="module")
def deployed(alert_sink, runtime_venv, tmp_path_factory):
    state = tmp_path_factory.mktemp("driver-state")
    env = {**platform_env(state), PLANTED[0]: PLANTED[1]}
    sink, request = alert_sink
    _with_alerting(request, sink)
    first, run_files = driver_watching_run_dir("run", str(request), env=env, state=state)
    # the re-run comes from `pip install .` (runtime deps only): the wheel's own bundle
    second = driver("run", str(request), env=env, venv=runtime_venv)
    yield {
        "request": request,
        "first": first,
        "second": second,
        "state": state,
        "env": env,
        "run_files": run_files,
        "sink": sink,
    }
    lab.down(SPEC.name)


def test_deploy_succeeds_with_a_complete_result(deployed):
    first = deployed["first"]
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    stream = events(first.stdout)
    request = json.loads(deployed["request"].read_text())
    for event in stream:
        for field in CONTEXT_FIELDS:
            assert event[field], (field, event)
        assert event["correlation_id"] == request["correlation_id"]
        assert event["app_instance_id"] == request["instance"]["id"]
    assert stream[0]["event"] == "operation.started"
    assert stream[-2]["event"] == "operation.succeeded"
    result = stream[-1]["result"]
    # the platform's lifecycle (product spec 004): requested at the start, running at the end
    lifecycle = [e for e in stream if e["event"].startswith("apps.instance.")]
    assert [e["event"] for e in lifecycle] == ["apps.instance.requested", "apps.instance.running"]
    assert stream[1] == lifecycle[0] and stream[-3] == lifecycle[1]
    assert lifecycle[1]["instance"] == {"id": request["instance"]["id"], "status": "running",
                                        "health": "healthy"}  # fmt: skip
    # one trace per run (the driver started each): every event, the result, each host's
    # journal, which holds both runs of the request
    (trace,) = {e["trace_id"] for e in stream}
    (again,) = {e["trace_id"] for e in events(deployed["second"].stdout)}
    assert result["trace_id"] == trace and again != trace
    for host in ("e2e-ctl", "e2e-w01"):
        journaled = journal_of(SPEC.name, host, "deploy")[1]
        assert [e["SLURM_APP_TRACE_ID"] for e in journaled if e["SLURM_APP_EVENT"] != "step"] == [
            trace, trace, again, again
        ]  # fmt: skip
    assert stream[-1]["event"] == "operation.result"
    assert result["status"] == "succeeded" and result["error"] is None
    assert result["instance"]["status"] == "running"
    assert result["instance"]["health"] == "healthy"
    assert {m["status"] for m in result["members"]} == {"ready"}
    assert len(result["members"]) == 3
    detail = result["adapter_detail"]
    assert detail["cluster_name"] == "e2e"
    assert detail["daemon_versions"]["slurmctld"].startswith("24.11.")
    assert set(detail["daemon_versions"]["slurmd"]) == {"e2e-w01", "e2e-w02"}
    assert [(n["name"], n["state"], n["gres"]) for n in detail["nodes"]] == [
        ("e2e-w01", "idle", None),
        ("e2e-w02", "idle", None),
    ]
    assert all(n["cpus"] >= 1 and n["partitions"] == ["batch"] for n in detail["nodes"])
    readiness = detail["readiness"]
    assert readiness["nodes"] == 2
    step = [r for r in readiness["accounting_record"] if r["id"] == f"{readiness['job_id']}.0"]
    assert [(r["state"], r["nodes"], r["node_list"]) for r in step] == [
        ("COMPLETED", 2, "e2e-w[01-02]")
    ]
    bundle = detail["access_bundle"]
    assert str(credentials_root()) not in json.dumps(result), "a platform path in the result"
    assert bundle["config_paths"]["slurm_conf"] == "/etc/slurm/slurm.conf"
    assert bundle["config_paths"]["slurmd_options"] == "/etc/default/slurmd"
    assert bundle["log_paths"]["slurmd"] == "/var/log/slurm/slurmd.log (on each worker)"
    assert bundle["controller"]["slurmctld_port"] == 6817
    assert "sinfo" in bundle["commands"]["nodes"]
    # monitoring: the flags Prometheus really runs with, and one target per exporter
    monitoring = detail["monitoring"]
    assert monitoring["services"] == {
        "prometheus": "running",
        "prometheus-alertmanager": "running",
        "slurm-app-exporter": "running",
    }
    assert monitoring["alerts"] == []
    assert monitoring["prometheus_answers"] is True
    assert monitoring["prometheus_flags"] == {
        "retention_time": "1w",  # 7d, as Prometheus prints it
        "retention_size": "5GiB",  # 5GB: Prometheus's units are powers of 1024
        "wal_compression": "true",
        "listen_address": "127.0.0.1:9090",
    }
    assert sorted((t["job"], t["node"]) for t in monitoring["targets"]) == [
        ("node", "e2e-ctl"),
        ("node", "e2e-w01"),
        ("node", "e2e-w02"),
        ("prometheus", "e2e-ctl"),
        ("slurm", "e2e-ctl"),
    ]
    assert "-L 9090:127.0.0.1:9090" in bundle["monitoring"]["prometheus"]["tunnel"]
    assert bundle["monitoring"]["grafana"] is None  # the lab's site settings: no Grafana source


def test_exporters_listen_only_on_the_address_prometheus_scrapes(deployed):
    """Issue 18 (9): node_exporter on every member and the Slurm exporter on the controller
    listen on the member's allocation address, not on every interface (nor loopback)."""
    request = json.loads(deployed["request"].read_text())
    for allocation in request["allocations"]:
        host, address = allocation["hostname"], allocation["address"]
        listening = on(host, "ss -ltnH").split("\n")
        ports = {"9100"} | ({"9341"} if host == "e2e-ctl" else set())
        for port in ports:
            local = sorted(
                line.split()[3]
                for line in listening
                if line.split()[3:4] and line.split()[3].endswith(f":{port}")
            )
            assert local == [f"{address}:{port}"], (host, port, local)


def test_second_identical_run_changes_nothing(deployed):
    second = deployed["second"]
    assert second.returncode == 0, second.stdout[-3000:]
    run = events(second.stdout)
    result = run[-1]["result"]
    assert result["status"] == "succeeded"
    assert result["changed"] == 0, result["hosts"]
    # nothing drifted: the converge is skipped, the readiness proof stands, the report is whole
    started = {e["task"] for e in run if e["event"] == "task.started"}
    assert INSTALL_STEP not in started
    assert result["adapter_detail"]["readiness"]["reused"] is True
    assert result["adapter_detail"]["health"]["classification"] == "healthy"
    assert set(result["adapter_detail"]["daemon_versions"]["slurmd"]) == {"e2e-w01", "e2e-w02"}


def test_a_job_runs_across_both_workers(deployed):
    output = lab.test_job(SPEC.name)
    assert sorted(line.split(": ", 1)[1] for line in output.splitlines()) == ["e2e-w01", "e2e-w02"]


def _lab_secrets() -> list[bytes]:
    """The munge key, the SSH key, the planted platform token and the webhook's, whole and in
    part: none may appear in anything the driver writes or sends."""
    controller = lab.controller_container(SPEC.name)
    munge_key = controller.exec_run(["cat", "/etc/munge/munge.key"]).output
    assert len(munge_key) >= 32
    ssh_key = (lab_spec.key_dir(SPEC.name) / "id_ed25519").read_bytes()
    ssh_body = b"".join(ssh_key.splitlines()[1:-1])
    secrets = [munge_key, munge_key[100:160], ssh_body, ssh_body[20:80], PLANTED[1].encode()]
    return [*secrets, WEBHOOK_TOKEN.encode()]


def test_no_secret_in_output_events_or_disk(deployed):
    secrets = _lab_secrets()
    outputs = [
        deployed[run].stdout.encode() + deployed[run].stderr.encode() for run in ("first", "second")
    ]
    left_on_disk = [p for p in deployed["state"].rglob("*") if p.is_file()]
    left_on_disk += list(deployed["request"].parent.glob("*.json"))
    assert not list((deployed["state"] / "runs").iterdir()), "run dir left"
    run_files = deployed["run_files"]
    # the run's own SSH control folder (its path recorded in the run dir) is gone with it
    control_dirs = [Path(v.decode()) for k, v in run_files.items() if k.endswith("/control-dir")]
    assert control_dirs, run_files.keys()
    assert not any(folder.exists() for folder in control_dirs), "control dir left"
    assert any(name.endswith("inventory.yml") for name in run_files), run_files.keys()
    for secret in secrets:
        for blob in outputs:
            assert secret not in blob
        for path in left_on_disk:
            assert secret not in path.read_bytes(), path
        for name, content in run_files.items():
            assert secret not in content, name


def test_driver_environment_reaches_no_host(deployed):
    for container in lab.lab_containers(SPEC.name):
        found = container.exec_run(
            ["grep", "-rIl", "--", PLANTED[1], "/etc", "/root", "/tmp", "/var/log", "/home"]
        )
        assert found.exit_code == 1, (container.name, found.output.decode()[-500:])


def test_lab_hosts_are_labelled(deployed):
    names = {c.labels["io.slurm-app.lab.host"] for c in lab.lab_containers(SPEC.name)}
    assert names == {"e2e-ctl", "e2e-w01", "e2e-w02"}
    assert docker_client().networks.list(names=["slurm-app-lab-e2e"])
    # the lab's commands answer programs too
    env = deployed["env"]
    shown = driver("lab", "status", "--name", SPEC.name, "--format", "json", env=env)
    assert shown.returncode == 0, shown.stderr
    listed = json.loads(shown.stdout)
    assert {(h["host"], h["state"]) for h in listed["hosts"]} == {
        (name, "running") for name in names
    }
    assert "NODELIST" in listed["sinfo"] and "e2e-w01" in listed["sinfo"]
    gone = driver("lab", "down", "--name", "nosuchlab", "--format", "json", env=env)
    assert (gone.returncode, json.loads(gone.stdout)) == (
        0,
        {"lab": "nosuchlab", "removed_containers": 0},
    )


def _driver_until(request: Path, env: dict[str, str], reached, what: str) -> subprocess.Popen:
    """`slurm-app-driver run REQUEST` by its full path, read until the event `reached` accepts
    (the run still going); fails the test when the run ends first."""
    process = subprocess.Popen(
        [str(VENV / "bin" / "slurm-app-driver"), "run", str(request)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    for line in process.stdout:
        if reached(json.loads(line)):
            return process
    pytest.fail(f"the run ended before {what}")


def test_sigterm_mid_run_cancels_it_and_a_rerun_converges(deployed, monkeypatch):
    state, env = deployed["state"], deployed["env"]
    # the re-run of a converged deploy: cancelled while it reads the members
    process = _driver_until(
        deployed["request"],
        env,
        lambda e: e["event"] == "task.started" and e["play"].startswith("Members - compare"),
        "it read the members",
    )
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=120)
    final = events(rest)[-1]
    assert process.returncode == 1
    assert final["event"] == "operation.result" and final["result"]["status"] == "cancelled"
    assert not list((state / "runs").iterdir()), "run dir left"
    left = subprocess.run(["pgrep", "-f", str(state / "runs")], capture_output=True, text=True)
    assert not left.stdout.split(), "a process of the cancelled run is still there"
    monkeypatch.setenv("SLURM_APP_STATE_DIR", str(state))
    with instance_lock(json.loads(deployed["request"].read_text())["instance"]["id"]):
        pass  # free
    again = driver("run", str(deployed["request"]), env=env)
    assert again.returncode == 0, again.stdout[-2000:]
    assert events(again.stdout)[-1]["result"]["changed"] == 0


def on(host: str, command: str) -> str:
    return on_host(SPEC.name, host, command)


def wait_on(host: str, check: str, seconds: int = 60) -> None:
    wait_on_host(SPEC.name, host, check, seconds)


def operation(
    deployed,
    kind: str,
    target: str | list[str] | None = None,
    *,
    replacement: str | None = None,
    **options,
) -> tuple[int, dict]:
    """A member operation on the e2e cluster through the driver: (exit code, result)."""
    return lab_operation(
        SPEC.name, deployed["env"], kind, target, replacement=replacement, **options
    )


def _member_statuses(result: dict) -> dict[str, str]:
    return {m["member_id"]: m["status"] for m in result["members"]}


def submit(*args: str) -> str:
    """sbatch as the lab user on the controller; the job id."""
    command = " ".join(["sbatch", "--parsable", "-o", "/dev/null", *args])
    return on("e2e-ctl", f"cd /tmp && runuser -u labuser -- {command}").strip()


def _journal_lines(host: str) -> int:
    return int(on(host, "journalctl -q -o cat SYSLOG_IDENTIFIER=slurm-app | wc -l").strip())


def _status_until(deployed, predicate, timeout: float = 60) -> dict:
    """status until its result satisfies `predicate`: through the controller, a worker's
    units are as its node exporter last told Prometheus (every 10 s here)."""
    deadline = time.monotonic() + timeout
    while True:
        code, result = operation(deployed, "status")
        assert code == 0 and result["changed"] == 0, result
        if predicate(result) or time.monotonic() > deadline:
            return result
        time.sleep(2)


def test_status_classifies_with_evidence_and_writes_nothing(deployed):
    journaled = {host: _journal_lines(host) for host in ("e2e-ctl", "e2e-w02")}
    code, result = operation(deployed, "status")
    assert code == 0 and result["changed"] == 0, result
    assert result["instance"]["health"] == "healthy"
    health = result["adapter_detail"]["health"]
    assert health["classification"] == "healthy" and health["problems"] == []
    # the workers through Prometheus: their units, release and last converge as their node
    # exporters last told it; slurmd's version from slurmctld's node listing
    assert health["read"] == "through_controller" and health["unknown"] == {}
    assert set(health["observed_at"]) == {"e2e-w01", "e2e-w02"}
    assert health["services"]["e2e-w02"] == {"munge": "running", "slurmd": "running"}
    detail = result["adapter_detail"]
    assert detail["daemon_versions"]["slurmd"]["e2e-w02"] == detail["daemon_versions"]["slurmctld"]
    assert detail["releases"]["e2e-w02"]["app_slug"] == "slurm-reference"
    assert detail["converged_by"]["e2e-w02"]["operation"] in ("deploy", "add_worker")
    assert health["accounting_reachable"] is True
    # the filesystems of the queue's state, the accounting database and Prometheus's data
    watched = {disk["path"]: disk for disk in health["disks"]}
    assert set(watched) == {
        "/var/lib/slurm/slurmctld",
        "/var/lib/mysql",
        "/var/lib/prometheus/metrics2",
    }, health["disks"]
    assert all(
        d["host"] == "e2e-ctl" and 0 < d["used_bytes"] <= d["size_bytes"] for d in watched.values()
    )
    # every member read over SSH says the same, and neither read journaled anything
    code, every = operation(deployed, "status", read="every_member")
    assert code == 0 and every["adapter_detail"]["health"]["read"] == "every_member"
    for key in ("services", "problems", "classification"):
        assert every["adapter_detail"]["health"][key] == health[key], key
    for key in ("releases", "converged_by", "daemon_versions"):
        assert every["adapter_detail"][key] == detail[key], key
    assert {host: _journal_lines(host) for host in journaled} == journaled
    on("e2e-w02", "systemctl stop slurmd")
    try:
        result = _status_until(
            deployed,
            lambda r: "e2e-w02: slurmd is stopped" in r["adapter_detail"]["health"]["problems"],
        )
        assert result["instance"] == {
            **result["instance"],
            "status": "degraded",
            "health": "degraded",
        }
        assert "e2e-w02: slurmd is stopped" in result["adapter_detail"]["health"]["problems"]
    finally:
        on("e2e-w02", "systemctl start slurmd")
    wait_on("e2e-ctl", "sinfo -h -n e2e-w02 -o %T | grep -qx idle")
    result = _status_until(
        deployed, lambda r: r["adapter_detail"]["health"]["classification"] == "healthy"
    )
    assert result["adapter_detail"]["health"]["classification"] == "healthy", result


def test_an_exporter_down_degrades_status_and_the_alert_reaches_the_webhook(deployed):
    sink: WebhookSink = deployed["sink"]
    on("e2e-w01", "systemctl stop prometheus-node-exporter")
    stopped = time.monotonic()
    try:
        # Prometheus says so once it scraped since (every 10 s); the worker's units are then
        # unknown, with why, and Slurm's node state still speaks for it
        result = _status_until(
            deployed, lambda r: "e2e-w01" in r["adapter_detail"]["health"]["unknown"]
        )
        assert result["instance"]["health"] == "degraded", result
        health = result["adapter_detail"]["health"]
        problems = health["problems"]
        assert health["unknown"]["e2e-w01"].startswith("its node exporter does not answer")
        assert health["services"]["e2e-w01"] == {"munge": "unknown", "slurmd": "unknown"}
        assert any(p.startswith("monitoring: node exporter on e2e-w01 ") for p in problems)
        assert all("e2e-w01" in problem for problem in problems), problems
        # TargetDown: 3 scrape intervals down, then Alertmanager's group_wait
        firing = sink.wait_for("firing", "TargetDown", "e2e-w01", timeout=180)
        fired_after = time.monotonic() - stopped
        _, result = operation(deployed, "status")
        problems = result["adapter_detail"]["health"]["problems"]
        alerts = result["adapter_detail"]["monitoring"]["alerts"]
        assert [(a["name"], a["node"]) for a in alerts] == [("TargetDown", "e2e-w01")], alerts
        assert any(p.startswith("alert TargetDown firing on e2e-w01 since ") for p in problems)
    finally:
        on("e2e-w01", "systemctl start prometheus-node-exporter")
    started = time.monotonic()
    resolved = sink.wait_for("resolved", "TargetDown", "e2e-w01", timeout=180)
    resolved_after = time.monotonic() - started
    for notification in (firing, resolved):
        assert notification["authorization"] == f"Bearer {WEBHOOK_TOKEN}"
        (alert,) = notification["body"]["alerts"]
        assert alert["labels"]["node"] == "e2e-w01" and alert["labels"]["job"] == "node"
        assert alert["annotations"]["summary"] == "node exporter on e2e-w01 does not answer"
    # kept beside the run's state for the record (how long each took, what was delivered)
    (deployed["state"] / "alert-notifications.json").write_text(
        json.dumps({"fired_after_s": round(fired_after), "resolved_after_s": round(resolved_after),
                    "firing": firing["body"], "resolved": resolved["body"]}, indent=2)
    )  # fmt: skip
    _wait_for_target("e2e-w01")
    _, result = operation(deployed, "status")
    assert result["adapter_detail"]["health"]["classification"] == "healthy", result


def _prometheus(path: str) -> dict:
    """GET on the controller's Prometheus (it answers on the controller only)."""
    script = f"import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9090{path}').read().decode())"
    return json.loads(on("e2e-ctl", f'python3 -c "{script}"'))


def _prometheus_started() -> str:
    return on("e2e-ctl", "systemctl show -p ExecMainStartTimestampMonotonic prometheus").strip()


def _target_health(node: str) -> list[str]:
    active = _prometheus("/api/v1/targets?state=active")["data"]["activeTargets"]
    return [t["health"] for t in active if t["labels"].get("node") == node]


def _wait_for_target(node: str) -> None:
    """Until Prometheus scraped the node's node_exporter: its first scrape comes within one
    scrape interval (30 s) of the target's discovery; four intervals leave room for a machine
    busy with another test worker's lab."""
    deadline = time.monotonic() + 120
    while _target_health(node) != ["up"] and time.monotonic() < deadline:
        time.sleep(2)
    assert _target_health(node) == ["up"]


def test_drain_waits_for_jobs_never_kills_one_and_resume_returns_the_node(deployed):
    job = submit("-w", "e2e-w01", "--wrap", "'sleep 25'")
    wait_on("e2e-ctl", f"squeue -h -j {job} -t R | grep -q .")
    code, result = operation(
        deployed, "drain_worker", "e2e-w01", drain_timeout_s=2, reason="maintenance: e2e"
    )
    assert code == 1
    assert result["error"]["code"] == "drain_timeout", result["error"]
    assert job in result["error"]["message"]
    assert _member_statuses(result)["e2e-worker-e2e-w01"] == "draining"
    assert _member_statuses(result)["e2e-controller"] == "ready"
    assert on("e2e-ctl", f"squeue -h -j {job} -o %T").strip() == "RUNNING"
    assert on("e2e-ctl", "sinfo -h -n e2e-w01 -o '%T|%E'").strip() == "draining|maintenance: e2e"
    code, result = operation(
        deployed, "drain_worker", "e2e-w01", drain_timeout_s=120, reason="maintenance: e2e"
    )
    assert code == 0, result
    assert _member_statuses(result)["e2e-worker-e2e-w01"] == "drained"
    assert on("e2e-ctl", f"sacct -n -X -j {job} -o State").split() == ["COMPLETED"]
    # a deploy meanwhile leaves the drain as it is: its readiness proof leaves the drained node
    # out and names it, and the member stays drained
    first_deploy = deployed["request"].read_text()
    code, result = operation(deployed, "deploy")
    deployed["request"].write_text(first_deploy)  # the last test sends it again
    assert code == 0, result
    assert result["adapter_detail"]["readiness"]["drained"] == ["e2e-w01"]
    assert _member_statuses(result)["e2e-worker-e2e-w01"] == "drained"
    assert on("e2e-ctl", "sinfo -h -n e2e-w01 -o '%T|%E'").strip() == "drained|maintenance: e2e"
    code, result = operation(deployed, "resume_worker", "e2e-w01")
    assert code == 0 and result["changed"] == 1, result
    assert _member_statuses(result)["e2e-worker-e2e-w01"] == "ready"
    assert on("e2e-ctl", "sinfo -h -n e2e-w01 -o %T").strip() == "idle"
    code, result = operation(deployed, "resume_worker", "e2e-w01")
    assert code == 0 and result["changed"] == 0, result


def test_a_failed_operation_is_traced_from_its_result_to_the_hosts(deployed, otlp_receiver):
    """docs/operations.md's triage path, correlation first, on a drain that times out: the
    result's trace id is the request's; the spans reach the site's OTLP collector, the failed
    task's naming the host; the host journal finds the run's entries by the same id."""
    job = submit("-w", "e2e-w02", "--wrap", "'sleep 30'")
    wait_on("e2e-ctl", f"squeue -h -j {job} -t R | grep -q .")
    request = lab_requests.operation_request(
        SPEC.name, "drain_worker", "e2e-w02", {"drain_timeout_s": 2, "reason": "triage: e2e"}
    )
    trace_id = os.urandom(16).hex()
    data = json.loads(request.read_text())
    data["traceparent"] = f"00-{trace_id}-{os.urandom(8).hex()}-01"
    request.write_text(json.dumps(data))
    site = yaml.safe_load((deployed["state"] / "site.yaml").read_text()) or {}
    site["traces"] = {"otlp_endpoint": otlp_receiver.endpoint}
    site_file = deployed["state"].parent / "site-with-traces.yaml"
    site_file.write_text(yaml.safe_dump(site))
    events_file = deployed["state"].parent / "drain-events.jsonl"
    ran = console_script(
        "run", str(request), "--events-file", str(events_file),
        env={**deployed["env"], "SLURM_APP_SITE": str(site_file)}, timeout=600,
    )  # fmt: skip
    try:
        assert ran.returncode == 1, ran.stdout[-3000:] + ran.stderr[-2000:]
        result = run_events(ran.stdout)[-1]["result"]
        assert result["error"]["code"] == "drain_timeout" and result["trace_id"] == trace_id
        # the event timeline: every event of the run carries the trace id
        timeline = [json.loads(line) for line in events_file.read_text().splitlines()]
        assert {event["trace_id"] for event in timeline} == {trace_id}
        # the trace: the failed task's span names the host the result names
        spans = otlp_receiver.spans(trace_id)
        failed = [span for span in spans if span["attributes"].get("ansible.task.hosts_failed")]
        assert [span["attributes"]["ansible.task.hosts_failed"] for span in failed] == [
            [result["error"]["host"]]
        ], [span["name"] for span in failed]
        assert failed[0]["status"]["code"] == 2 and job in failed[0]["status"]["message"]
        hosts = {
            host for span in spans for host in span["attributes"].get("ansible.task.hosts", [])
        }
        # a drain works through the controller alone
        assert hosts == {"e2e-ctl"}
        # the host journal, by the trace id alone
        entries = on(
            result["error"]["host"],
            f"journalctl --no-pager -o json SLURM_APP_TRACE_ID={trace_id}",
        ).splitlines()
        journal = [json.loads(line) for line in entries if line.startswith("{")]
        kinds = [entry["SLURM_APP_EVENT"] for entry in journal]
        assert kinds[0] == "start" and kinds[-1] == "end", kinds
        # the writer's process is named without the driver's user and host (Mitogen's default
        # names them: python3(mitogen:root@driverhost:571))
        for entry in journal:
            assert entry["_CMDLINE"].strip('"') == "/usr/bin/python3(mitogen:ansible)", entry
        sent = otlp_receiver.spans_file.read_bytes() + ran.stderr.encode()
        assert not [secret for secret in _lab_secrets() if secret in sent]
    finally:
        on("e2e-ctl", f"scancel {job}")
        # `lab op --format json`, as an operator pipes it: JSON lines on stdout, nothing else
        resumed = console_script(
            "lab", "op", "resume_worker", "--name", SPEC.name, "--target", "e2e-w02",
            "--format", "json", env={"PATH": "/usr/bin:/bin"}, timeout=600,
        )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert run_events(resumed.stdout)[-1]["result"]["status"] == "succeeded"
    assert "request: " in resumed.stderr


def test_a_busy_node_is_named_not_waited_for(deployed):
    """A node whose jobs hold every CPU would keep the readiness job pending until its timeout:
    the proof runs on the other node and names it busy; with every node busy and no earlier
    proof standing, nothing can prove readiness (no_node_in_service), and no job is killed."""
    first_deploy = deployed["request"].read_text()
    jobs = []
    try:
        for node in ("e2e-w01", "e2e-w02"):
            jobs.append(submit("-w", node, "--exclusive", "--wrap", "'sleep 600'"))
            wait_on("e2e-ctl", f"squeue -h -j {jobs[-1]} -t R | grep -q .")
            # a new proof, not the last one's: as after a change of the configuration
            on("e2e-ctl", "rm -f /var/lib/slurm-app/readiness.json")
            code, result = operation(deployed, "deploy")
            deployed["request"].write_text(first_deploy)
            if node == "e2e-w01":
                assert code == 0, result
                readiness = result["adapter_detail"]["readiness"]
                assert readiness["busy"] == ["e2e-w01"] and readiness["nodes"] == 1, readiness
                assert not readiness["reused"] and readiness["accounting_record"], readiness
            else:
                assert code == 1 and result["error"]["code"] == "no_node_in_service", result
                said = result["error"]["message"]
                assert "busy with jobs that hold every CPU (e2e-w01, e2e-w02)" in said, said
        states = on("e2e-ctl", f"squeue -h -j {','.join(jobs)} -o %T").split()
        assert states == ["RUNNING", "RUNNING"]
    finally:
        on("e2e-ctl", f"scancel {' '.join(jobs)}" if jobs else "true")
    wait_on("e2e-ctl", "sinfo -h -o %T | sort -u | grep -qx idle")
    code, result = operation(deployed, "deploy")
    deployed["request"].write_text(first_deploy)
    assert code == 0 and result["adapter_detail"]["readiness"]["busy"] == [], result


def _driver_installation(tmp_path_factory, name: str, expiry_s: int) -> dict[str, str]:
    """Another driver installation against the same lab (its own state folder, so its own
    instance lock), named `name` in the instance's lease."""
    state = tmp_path_factory.mktemp(f"driver-state-{name}")
    env = platform_env(state)
    site = yaml.safe_load((state / "site.yaml").read_text()) or {}
    site["lease"] = {"driver_name": name, "expiry_s": expiry_s}
    (state / "site.yaml").write_text(yaml.safe_dump(site))
    return env


def _lease_on_the_controller() -> list[dict]:
    found = on("e2e-ctl", "cat /run/slurm-app-lease/*.json 2>/dev/null || true")
    return [json.loads(part) for part in found.replace("}\n{", "}\0{").split("\0") if part.strip()]


def test_one_lease_per_instance_across_driver_hosts(deployed, tmp_path_factory):
    """Two driver installations (two state folders, two instance locks, as two driver hosts
    have) against one cluster: the first is killed while it holds the lease; the second is
    refused with exit 3 naming the holder, nothing written on any host, until the lease
    expires; a run that ends gives it back."""
    first = _driver_installation(tmp_path_factory, "driver-one", expiry_s=20)
    second = _driver_installation(tmp_path_factory, "driver-two", expiry_s=600)
    request = lab_requests.operation_request(SPEC.name, "resume_worker", "e2e-w01", {})
    held = json.loads(request.read_text())
    process = _driver_until(
        request,
        first,
        # the journal's start entry: the preflight's next task after the lease's
        lambda e: (
            e["event"] == "task.started"
            and e["task"] == "Write the run's entry in the host's journal"
        ),
        "it took the lease",
    )
    process.kill()
    process.wait(timeout=10)
    killed_at = time.monotonic()
    (lease,) = _lease_on_the_controller()
    assert lease["holder"] == {
        "operation_id": held["operation"]["id"],
        "operation": "resume_worker",
        "correlation_id": held["correlation_id"],
        "driver": "driver-one",
    }
    code, result = lab_operation(SPEC.name, second, "resume_worker", "e2e-w01")
    assert code == 3 and result["error"]["code"] == "instance_busy", result
    message = result["error"]["message"]
    assert held["operation"]["id"] in message and "driver driver-one" in message, message
    assert message.endswith("nothing was changed on any host")
    assert result["instance"]["status"] == "unchanged" and result["changed"] == 0
    refused = json.loads((lab_spec.lab_dir(SPEC.name) / "resume_worker.json").read_text())
    for host in ("e2e-ctl", "e2e-w01"):
        assert journal_of(SPEC.name, host, "resume_worker")[1] == [], host
    assert refused["correlation_id"] != held["correlation_id"]
    # the killed driver's lease expires by itself (20 s here; a site setting)
    time.sleep(max(0.0, 21 - (time.monotonic() - killed_at)))
    code, result = lab_operation(SPEC.name, second, "resume_worker", "e2e-w01")
    assert code == 0, result
    assert _lease_on_the_controller() == []


def test_a_hostile_job_name_is_read_as_a_name(deployed):
    check_a_hostile_job_name_is_read_as_a_name(SPEC.name, deployed["env"], "e2e-w01")


def test_a_user_who_watches_proc_cannot_forge_a_queue_answer(deployed):
    seen = check_no_reader_separator_reaches_another_user(SPEC.name)
    print_for_the_note({"24.11: separators seen on command lines": seen})


def test_homes_are_their_users_alone(deployed):
    check_homes_are_their_users_alone(SPEC.name, ["e2e-ctl", "e2e-w01"], "/home/labuser")


def test_stop_keeps_queued_jobs_and_start_runs_them(deployed):
    job = submit("--begin=now+20", "--wrap", "true")
    code, result = operation(deployed, "stop")
    assert code == 0, result
    assert result["instance"]["status"] == "stopped"
    assert set(_member_statuses(result).values()) == {"stopped"}
    assert (
        on("e2e-ctl", "systemctl is-active munge mariadb slurmdbd slurmctld || true").split()
        == ["inactive"] * 4
    )
    assert on("e2e-w01", "systemctl is-active munge slurmd || true").split() == ["inactive"] * 2
    code, result = operation(deployed, "start")
    assert code == 0, result
    assert set(_member_statuses(result).values()) == {"ready"}
    wait_on("e2e-ctl", f"sacct -n -X -j {job} -o State | grep -q COMPLETED")
    code, result = operation(deployed, "restart")
    assert code == 0, result
    assert result["instance"] == {**result["instance"], "status": "running", "health": "healthy"}
    output = lab.test_job(SPEC.name)
    assert sorted(line.split(": ", 1)[1] for line in output.splitlines()) == ["e2e-w01", "e2e-w02"]


def _munge_keys() -> dict[str, str]:
    return {
        host: on(host, "sha256sum /etc/munge/munge.key").split()[0]
        for host in ("e2e-ctl", "e2e-w01", "e2e-w02")
    }


def _rotate(deployed, key_file: Path | None = None) -> dict:
    request = lab_requests.operation_request(SPEC.name, "rotate_munge_key")
    if key_file is not None:
        data = json.loads(request.read_text())
        data["credentials"]["munge_key_file"] = str(key_file)
        request.write_text(json.dumps(data))
    code, result = run_request(request, deployed["env"])
    assert code == 0, result
    return result


def test_rotate_munge_key_keeps_jobs_running_and_the_next_deploy_converged(deployed):
    """A job runs through the rotation and one queued before it runs after; every host ends
    with the same new key and no copy of the old one; the unchanged deploy still skips; then a
    platform-supplied key is rotated in the same way, and sending it again changes nothing."""
    old = _munge_keys()
    assert len(set(old.values())) == 1
    # the job ends when the test says so, not after a guess at how long the rotation takes
    release = "/tmp/release-rotation-job"
    waits = f"'while [ ! -e {release} ]; do sleep 1; done'"
    running = submit("-w", "e2e-w01", "-t", "10", "--wrap", waits)
    wait_on("e2e-ctl", f"squeue -h -j {running} -t R | grep -q .")
    queued = submit("-w", "e2e-w02", f"--dependency=afterok:{running}", "--wrap", "true")
    result = _rotate(deployed)
    assert result["adapter_detail"]["munge_key"] == {"rotated": True, "source": "generated"}
    assert result["adapter_detail"]["readiness"]["reused"] is False
    assert set(_member_statuses(result).values()) == {"ready"}
    new = _munge_keys()
    assert len(set(new.values())) == 1 and set(new.values()) != set(old.values())
    old_sha = next(iter(old.values()))
    for host in new:
        copies = on(
            host,
            "find /etc /var/lib /root /tmp /var/tmp -xdev -type f -size -8k "
            "-exec sha256sum {} + 2>/dev/null || true",
        )
        assert old_sha not in copies, host
    assert on("e2e-ctl", f"squeue -h -j {running} -o %T").strip() == "RUNNING"
    on("e2e-w01", f"touch {release}")
    for job in (running, queued):
        wait_on("e2e-ctl", f"sacct -n -X -j {job} -o State | grep -q COMPLETED")

    again = driver("run", str(deployed["request"]), env=deployed["env"])
    final = events(again.stdout)[-1]["result"]
    assert again.returncode == 0 and final["changed"] == 0, final["hosts"]
    started = {e["task"] for e in events(again.stdout) if e["event"] == "task.started"}
    assert INSTALL_STEP not in started

    platform_key = lab_spec.key_dir(SPEC.name) / "munge.key"
    platform_key.touch(mode=0o600)
    platform_key.write_bytes(os.urandom(1024))
    result = _rotate(deployed, platform_key)
    assert result["adapter_detail"]["munge_key"] == {"rotated": True, "source": "platform"}
    expected = hashlib.sha256(platform_key.read_bytes()).hexdigest()
    assert set(_munge_keys().values()) == {expected}
    result = _rotate(deployed, platform_key)
    assert result["adapter_detail"]["munge_key"]["rotated"] is False
    assert result["changed"] == 0, result["hosts"]


def test_a_backup_reaches_the_control_plane_while_jobs_run_and_leaks_no_key(deployed):
    """Without a platform mount the backup is staged on the controller, fetched into the
    driver's backups folder (0700) and removed there. Its files match the manifest; the state
    holds the running and the pending job, the dump their records; both jobs go on; the munge
    key is in no output and no file of the driver's state but the backup's own."""
    release = "/tmp/release-backup-job"
    waits = f"'until [ -e {release} ]; do sleep 1; done'"
    running = submit("-J", "backup-probe-running", "-w", "e2e-w01", "-t", "10", "--wrap", waits)
    wait_on("e2e-ctl", f"squeue -h -j {running} -t R | grep -q .")
    pending = submit(
        "-J",
        "backup-probe-pending",
        "-w",
        "e2e-w01",
        f"--dependency=afterok:{running}",
        "--wrap",
        "true",
    )
    try:
        ran = driver(
            "run",
            str(lab_requests.operation_request(SPEC.name, "backup")),
            env=deployed["env"],
        )
        result = events(ran.stdout)[-1]["result"]
        assert ran.returncode == 0 and result["status"] == "succeeded", result
        assert result["adapter_detail"]["hosts_touched"] == ["e2e-ctl"]
        detail = result["adapter_detail"]["backup"]
        assert detail["destination"] == "control_plane" and "path" not in detail
        manifest = detail["manifest"]
        instance = result["instance"]["id"]
        assert manifest["instance_id"] == instance and manifest["cluster_name"] == SPEC.name
        assert manifest["slurm_version"].startswith("24.11.")
        folder = deployed["state"] / "backups" / instance / detail["backup_id"]
        assert (
            folder.stat().st_mode & 0o777 == 0o700 and folder.parent.stat().st_mode & 0o777 == 0o700
        )
        assert json.loads((folder / "manifest.json").read_text()) == manifest
        for entry in manifest["files"]:
            content = (folder / entry["name"]).read_bytes()
            assert hashlib.sha256(content).hexdigest() == entry["sha256"], entry["name"]
            assert (folder / entry["name"]).stat().st_mode & 0o077 == 0, entry["name"]
        with tarfile.open(folder / "state.tar.gz") as tar:
            job_state = tar.extractfile("var/lib/slurm/slurmctld/job_state")
            assert job_state is not None
            saved = job_state.read()
        # slurmctld's saved queue holds both jobs; accounting, the job that started
        assert b"backup-probe-running" in saved and b"backup-probe-pending" in saved
        dump = gzip.decompress((folder / "accounting.sql.gz").read_bytes()).decode()
        assert "INSERT INTO `e2e_job_table`" in dump
        assert "'backup-probe-running'" in dump
        assert on("e2e-ctl", "ls -A /var/lib/slurm-app-backup").strip() == ""
        # the paused scheduler lost nothing: the running job goes on, the pending one runs after
        assert on("e2e-ctl", f"squeue -h -j {running} -o %T").strip() == "RUNNING"
    finally:
        # released whatever happened: a job left running would hold e2e-w01 for later tests
        on("e2e-w01", f"touch {release}")
    for job in (running, pending):
        wait_on("e2e-ctl", f"sacct -n -X -j {job} -o State | grep -q COMPLETED")
    munge_key = lab.controller_container(SPEC.name).exec_run(["cat", "/etc/munge/munge.key"]).output
    assert (folder / "munge.key").read_bytes() == munge_key
    for secret in (munge_key, munge_key[100:160]):
        assert secret not in ran.stdout.encode() + ran.stderr.encode()
        for path in deployed["state"].rglob("*"):
            if path.is_file() and folder not in path.parents:
                assert secret not in path.read_bytes(), path


# What root on the controller makes its backup command print (issue 65, 1). Each backup
# reinstalls the bundle's command, so the hook sits in Python's startup (a .pth file), as a
# customer's root may put it: the command runs as ever, and its answer is reshaped on the way out.
HOSTILE_BACKUP_HOOK = r"""
import atexit, io, json, sys
if sys.argv[0].endswith("/slurm-app/backup") and "run" in sys.argv:
    real, sys.stdout = sys.stdout, io.StringIO()
    def reshape():
        answer = json.loads(sys.stdout.getvalue())
        with open("/root/hostile-backup.json") as changes:
            for path, value in json.load(changes).items():
                *parents, last = path.split(".")
                node = answer
                for part in parents:
                    node = node[int(part)] if part.isdigit() else node[part]
                node[int(last) if last.isdigit() else last] = value
        real.write(json.dumps(answer) + "\n")
        real.flush()
    atexit.register(reshape)
"""
GIB = 1024**3
HOSTILE_BACKUP_ANSWERS = {
    "an id that climbs": ({"backup_id": "../.."}, "backup_id"),
    "another instance's folder": (
        {"backup_id": "7e7e7e7e-7e7e-4e7e-8e7e-7e7e7e7e7e7e/20300101T000000Z"},
        "backup_id",
    ),
    "an absolute path": ({"path": "/etc/slurm-app"}, "path"),
    "a climbing name": ({"manifest.files.0.name": "../../site.yaml"}, "manifest.files[0].name"),
    "a slash in a name": ({"manifest.files.1.name": "x/munge.key"}, "manifest.files[1].name"),
    "a NUL in a name": ({"manifest.files.2.name": "munge.key\u0000"}, "manifest.files[2].name"),
    "a claimed 10 GiB": ({"manifest.files.2.bytes": 10 * GIB}, "manifest.files[2].bytes"),
    "10,000 files": (
        {
            "manifest.files": [
                {"name": f"f{i}", "bytes": 1, "sha256": "0" * 64} for i in range(10_000)
            ]
        },
        "(the answer)",  # past the answer's 1 MiB before it is parsed
    ),
}


def _state_files(state: Path) -> dict[str, bytes]:
    """Every file of the driver's state folder but the runs' own scratch."""
    return {
        str(path.relative_to(state)): path.read_bytes()
        for path in sorted(state.rglob("*"))
        if path.is_file() and "runs" not in path.relative_to(state).parts
    }


def test_a_controllers_hostile_backup_answer_is_refused_and_writes_nothing(deployed, tmp_path):
    """Whatever the controller's backup command prints, the control plane writes under its own
    names: each hostile answer is refused as backup_refused naming its field (exit 1), and no
    file of the driver's state folder is added, removed or changed."""
    site = on("e2e-ctl", "python3 -c 'import site; print(site.getsitepackages()[0])'").strip()
    on(
        "e2e-ctl",
        f"mkdir -p {site} && cat > {site}/hostile_backup.py <<'EOF'\n{HOSTILE_BACKUP_HOOK}EOF",
    )
    on("e2e-ctl", f"echo 'import hostile_backup' > {site}/hostile-backup.pth")
    state = deployed["state"]
    try:
        for case, (changes, field) in HOSTILE_BACKUP_ANSWERS.items():
            # a file, not a command line: the 10,000-file answer passes a command's length
            (tmp_path / "hostile-backup.json").write_text(json.dumps(changes))
            upload(
                SPEC.name,
                "e2e-ctl",
                {"hostile-backup.json": tmp_path / "hostile-backup.json"},
                "/root",
            )
            before = _state_files(state)
            code, result = operation(deployed, "backup")
            assert code == 1, (case, result)
            error = result["error"]
            assert error["code"] == "backup_refused", (case, error)
            # the refusing task's name, then the field
            assert error["message"].split(": ", 1)[1].startswith(f"{field}:"), (case, error)
            assert result["instance"]["status"] == "running", case
            assert _state_files(state) == before, case
    finally:
        on("e2e-ctl", f"rm -f {site}/hostile-backup.pth {site}/hostile_backup.py")
        on("e2e-ctl", "rm -rf /var/lib/slurm-app-backup/*")


def _slurm_conf_sha() -> str:
    return on("e2e-ctl", "sha256sum /etc/slurm/slurm.conf").split()[0]


def _reconfigures(deployed) -> int:
    """How many reconfigure requests slurmctld has processed (one log line each on 24.11), in
    the log the deploy's access bundle names."""
    bundle = events(deployed["first"].stdout)[-1]["result"]["adapter_detail"]["access_bundle"]
    log = on("e2e-ctl", f"cat {bundle['log_paths']['slurmctld']}")
    return log.count("Processing Reconfiguration Request")


def _slurmd_since(host: str) -> str:
    return on(host, "systemctl show -p ActiveEnterTimestamp slurmd").strip()


def test_add_worker_touches_only_the_controller_and_the_new_worker(deployed):
    """The new worker has a GPU device file: it joins with its gres, and the GPU job mapping
    works through the script slurmd fetched with the configuration (24.11, configless)."""
    lab.add_host(SPEC.name, "e2e-w03", gpus=1)
    prometheus_started = _prometheus_started()
    before = {host: _slurmd_since(host) for host in ("e2e-w01", "e2e-w02")}
    config = _slurm_conf_sha()
    code, result = operation(deployed, "add_worker", "e2e-w03", wait_idle_timeout_s=120)
    assert code == 0, result
    assert result["adapter_detail"]["hosts_touched"] == ["e2e-ctl", "e2e-w03"]
    assert _member_statuses(result)["e2e-worker-e2e-w03"] == "ready"
    readiness = result["adapter_detail"]["readiness"]
    assert readiness["nodes"] == 1
    assert {r["node_list"] for r in readiness["accounting_record"]} == {"e2e-w03"}
    # no existing slurmd restarted; the new node is in the controller's configuration
    assert {host: _slurmd_since(host) for host in before} == before
    assert _slurm_conf_sha() != config
    assert on("e2e-ctl", "sinfo -h -N -o %N").split() == ["e2e-w01", "e2e-w02", "e2e-w03"]
    # monitoring: one more target file; Prometheus picks it up without a restart, and the new
    # node_exporter is up within two scrape intervals (30 s each)
    assert on("e2e-ctl", "ls /etc/prometheus/slurm-app-targets").split() == [
        "e2e-ctl.yml",
        "e2e-w01.yml",
        "e2e-w02.yml",
        "e2e-w03.yml",
    ]
    _wait_for_target("e2e-w03")
    assert _prometheus_started() == prometheus_started
    code, again = operation(deployed, "add_worker", "e2e-w03", wait_idle_timeout_s=120)
    assert code == 0 and again["changed"] == 0, again["hosts"]

    assert on("e2e-ctl", "sinfo -h -n e2e-w03 -o %G").strip() == "gpu:1"
    assert "Prolog=gpu-job-map\nEpilog=gpu-job-map\n" in on("e2e-ctl", "cat /etc/slurm/slurm.conf")
    assert on("e2e-w03", "test -x /run/slurm/conf/gpu-job-map && echo fetched").strip() == "fetched"
    check_gpu_job_mapping(SPEC.name, "e2e-w03")


# What a worker's slurmd answers when its host is broken on purpose: `slurmd -C` fails (the
# join fails while the worker is prepared), or it answers but the daemon exits at once (the
# join fails after the node was recorded on the controller). On Debian 13 /usr/sbin/slurmd is
# an alternatives link, which dpkg leaves alone where a real file stands: the slurmd package
# installs beside the fake, and the repair points the link back.
FAKE_SLURMD = {
    "fails_detection": "#!/bin/sh\nexit 1\n",
    "exits_at_start": (
        '#!/bin/sh\ncase "$1" in\n'
        "-C) echo 'NodeName=e2e-w04 CPUs=1 Boards=1 SocketsPerBoard=1 CoresPerSocket=1 "
        "ThreadsPerCore=1 RealMemory=1000';;\n-V) echo 'slurm 24.11.5';;\n*) exit 1;;\nesac\n"
    ),
}


def test_a_failed_join_leaves_the_controller_untouched_or_the_node_down(deployed, monkeypatch):
    """Unreachable, then failing while prepared, then failing after it was recorded while
    e2e-w05, e2e-w07 and e2e-w08 join in the same operation (k=4 on 24.11: one reconfigure for
    the four, one readiness job over the three that joined); then repaired, the driver killed
    mid-join: the same four targets converge in one run. Meanwhile e2e-w03's container is dead
    (killed once the hosts this module adds later have their addresses: docker would give a
    later host the dead one's, which the request would carry twice): no add waits on a worker
    it does not touch."""
    # e2e-w06: the replace test's new worker
    for host in ("e2e-w04", "e2e-w05", "e2e-w06", "e2e-w07", "e2e-w08"):
        lab.add_host(SPEC.name, host)
    kill_host(SPEC.name, "e2e-w03")
    config = _slurm_conf_sha()
    on("e2e-w04", "systemctl stop ssh")
    code, result = operation(deployed, "add_worker", "e2e-w04", wait_idle_timeout_s=10)
    on("e2e-w04", "systemctl start ssh")
    assert code == 1
    assert (result["error"]["code"], result["error"]["host"]) == ("host_unreachable", "e2e-w04")
    assert result["changed"] == 0 and _slurm_conf_sha() == config
    plant = "cat > /usr/sbin/slurmd <<'EOF'\n{}EOF\nchmod 0755 /usr/sbin/slurmd"
    on("e2e-w04", plant.format(FAKE_SLURMD["fails_detection"]))
    code, result = operation(deployed, "add_worker", "e2e-w04", wait_idle_timeout_s=10)
    assert code == 1
    assert (result["error"]["code"], result["error"]["host"]) == ("host_failed", "e2e-w04")
    assert _member_statuses(result)["e2e-worker-e2e-w04"] == "failed"
    assert result["instance"]["status"] == "running"  # the cluster runs as before
    assert _slurm_conf_sha() == config, "the controller's configuration changed"
    assert "e2e-w04" not in on("e2e-ctl", "sinfo -h -N -o %N").split()

    on("e2e-w04", plant.format(FAKE_SLURMD["exits_at_start"]))
    four = ["e2e-w04", "e2e-w05", "e2e-w07", "e2e-w08"]
    joined = four[1:]
    # e2e-w04 fails at its start (slurmd exits); the three others must reach idle on a busy
    # machine
    reconfigures = _reconfigures(deployed)
    code, result = operation(deployed, "add_worker", four, wait_idle_timeout_s=120)
    assert code == 1
    # the four nodes recorded in one change: one reconfigure for all of them
    assert _reconfigures(deployed) == reconfigures + 1
    assert result["error"]["host"] == "e2e-w04"
    assert "left DOWN" in result["error"]["message"]
    assert result["error"]["message"].endswith(
        "failed on 1 of 4 targets (e2e-w04), done on e2e-w05, e2e-w07, e2e-w08"
    ), result["error"]
    statuses = _member_statuses(result)
    assert [statuses[f"e2e-worker-{host}"] for host in four] == ["failed"] + ["ready"] * 3
    assert (result["instance"]["status"], result["instance"]["health"]) == ("running", "degraded")
    assert result["adapter_detail"]["hosts_touched"] == ["e2e-ctl", *four]
    # one readiness job over the nodes that joined, not the one left DOWN
    readiness = result["adapter_detail"]["readiness"]
    assert readiness["nodes"] == 3, readiness
    state = on("e2e-ctl", "sinfo -h -N -n e2e-w04 -o '%T|%E'").strip()
    assert state.startswith("down") and "add_worker failed" in state, state
    assert on("e2e-ctl", f"sinfo -h -N -n {','.join(joined)} -o %T").split() == ["idle"] * 3
    assert on("e2e-ctl", "ls /etc/prometheus/slurm-app-targets").split() == [
        "e2e-ctl.yml",
        "e2e-w01.yml",
        "e2e-w02.yml",
        "e2e-w03.yml",
        "e2e-w05.yml",
        "e2e-w07.yml",
        "e2e-w08.yml",
    ]

    on("e2e-w04", "rm /usr/sbin/slurmd && update-alternatives --auto slurmd")
    _killed_while_recording_the_node(deployed, "e2e-w04", monkeypatch)
    code, result = operation(deployed, "add_worker", four, wait_idle_timeout_s=120)
    assert code == 0, result
    assert on("e2e-ctl", f"sinfo -h -N -n {','.join(four)} -o %T").split() == ["idle"] * 4
    assert result["adapter_detail"]["hosts_touched"] == ["e2e-ctl", *four]
    statuses = _member_statuses(result)
    assert [statuses[f"e2e-worker-{host}"] for host in four] == ["ready"] * 4
    assert _lease_on_the_controller() == []


def _killed_while_recording_the_node(deployed, host: str, monkeypatch) -> None:
    """The driver SIGKILLed once the worker is prepared and the controller records the node:
    no process of the run outlives it and the instance's lock is free at once; its lease on
    the controller stays until the same driver's next run takes it over."""
    state = deployed["state"]
    request = lab_requests.operation_request(
        SPEC.name, "add_worker", host, {"wait_idle_timeout_s": 120}
    )
    process = _driver_until(
        request,
        deployed["env"],
        lambda e: e["event"] == "task.started" and e["play"].startswith("Controller - record"),
        "the controller recorded the node",
    )
    process.kill()
    process.wait(timeout=10)
    left = ""
    for _ in range(30):
        left = subprocess.run(
            ["pgrep", "-f", str(state / "runs")], capture_output=True, text=True
        ).stdout
        if not left.split():
            break
        time.sleep(1)
    assert not left.split(), "a process of the killed run outlived the driver"
    # its lease stays on the controller; the same driver's next run takes it over
    (lease,) = _lease_on_the_controller()
    assert lease["holder"]["operation_id"] == json.loads(request.read_text())["operation"]["id"]
    instance = json.loads(request.read_text())["instance"]["id"]
    with monkeypatch.context() as driver_state:  # the lab's own files stay where they are
        driver_state.setenv("SLURM_APP_STATE_DIR", str(state))
        with instance_lock(instance):
            pass  # free


def test_replace_joins_the_new_worker_then_waits_for_the_old_ones_job_and_removes_it(deployed):
    """e2e-w06 takes e2e-w05's place while a job runs there: the new node takes jobs while the
    old one drains (the capacity never drops), the job is waited for and completes, then the
    old worker is cleaned and dropped, in one operation."""
    release = "/tmp/release-replace-job"
    waits = f"'while [ ! -e {release} ]; do sleep 1; done'"
    job = submit("-w", "e2e-w05", "-t", "15", "--wrap", waits)
    wait_on("e2e-ctl", f"squeue -h -j {job} -t R | grep -q .")
    prometheus_started = _prometheus_started()
    with ThreadPoolExecutor(max_workers=1) as pool:
        replacing = pool.submit(
            operation,
            deployed,
            "replace_worker",
            "e2e-w05",
            replacement="e2e-w06",
            drain_timeout_s=900,
        )
        wait_on("e2e-ctl", "sinfo -h -N -n e2e-w05 -o %T | grep -qx draining", seconds=600)
        # the old node drains only once its replacement takes jobs
        assert on("e2e-ctl", "sinfo -h -N -n e2e-w06 -o %T").strip() == "idle"
        assert on("e2e-ctl", f"squeue -h -j {job} -o %T").strip() == "RUNNING"
        reason = on("e2e-ctl", "sinfo -h -N -n e2e-w05 -o %E").strip()
        assert reason == "replaced by e2e-w06 (replace_worker)", reason
        assert not replacing.done()
        on("e2e-w05", f"touch {release}")
        code, result = replacing.result(timeout=900)
    assert code == 0, result
    assert on("e2e-ctl", f"sacct -n -X -j {job} -o State").split()[0] == "COMPLETED"
    statuses = _member_statuses(result)
    assert (statuses["e2e-worker-e2e-w05"], statuses["e2e-worker-e2e-w06"]) == ("removed", "ready")
    assert result["adapter_detail"]["hosts_touched"] == ["e2e-ctl", "e2e-w05", "e2e-w06"]
    assert {e["path"] for e in result["adapter_detail"]["destroyed"]["e2e-w05"]} >= {"/etc/munge"}
    nodes = on("e2e-ctl", "sinfo -h -N -o %N").split()
    assert "e2e-w06" in nodes and "e2e-w05" not in nodes, nodes
    targets = on("e2e-ctl", "ls /etc/prometheus/slurm-app-targets").split()
    assert "e2e-w06.yml" in targets and "e2e-w05.yml" not in targets, targets
    assert _prometheus_started() == prometheus_started
    assert on("e2e-w05", "dpkg -l | grep -E 'slurm|munge' || true").strip() == ""


def test_remove_worker_refuses_a_busy_node_unless_forced_and_cleans_the_host(deployed):
    job = submit("-w", "e2e-w04", "--wrap", "'sleep 300'")
    wait_on("e2e-ctl", f"squeue -h -j {job} -t R | grep -q .")
    config = _slurm_conf_sha()
    code, result = operation(deployed, "remove_worker", "e2e-w04")
    assert code == 1
    assert result["error"]["code"] == "node_busy" and job in result["error"]["message"]
    assert result["changed"] == 0 and _slurm_conf_sha() == config
    assert _member_statuses(result)["e2e-worker-e2e-w04"] == "ready"
    assert on("e2e-ctl", f"squeue -h -j {job} -o %T").strip() == "RUNNING"

    prometheus_started = _prometheus_started()
    code, result = operation(deployed, "remove_worker", "e2e-w04", force=True)
    assert code == 0, result
    assert _member_statuses(result)["e2e-worker-e2e-w04"] == "removed"
    assert on("e2e-ctl", f"sacct -n -X -j {job} -o State").split()[0] == "CANCELLED"
    assert "e2e-w04" not in on("e2e-ctl", "sinfo -h -N -o %N").split()
    destroyed = {e["path"] for e in result["adapter_detail"]["destroyed"]["e2e-w04"]}
    assert {"/etc/munge", "/var/lib/slurm", "/home/labuser"} <= destroyed
    assert "not_cleaned" not in result["adapter_detail"]
    assert on("e2e-w04", "dpkg -l | grep -E 'slurm|munge|prometheus' || true").strip() == ""
    assert (
        on("e2e-w04", "ls -d /usr/local/libexec/slurm-app /run/slurm-app 2>&1 || true").count(
            "No such file"
        )
        == 2
    )
    assert "e2e-w04.yml" not in on("e2e-ctl", "ls /etc/prometheus/slurm-app-targets").split()
    assert _prometheus_started() == prometheus_started


def test_a_dead_worker_is_removed_only_when_forced_and_reported_not_cleaned(deployed):
    """e2e-w03's container was killed (test_a_failed_join...): a restart goes on without it
    and fails its member; a remove without force changes nothing; forced, the controller
    forgets the node and its scrape target and the result says the host kept everything (it
    could not be cleaned)."""
    code, result = operation(deployed, "restart")
    assert code == 0, result
    statuses = _member_statuses(result)
    assert statuses.pop("e2e-worker-e2e-w03") == "failed"
    assert set(statuses.values()) <= {"ready", "removed"}, statuses
    assert (result["instance"]["status"], result["instance"]["health"]) == ("degraded", "degraded")
    [left] = result["adapter_detail"]["not_reached"]
    assert left["host"] == "e2e-w03" and (
        "connect" in left["reason"] or "timed out" in left["reason"]
    )
    assert on("e2e-ctl", "sinfo -h -N -n e2e-w01,e2e-w02 -o %T").split() == ["idle", "idle"]

    # a deploy must reach every worker (a config change would miss one it left out): it stops
    # at the preflight, naming the dead one, before anything changes
    config = _slurm_conf_sha()
    first_deploy = deployed["request"].read_text()
    code, result = operation(deployed, "deploy")
    deployed["request"].write_text(first_deploy)  # the last test sends it again
    assert code == 1
    assert (result["error"]["code"], result["error"]["host"]) == ("host_unreachable", "e2e-w03")
    assert result["changed"] == 0 and _slurm_conf_sha() == config

    code, result = operation(deployed, "remove_worker", "e2e-w03")
    assert code == 1
    assert (result["error"]["code"], result["error"]["host"]) == ("host_unreachable", "e2e-w03")
    assert result["changed"] == 0 and _slurm_conf_sha() == config
    assert "e2e-w03" in on("e2e-ctl", "sinfo -h -N -o %N").split()

    prometheus_started = _prometheus_started()
    code, result = operation(deployed, "remove_worker", "e2e-w03", force=True)
    assert code == 0, result
    assert _member_statuses(result)["e2e-worker-e2e-w03"] == "removed"
    assert result["instance"]["status"] == "running"
    [left] = result["adapter_detail"]["not_cleaned"]
    assert left["host"] == "e2e-w03" and "destroyed" not in result["adapter_detail"]
    assert "connect" in left["reason"] or "timed out" in left["reason"], left
    assert on("e2e-ctl", "sinfo -h -N -o %N").split() == [
        "e2e-w01",
        "e2e-w02",
        "e2e-w06",
        "e2e-w07",
        "e2e-w08",
    ]
    assert on("e2e-ctl", "ls /etc/prometheus/slurm-app-targets").split() == [
        "e2e-ctl.yml",
        "e2e-w01.yml",
        "e2e-w02.yml",
        "e2e-w06.yml",
        "e2e-w07.yml",
        "e2e-w08.yml",
    ]
    assert _prometheus_started() == prometheus_started


TEARDOWN_PATHS = (
    "/etc/slurm /etc/munge /var/lib/slurm /var/log/slurm /var/lib/munge /var/log/munge "
    "/var/lib/mysql /etc/mysql /home/labuser /etc/prometheus /var/lib/prometheus "
    "/usr/local/lib/slurm-app-exporter /var/lib/slurm-app"
)


def test_a_lost_controller_is_replaced_from_the_control_plane_backup(deployed):
    """Without a platform mount: the backup the driver fetched is copied onto the new
    controller, restored, and the copy removed from it (lab_tools has the checks)."""
    lab.add_host(SPEC.name, "e2e-c2")
    result = check_controller_replacement(
        SPEC.name, deployed["env"], "e2e-ctl", "e2e-c2", "e2e-w01"
    )
    assert result["adapter_detail"]["restore"]["source"] == "control_plane"
    assert on("e2e-c2", "ls -A /var/lib/slurm-app-restore 2>/dev/null || true") == ""


def test_decommission_removes_everything_and_says_what_was_destroyed(deployed):
    """Last but one: the cluster is gone afterwards. Its preview first lists, with sizes, the
    very paths the decommission then destroys, and changes nothing. e2e-w02's container is
    killed first: both leave it out, the decommission completes and names it not cleaned."""
    # the controller replace_controller moved to
    ctl = lab.controller_container(SPEC.name).labels[f"{LABEL}.host"]
    kill_host(SPEC.name, "e2e-w02")
    members = json.loads((lab_spec.lab_dir(SPEC.name) / "members.json").read_text())
    code, preview = operation(deployed, "decommission", preview=True)
    assert code == 0, preview
    assert preview["changed"] == 0 and preview["instance"]["status"] == "unchanged"
    # the members as the request sent them (the removed workers too)
    assert _member_statuses(preview) == _member_statuses({"members": members})
    would = preview["adapter_detail"]["would_destroy"]
    assert {e["path"] for e in would[ctl]} >= {"/home/labuser", "/var/lib/mysql"}
    assert "kept" not in preview["adapter_detail"] and "would_keep" not in preview["adapter_detail"]
    assert [h["host"] for h in preview["adapter_detail"]["not_cleaned"]] == ["e2e-w02"]
    assert on(ctl, "systemctl is-active slurmctld mariadb munge").split() == ["active"] * 3
    code, result = operation(deployed, "decommission")
    assert code == 0, result
    destroyed, previewed = (
        teardown_paths(result["adapter_detail"]["destroyed"]),
        teardown_paths(would),
    )
    assert destroyed == previewed, (destroyed, previewed)
    assert result["instance"]["status"] == "deleted"
    assert set(_member_statuses(result).values()) == {"removed"}
    destroyed = result["adapter_detail"]["destroyed"]
    held = {e["path"]: e["held"] for e in destroyed[ctl]}
    assert held["/var/lib/mysql"].startswith("accounting database")
    assert held["/home/labuser"].startswith("home directory")
    assert held["/var/lib/prometheus"] == "Prometheus's metrics history"
    assert set(destroyed) == {ctl, "e2e-w01", "e2e-w06", "e2e-w07", "e2e-w08"}
    [left] = result["adapter_detail"]["not_cleaned"]
    assert left["host"] == "e2e-w02" and left["reason"], left
    for host in (ctl, "e2e-w01", "e2e-w06", "e2e-w07", "e2e-w08"):
        packages = on(host, "dpkg -l | grep -iE 'slurm|munge|mariadb|mysql|prometheus' || true")
        assert packages.strip() == "", (host, packages)
        left = on(host, f"ls -d {TEARDOWN_PATHS} 2>/dev/null || true")
        assert left.strip() == "", (host, left)
        assert on(host, "getent passwd labuser || true").strip() == ""


def test_a_host_presenting_another_key_gets_nothing(deployed):
    """Last in this module: it gives e2e-w01 new host keys, as an impostor at its address.
    (e2e-w02 is dead: its address fails seconds after the impostor's key is refused.)"""
    worker = next(
        c for c in lab.lab_containers(SPEC.name) if c.labels[f"{LABEL}.host"] == "e2e-w01"
    )
    changed = worker.exec_run(
        ["/bin/sh", "-c", "rm -f /etc/ssh/ssh_host_* && ssh-keygen -A && systemctl restart ssh"]
    )
    assert changed.exit_code == 0, changed.output.decode()
    result = driver("run", str(deployed["request"]), env=deployed["env"])
    assert result.returncode == 1, result.stdout[-2000:]
    stream = events(result.stdout)
    final = stream[-1]["result"]
    assert final["error"]["code"] == "host_key_mismatch"
    assert final["error"]["host"] == "e2e-w01"
    assert final["changed"] == 0
    # nothing past the preflight ran anywhere, not even on the hosts that answered correctly
    assert {e["play"] for e in stream if e["event"] == "task.started"} == {
        "Preflight - every host answers, with its registered host key"
    }
    statuses = {m["member_id"]: m["status"] for m in final["members"]}
    assert statuses["e2e-worker-e2e-w01"] == "failed"
