"""Slurm 22.05 (Debian 12): nodes join and leave through the slurmctld restart path (a
reconfigure after a node-count change kills 22.05's slurmctld); no slurmd restarts; a
removed allocation joins again."""

import json

import pytest
from conftest import VENV, console_script

from driver.catalog import credentials_root
from driver.lab import lab
from driver.lab.hosts import LABEL

pytestmark = pytest.mark.containers
SPEC = lab.LabSpec(name="old", workers=1, distro="bookworm", placement="separate")
BOTH_IDLE = ["old-w01", "idle", "old-w02", "idle"]


def _on(host: str, command: str) -> str:
    container = next(c for c in lab.lab_containers(SPEC.name) if c.labels[f"{LABEL}.host"] == host)
    ran = container.exec_run(["/bin/bash", "-c", command])
    assert ran.exit_code == 0, (command, ran.output.decode())
    return ran.output.decode()


def _run(path, env) -> tuple[int, dict]:
    ran = console_script("run", str(path), env=env, venv=VENV, timeout=1200)
    lines = [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]
    return ran.returncode, lines[-1]["result"]


def _operation(env, kind: str, target: str) -> tuple[int, dict]:
    request = lab.operation_request(SPEC.name, kind, target, {})
    code, result = _run(request, env)
    result_file = request.with_name(f"{kind}-result.json")
    result_file.write_text(json.dumps(result))
    lab.record_members(SPEC.name, result_file)
    return code, result


@pytest.fixture(scope="module")
def cluster(docker_engine, tmp_path_factory):
    env = {
        "PATH": "/usr/bin:/bin",
        "SLURM_APP_STATE_DIR": str(tmp_path_factory.mktemp("driver-state")),
        "SLURM_APP_CREDENTIALS_ROOT": str(credentials_root()),
    }
    lab.down(SPEC.name)
    code, result = _run(lab.up(SPEC), env)
    assert code == 0, result
    assert result["adapter_detail"]["daemon_versions"]["slurmctld"].startswith("22.05.")
    yield env
    lab.down(SPEC.name)


def _slurmd_since() -> str:
    return _on("old-w01", "systemctl show -p ActiveEnterTimestamp slurmd").strip()


def test_add_remove_and_add_again_on_22_05(cluster):
    env = cluster
    lab.add_host(SPEC.name, "old-w02")
    since = _slurmd_since()
    ctl_before = _on("old-ctl", "systemctl show -p ExecMainStartTimestamp slurmctld").strip()
    code, result = _operation(env, "add_worker", "old-w02")
    assert code == 0, result
    # 22.05's path: slurmctld restarted, no slurmd restarted
    assert (
        _on("old-ctl", "systemctl show -p ExecMainStartTimestamp slurmctld").strip() != ctl_before
    )
    assert _slurmd_since() == since
    assert _on("old-ctl", "sinfo -h -N -o '%N %T'").split() == [
        "old-w01",
        "idle",
        "old-w02",
        "idle",
    ]
    assert "error" not in _on("old-ctl", "scontrol ping").lower()

    code, result = _operation(env, "remove_worker", "old-w02")
    assert code == 0, result
    assert _on("old-ctl", "sinfo -h -N -o %N").split() == ["old-w01"]
    assert _slurmd_since() == since

    code, result = _operation(env, "add_worker", "old-w02")
    assert code == 0, result
    assert _on("old-ctl", "sinfo -h -N -o '%N %T'").split() == [
        "old-w01",
        "idle",
        "old-w02",
        "idle",
    ]
    output = lab.test_job(SPEC.name)
    assert sorted(line.split(": ", 1)[1] for line in output.splitlines()) == ["old-w01", "old-w02"]
