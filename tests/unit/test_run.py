"""`slurm-app-driver run` without containers: the lock, and a host that cannot be reached."""

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, example

from driver.runner.run import instance_lock


def _request(tmp_path: Path) -> Path:
    key = tmp_path / "id_ed25519"
    key.write_text("placeholder, never used to connect\n")
    key.chmod(0o600)
    request = example("slurm-reference/deploy")
    request["credentials"] = {"ssh_private_key_file": str(key)}
    request["instance"]["config"] = {"cluster_name": "research"}
    for allocation in request["allocations"]:
        # Loopback port 9: refused at once, so the run fails as unreachable without a network.
        allocation["address"] = "127.0.0.1"
        allocation["ssh_port"] = 9
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    return path


def _run(path: Path, state: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "driver.cli", "run", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={
            "SLURM_APP_STATE_DIR": str(state),
            "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        },
        check=False,
        timeout=300,
    )


def test_busy_instance_exits_three(tmp_path, monkeypatch):
    path = _request(tmp_path)
    monkeypatch.setenv("SLURM_APP_STATE_DIR", str(tmp_path / "state"))
    instance = json.loads(path.read_text())["instance"]["id"]
    with instance_lock(instance):
        result = _run(path, tmp_path / "state")
    assert result.returncode == 3, result.stdout + result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["event"] for e in events] == ["operation.failed", "operation.result"]
    assert events[-1]["result"]["error"]["code"] == "instance_busy"


def test_unreachable_hosts_fail_the_operation(tmp_path):
    result = _run(_request(tmp_path), tmp_path / "state")
    assert result.returncode == 1, result.stdout[-2000:] + result.stderr[-2000:]
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert any(e["event"] == "host.unreachable" for e in events)
    final = events[-1]["result"]
    assert final["status"] == "failed"
    assert final["error"]["code"] == "host_unreachable"
    assert final["error"]["host"] == "slurm-ctl"
    assert final["instance"]["status"] == "failed"
    statuses = {m["member_id"]: m["status"] for m in final["members"]}
    # The first play (controller only) fails; the workers were never reached.
    assert statuses == {"m-ctl": "failed", "m-w1": "pending", "m-w2": "pending"}
    assert final["hosts"]["slurm-ctl"]["unreachable"] == 1


def test_invalid_request_exits_two_before_any_host(tmp_path):
    path = _request(tmp_path)
    data = json.loads(path.read_text())
    data["allocations"][0]["project_id"] = "someone-else"
    path.write_text(json.dumps(data))
    result = _run(path, tmp_path / "state")
    assert result.returncode == 2
    assert "tenant-boundary" in result.stdout


def test_sinfo_rows_become_one_entry_per_node():
    from driver.runner.run import _nodes

    rows = [
        ["a", "idle", "2", "(null)", "batch*"],
        ["a", "idle", "2", "(null)", "debug"],
        ["b", "mixed", "64", "gpu:4", "batch*"],
    ]
    assert _nodes(rows) == [
        {"name": "a", "state": "idle", "cpus": 2, "gres": None, "partitions": ["batch", "debug"]},
        {"name": "b", "state": "mixed", "cpus": 64, "gres": "gpu:4", "partitions": ["batch"]},
    ]
