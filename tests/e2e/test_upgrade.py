"""An instance deployed by the last release's own driver, upgraded by this one and rolled back
(Debian 13, Slurm 24.11): real daemons in systemd containers, both drivers by their full paths.

The last release is the commit in tests/upgrade/FROM, installed by driver.lab.releases beside
the runtime venv that gives it its dependencies."""

import json
import subprocess
import time
from pathlib import Path

import pytest
from conftest import ROOT
from lab_tools import (
    _accounting_view,
    _as_lab_user,
    host_fingerprint,
    lab_operation,
    on_host,
    platform_env,
    wait_on_host,
)

from driver import __version__
from driver.lab import lab
from driver.lab import requests as lab_requests
from driver.lab import spec as lab_spec
from driver.lab.releases import install_release, release_command

pytestmark = pytest.mark.containers
SPEC = lab_spec.LabSpec(name="upg", workers=2, distro="trixie", placement="separate")
CONTROLLER, WORKERS, JOINING = "upg-ctl", ("upg-w01", "upg-w02"), "upg-w03"
RELEASE = (ROOT / "tests" / "upgrade" / "FROM").read_text().strip()
FROM_VERSION = "1.0"
HOSTS = (CONTROLLER, *WORKERS)


def _release_op(release: Path, env: dict[str, str], kind: str, target: str | None = None):
    """A member operation through the last release's driver (its console script, by its full
    path, finding its package first); the lab then knows the members as the result left them."""
    request = lab_requests.operation_request(SPEC.name, kind, target, {}, None)
    command, release_env = release_command(release, env)
    ran = subprocess.run(
        [*command, "run", str(request)],
        env=release_env,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    lines = [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]
    result = lines[-1]["result"]
    result_file = request.with_name(f"{kind}-result.json")
    result_file.write_text(json.dumps(result))
    lab_requests.record_members(SPEC.name, result_file)
    return ran.returncode, result


def _slurmd_started() -> dict[str, str]:
    """When systemd last started each worker's slurmd: a restart changes it; the re-exec in
    place that slurmd 24.11 makes on `scontrol reconfigure` (a new pid, its jobs run on) does
    not."""
    return {
        w: on_host(SPEC.name, w, "systemctl show -p ActiveEnterTimestamp --value slurmd").strip()
        for w in WORKERS
    }


def _prometheus_up_at(moment: float) -> int:
    """How many `up` series Prometheus holds at `moment` (its data from then, queried now)."""
    script = (
        "import json, urllib.request; print(len(json.load(urllib.request.urlopen("
        f"'http://127.0.0.1:9090/api/v1/query?query=up&time={moment:.0f}'))['data']['result']))"
    )
    return int(on_host(SPEC.name, CONTROLLER, f'python3 -c "{script}"'))


# A flat APT repository on the host that offers Slurm 27.05.0 (an index only: nothing of it is
# ever installed), read by apt as a distribution update or a site's own sources would be.
SLURM_NEXT = "/opt/slurm-next"
OFFER_SLURM_27_05 = (
    f"mkdir -p {SLURM_NEXT} && for p in slurmctld slurmdbd slurmd; do printf '%s\\n' "
    "\"Package: $p\" 'Version: 27.05.0-1' 'Architecture: amd64' \"Filename: ./$p.deb\" "
    "'Size: 1' 'Description: a later Slurm' ''; done > "
    f"{SLURM_NEXT}/Packages && echo 'deb [trusted=yes] file:{SLURM_NEXT} ./' > "
    "/etc/apt/sources.list.d/slurm-next.list && apt-get update -qq "
    "-o Dir::Etc::SourceList=/etc/apt/sources.list.d/slurm-next.list "
    "-o Dir::Etc::SourceParts=/dev/null -o APT::Get::List-Cleanup=0"
)
WITHDRAW_SLURM_27_05 = (
    f"rm -rf {SLURM_NEXT} /etc/apt/sources.list.d/slurm-next.list "
    "/var/lib/apt/lists/_opt_slurm-next_*; apt-cache policy slurmctld | grep -q 'Candidate: 24'"
)


def _fingerprints() -> dict[str, str]:
    return {host: host_fingerprint(SPEC.name, host) for host in HOSTS}


@pytest.fixture(scope="module")
def cluster(docker_engine, runtime_venv, tmp_path_factory):
    release = install_release(ROOT, RELEASE, runtime_venv, ROOT / ".venv" / "release-install")
    env = platform_env(tmp_path_factory.mktemp("driver-state"))
    lab.down(SPEC.name)
    path = lab.up(SPEC)
    request = json.loads(path.read_text())
    request["instance"]["version"] = FROM_VERSION
    path.write_text(json.dumps(request))
    code, result = _release_op(release, env, "deploy")
    assert code == 0, result
    lab.add_host(SPEC.name, JOINING)
    yield {"env": env, "release": release, "deployed_at": time.time()}
    lab.down(SPEC.name)


def test_the_last_release_deployed_the_cluster_with_its_own_driver(cluster):
    command, env = release_command(cluster["release"], cluster["env"])
    ran = subprocess.run(
        [*command, "--version"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout.split()[-1] == "0.1.0"  # release 1.0's driver (CHANGELOG.md)
    # that release recorded no release on its members
    for host in HOSTS:
        assert "release.json" not in on_host(SPEC.name, host, "ls /var/lib/slurm-app").split()


def test_refusals_change_nothing_on_any_host(cluster):
    env = cluster["env"]
    before = _fingerprints()
    # a rollback with no upgrade behind it (the request claims the instance at this release)
    deploy = lab_spec.lab_dir(SPEC.name) / "deploy.json"
    request = json.loads(deploy.read_text())
    request["instance"]["version"] = __version__
    deploy.write_text(json.dumps(request))
    try:
        code, result = lab_operation(SPEC.name, env, "rollback", to_version=FROM_VERSION)
    finally:
        request["instance"]["version"] = FROM_VERSION
        deploy.write_text(json.dumps(request))
    assert code == 1 and result["error"]["code"] == "rollback_unavailable", result
    assert "no upgrade is recorded" in result["error"]["message"]
    # an unhealthy cluster: one worker's slurmd stopped
    on_host(SPEC.name, WORKERS[1], "systemctl stop slurmd")
    try:
        code, result = lab_operation(SPEC.name, env, "upgrade", to_version=__version__)
    finally:
        on_host(SPEC.name, WORKERS[1], "systemctl start slurmd")
    assert code == 1 and result["error"]["code"] == "upgrade_unhealthy", result
    assert f"{WORKERS[1]} slurmd stopped" in result["error"]["message"]
    assert result["instance"]["status"] == "running"
    # package sources that offer a Slurm too far ahead (27.05: its window starts at 25.11)
    for host in HOSTS:
        on_host(SPEC.name, host, OFFER_SLURM_27_05)
    try:
        code, result = lab_operation(SPEC.name, env, "upgrade", to_version=__version__)
    finally:
        for host in HOSTS:
            on_host(SPEC.name, host, WITHDRAW_SLURM_27_05)
    assert code == 1 and result["error"]["code"] == "upgrade_unsupported", result
    assert "Slurm 27.05 (27.05.0)" in result["error"]["message"]
    assert "24.11.5 is further back" in result["error"]["message"]
    assert _fingerprints() == before
    for host in HOSTS:
        kept = on_host(SPEC.name, host, "ls -A /var/lib/slurm-app-releases 2>/dev/null; true")
        assert kept == "", host
    wait_on_host(SPEC.name, CONTROLLER, f"sinfo -h -n {WORKERS[1]} -o %T | grep -qx idle")


def test_the_upgrade_keeps_jobs_accounts_and_monitoring_data(cluster):
    env = cluster["env"]
    hold = "/tmp/hold-the-upgrade-job"
    waits = f"'while [ ! -e {hold} ]; do sleep 1; done'"
    running = _as_lab_user(
        SPEC.name,
        CONTROLLER,
        # one core of the node: the upgrade changes slurm.conf, so its readiness job runs too,
        # on the node's other core, while this job runs through the upgrade
        f"sbatch --parsable -o /dev/null -w {WORKERS[0]} -n1 --wrap {waits}",
    )
    wait_on_host(SPEC.name, CONTROLLER, f"squeue -h -j {running} -t R | grep -q .")
    pending = _as_lab_user(
        SPEC.name, CONTROLLER, "sbatch --parsable -o /dev/null -N2 --exclusive --wrap hostname"
    )
    accounts = _accounting_view(SPEC.name, CONTROLLER)
    users = {h: on_host(SPEC.name, h, "getent passwd labuser") for h in HOSTS}
    started = _slurmd_started()
    # every member's node_exporter and the Slurm exporter scraped before the upgrade
    deadline = time.monotonic() + 120
    while (series_before := _prometheus_up_at(scraped_at := time.time())) < len(HOSTS) + 1:
        assert time.monotonic() < deadline, series_before
        time.sleep(3)

    code, result = lab_operation(SPEC.name, env, "upgrade", to_version=__version__)
    assert code == 0, result
    detail = result["adapter_detail"]
    upgrade = detail["upgrade"]
    assert upgrade["from"]["app_version"] == FROM_VERSION
    assert upgrade["to"] == {
        "app_slug": "slurm-reference",
        "app_version": __version__,
        "bundle_version": __version__,
    }
    assert upgrade["slurm_version_before"] == upgrade["slurm_version"] == "24.11.5"
    assert upgrade["backup"]["manifest"]["bundle_version"] == "0.1.0"  # 1.0's driver
    assert {h: m["app_version"] for h, m in upgrade["members"].items()} == dict.fromkeys(
        HOSTS, __version__
    )
    assert {h: r["app_version"] for h, r in detail["releases"].items()} == dict.fromkeys(
        HOSTS, __version__
    )
    assert (result["instance"]["status"], result["instance"]["health"]) == ("running", "healthy")
    # no slurmd restarted: the new release's slurm.conf (accounting's address and GPU types)
    # reached them through a reconfigure
    assert _slurmd_started() == started
    assert on_host(SPEC.name, CONTROLLER, f"squeue -h -j {running} -o %T").strip() == "RUNNING"
    on_host(SPEC.name, WORKERS[0], f"touch {hold}")
    for job in (running, pending):
        completed = f"sacct -n -X -j {job} -o State | grep -q COMPLETED"
        wait_on_host(SPEC.name, CONTROLLER, completed, 120)
    assert _accounting_view(SPEC.name, CONTROLLER) == accounts
    assert {h: on_host(SPEC.name, h, "getent passwd labuser") for h in HOSTS} == users
    assert _prometheus_up_at(scraped_at) == series_before
    # every member's record as the upgrade left it (Prometheus holds it from its next scrape)
    code, status = lab_operation(SPEC.name, env, "status", read="every_member")
    health = status["adapter_detail"].get("health")
    assert code == 0 and status["instance"]["health"] == "healthy", health
    assert {h: r["app_version"] for h, r in status["adapter_detail"]["releases"].items()} == (
        dict.fromkeys(HOSTS, __version__)
    )
    version = json.loads((lab_spec.lab_dir(SPEC.name) / "deploy.json").read_text())
    assert version["instance"]["version"] == __version__
    cluster["upgrade"] = {
        "running": running,
        "pending": pending,
        "accounts": accounts,
        "backup_id": upgrade["backup_id"],
    }


def test_the_rollback_restores_the_queue_and_accounting_and_the_last_release_runs_on(cluster):
    env, jobs = cluster["env"], cluster["upgrade"]
    after = _as_lab_user(SPEC.name, CONTROLLER, "sbatch --parsable -o /dev/null --wrap true")
    wait_on_host(SPEC.name, CONTROLLER, f"sacct -n -X -j {after} -o State | grep -q COMPLETED", 60)

    code, result = lab_operation(SPEC.name, env, "rollback", to_version=FROM_VERSION)
    assert code == 0, result
    rollback = result["adapter_detail"]["rollback"]
    assert rollback["to"]["app_version"] == FROM_VERSION
    assert rollback["backup_id"] == jobs["backup_id"]
    # the job that ran at the backup and the one pending then both ran since: the restored
    # queue holds them again, so they are ended, and keep the records they ended with; the
    # one submitted after the upgrade keeps its record too
    assert rollback["jobs_ended_since"] == [jobs["running"], jobs["pending"]]
    for job in (jobs["running"], jobs["pending"], after):
        state = f"sacct -n -X -P -j {job} -o State"
        assert on_host(SPEC.name, CONTROLLER, state).strip() == "COMPLETED", job
    assert on_host(SPEC.name, CONTROLLER, "squeue -h -o %A").strip() == ""
    carried = rollback["accounting_carried"]
    assert carried["jobs"] >= 3 and carried["ended_by_rollback"] == 0, carried
    assert carried["first_job_id"] > int(after), carried
    assert _accounting_view(SPEC.name, CONTROLLER) == jobs["accounts"]
    assert result["adapter_detail"]["releases"] == dict.fromkeys(HOSTS)
    for host in HOSTS:
        assert on_host(SPEC.name, host, "ls -A /var/lib/slurm-app-releases") == ""
    assert "upgrade.json" not in on_host(SPEC.name, CONTROLLER, "ls /var/lib/slurm-app")
    deploy = json.loads((lab_spec.lab_dir(SPEC.name) / "deploy.json").read_text())
    assert deploy["instance"]["version"] == FROM_VERSION
    # the last release's driver goes on with the instance as it left it
    release = cluster["release"]
    for kind, target in (("status", None), ("add_worker", JOINING), ("deploy", None)):
        code, result = _release_op(release, env, kind, target)
        health = (result.get("adapter_detail") or {}).get("health")
        assert code == 0 and result["instance"]["health"] == "healthy", (kind, health, result)
