"""Slurm 22.05 (Debian 12): nodes join and leave through the slurmctld restart path (a
reconfigure after a node-count change kills 22.05's slurmctld); no slurmd restarts; a
removed allocation joins again."""

import pytest
from lab_tools import lab_operation, on_host, platform_env, run_request

from driver.lab import lab

pytestmark = pytest.mark.containers
SPEC = lab.LabSpec(name="old", workers=1, distro="bookworm", placement="separate")
BOTH_IDLE = ["old-w01", "idle", "old-w02", "idle"]


def _on(host: str, command: str) -> str:
    return on_host(SPEC.name, host, command)


@pytest.fixture(scope="module")
def cluster(docker_engine, tmp_path_factory):
    env = platform_env(tmp_path_factory.mktemp("driver-state"))
    lab.down(SPEC.name)
    code, result = run_request(lab.up(SPEC), env)
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
    code, result = lab_operation(SPEC.name, env, "add_worker", "old-w02")
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

    code, result = lab_operation(SPEC.name, env, "remove_worker", "old-w02")
    assert code == 0, result
    assert _on("old-ctl", "sinfo -h -N -o %N").split() == ["old-w01"]
    assert _slurmd_since() == since

    code, result = lab_operation(SPEC.name, env, "add_worker", "old-w02")
    assert code == 0, result
    assert _on("old-ctl", "sinfo -h -N -o '%N %T'").split() == [
        "old-w01",
        "idle",
        "old-w02",
        "idle",
    ]
    output = lab.test_job(SPEC.name)
    assert sorted(line.split(": ", 1)[1] for line in output.splitlines()) == ["old-w01", "old-w02"]
