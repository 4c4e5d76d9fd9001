"""Slurm itself upgraded on a running cluster (issue 68): slurm-reference 1.1.0, Debian 13's
Slurm 24.11.5, to 2.0.0, Slurm 26.05 from the lab's site source (Debian's forky suite pinned to
Slurm's packages, trixie-backports for hwloc), with a job running, one pending and one finished;
then the finished upgrade's rollback, refused unless forced; then an upgrade that fails at
slurmctld, rolled back with its queue; then the upgrade again from the site's other source, an
archive of a flat APT repository. Real daemons in systemd containers, the driver by its full
path."""

import hashlib
import io
import json
import re
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml
from lab_tools import (
    _as_lab_user,
    deploy_lab,
    host_fingerprint,
    lab_operation,
    on_host,
    platform_env,
    wait_on_host,
)

from bench.upgrade import Prober
from driver.lab import lab
from driver.lab import spec as lab_spec

pytestmark = pytest.mark.containers
SPEC = lab_spec.LabSpec(name="s26", workers=2, distro="trixie", placement="separate")
CONTROLLER, WORKERS = "s26-ctl", ("s26-w01", "s26-w02")
HOSTS = (CONTROLLER, *WORKERS)
SITE_SOURCE = "/etc/apt/sources.list.d/slurm-app-slurm.sources"
# systemd refuses to start a slurmctld 26.05 while this drop-in is there (the backup's restart
# of 24.11 passes): an upgrade that fails at slurmctld, as a broken build would
SLURMCTLD_BROKEN = "/etc/systemd/system/slurmctld.service.d/zz-broken.conf"
REFUSE_26_05 = "ExecStartPre=/bin/sh -c '! /usr/sbin/slurmctld -V | grep -q 26.05'"


def _on(host: str, command: str) -> str:
    return on_host(SPEC.name, host, command)


def _submit(*arguments: str) -> str:
    return _as_lab_user(SPEC.name, CONTROLLER, f"sbatch --parsable {' '.join(arguments)}")


def _state(job: str) -> str:
    return _on(CONTROLLER, f"sacct -n -X -P -j {job} -o state").strip()


def _wait_for(job: str, state: str, seconds: int = 300) -> None:
    wait_on_host(
        SPEC.name, CONTROLLER, f"sacct -n -X -P -j {job} -o state | grep -qx {state}", seconds
    )


def _instance_at(version: str) -> None:
    """The version the platform's next requests give the instance (after a failed upgrade, the
    one it went to: docs/operations.md, When an upgrade fails)."""
    deploy = lab_spec.lab_dir(SPEC.name) / "deploy.json"
    request = json.loads(deploy.read_text())
    request["instance"]["version"] = version
    deploy.write_text(json.dumps(request))


def _versions() -> dict[str, str]:
    """Every daemon's own word on its version, and the accounting's."""
    found = {CONTROLLER: _on(CONTROLLER, "slurmctld -V; slurmdbd -V").strip()}
    found |= {worker: _on(worker, "slurmd -V").strip() for worker in WORKERS}
    configuration = _on(CONTROLLER, "sacctmgr show configuration")
    found["accounting"] = " ".join(re.findall(r"SLURM(?:DBD)?_VERSION\s*=\s*(\S+)", configuration))
    return found


@pytest.fixture(scope="module")
def cluster(docker_engine, tmp_path_factory):
    state = tmp_path_factory.mktemp("driver-state")
    env = platform_env(state)
    lab.write_lab_site(state / "site.yaml", slurm_26_05=True)
    deploy_lab(SPEC, env, {})
    yield {"env": env}
    lab.down(SPEC.name)


def test_slurm_goes_to_26_05_with_its_jobs_running(cluster):
    env = cluster["env"]
    finished = _submit("-N1", "--wrap", "'true'")
    _wait_for(finished, "COMPLETED", 60)
    # a core of each worker: the other takes the jobs submitted through the upgrade
    running = _submit("-N2", "--ntasks-per-node=1", "--wrap", "'sleep 150'")
    wait_on_host(SPEC.name, CONTROLLER, f"squeue -h -j {running} -t R | grep -q .")
    # pending until the running one ends; the jobs submitted meanwhile start as they come
    pending = _submit("-N2", f"--dependency=afterok:{running}", "--wrap", "'hostname'")
    assert _on(CONTROLLER, f"squeue -h -j {pending} -o %T").strip() == "PENDING"

    # a one-core job every second, as a cluster's users go on submitting through an upgrade
    with Prober(SPEC.name, submit_every=1, wrap="true", ping=False) as prober:
        code, result = lab_operation(SPEC.name, env, "upgrade", to_version="2.0.0")
    submitted = prober.jobs
    assert code == 0, result["error"]
    upgrade = result["adapter_detail"]["upgrade"]
    assert (upgrade["slurm_version_before"], upgrade["slurm_version"]) == ("24.11.5", "26.05.5")
    assert isinstance(upgrade["slurmdbd_conversion_s"], float), upgrade
    assert upgrade["completed"] and {m["slurm_version"] for m in upgrade["members"].values()} == {
        "26.05.5"
    }
    assert result["instance"]["health"] == "healthy"
    # the running job ran through every restart; the pending one ran after it
    assert _on(CONTROLLER, f"squeue -h -j {running} -o %T").strip() == "RUNNING"
    _wait_for(running, "COMPLETED")
    _wait_for(pending, "COMPLETED")
    assert _state(finished) == "COMPLETED"
    # none launched on a node whose packages changed under its slurmd, none was held for it
    assert len(submitted) > 20, submitted
    for job in submitted:
        _wait_for(job, "COMPLETED", 60)
    assert _on(CONTROLLER, "sinfo -h -R -o '%N %E'").strip() == ""
    versions = _versions()
    assert versions[CONTROLLER].split("\n") == ["slurm-wlm 26.05.5"] * 2, versions
    assert all(versions[worker] == "slurm-wlm 26.05.5" for worker in WORKERS), versions
    assert versions["accounting"] == "26.05.5 26.05.5", versions
    code, status = lab_operation(SPEC.name, env, "status")
    assert code == 0 and status["instance"]["health"] == "healthy", status
    assert status["adapter_detail"]["daemon_versions"]["slurmctld"] == "26.05.5"
    cluster["jobs"] = {"finished": finished, "running": running, "pending": pending}
    cluster["submitted"] = submitted


def test_a_finished_slurm_upgrade_is_rolled_back_only_when_forced(cluster):
    """Billing stays honest across it (issue 69): every job that ran keeps the record it ended
    with, and no job id is given twice."""
    env, jobs = cluster["env"], cluster["jobs"]
    before = {host: host_fingerprint(SPEC.name, host) for host in HOSTS}
    code, result = lab_operation(SPEC.name, env, "rollback", to_version="1.1.0")
    assert code == 1, result
    assert result["error"]["code"] == "rollback_loses_jobs", result["error"]
    assert "Roll back with force" in result["error"]["message"]
    assert {host: host_fingerprint(SPEC.name, host) for host in HOSTS} == before

    # a job that completed after the upgrade, as its users go on (the upgrade's readiness job
    # and the ones submitted through it came before)
    after = _submit("-N1", "--wrap", "'true'")
    _wait_for(after, "COMPLETED", 60)
    recorded = _on(CONTROLLER, "sacct -n -X -P -a -S 2000-01-01 -o JobID,State").split()
    highest = max(int(line.split("|")[0]) for line in recorded)

    code, result = lab_operation(SPEC.name, env, "rollback", to_version="1.1.0", force=True)
    assert code == 0, result["error"]
    rollback = result["adapter_detail"]["rollback"]
    assert rollback["slurm_version"] == "24.11.5"
    # the queue the backup held had these two (and the users' jobs submitted just before it);
    # all ran since and keep their records
    ended = set(rollback["jobs_ended_since"])
    assert {jobs["running"], jobs["pending"]} <= ended <= {*jobs.values(), *cluster["submitted"]}
    assert _on(CONTROLLER, "sacct -n -X -P -a -S 2000-01-01 -o JobID,State").split() == recorded
    carried = rollback["accounting_carried"]
    # at least running, pending and after; the users' jobs that ended before the backup are
    # in it as they ended
    assert 3 <= carried["jobs"] <= len(recorded) and carried["ended_by_rollback"] == 0, carried
    assert carried["first_job_id"] == highest + 1, carried
    versions = _versions()
    assert versions[CONTROLLER].split("\n") == ["slurm-wlm 24.11.5"] * 2, versions
    assert all(versions[worker] == "slurm-wlm 24.11.5" for worker in WORKERS), versions
    assert versions["accounting"] == "24.11.5 24.11.5", versions
    for host in HOSTS:
        assert _on(host, f"test -e {SITE_SOURCE} && echo left || true") == ""
    job = _submit("-N2", "--wrap", "'hostname'")
    assert int(job) == highest + 1
    _wait_for(job, "COMPLETED", 120)


def test_an_upgrade_that_fails_at_slurmctld_says_where_and_rolls_back_with_its_queue(cluster):
    env = cluster["env"]
    held = _submit("-N1", "--hold", "--wrap", "'true'")
    _on(
        CONTROLLER,
        f"mkdir -p {SLURMCTLD_BROKEN.rsplit('/', 1)[0]} && "
        f"printf '%s\\n' '[Service]' \"{REFUSE_26_05}\" > {SLURMCTLD_BROKEN} && "
        "systemctl daemon-reload",
    )
    code, result = lab_operation(SPEC.name, env, "upgrade", to_version="2.0.0")
    assert code == 1, result
    assert "Restart slurmctld" in result["error"]["message"], result["error"]
    # where it stopped: the controller's packages on 26.05 (slurmdbd's restarted), no worker's
    upgrade = result["adapter_detail"]["upgrade"]
    assert not upgrade["completed"]
    assert {host: member["slurm_version"] for host, member in upgrade["members"].items()} == {
        CONTROLLER: "26.05.5",
        **{worker: "24.11.5" for worker in WORKERS},
    }, upgrade["members"]

    # not forced: the upgrade did not finish. The drop-in stays: the rollback's slurmctld is 24.11
    _instance_at("2.0.0")
    code, result = lab_operation(SPEC.name, env, "rollback", to_version="1.1.0")
    assert code == 0, result["error"]
    _on(CONTROLLER, f"rm {SLURMCTLD_BROKEN} && systemctl daemon-reload")
    assert _versions()[CONTROLLER].split("\n") == ["slurm-wlm 24.11.5"] * 2
    assert _on(CONTROLLER, f"squeue -h -j {held} -o %T").strip() == "PENDING"
    _on(CONTROLLER, f"scontrol release {held}")
    _wait_for(held, "COMPLETED", 120)
    code, status = lab_operation(SPEC.name, env, "status")
    assert code == 0 and status["instance"]["health"] == "healthy", status


def _repository_archive(folder: Path) -> tuple[Path, str]:
    """Slurm 26.05's packages as the first upgrade downloaded them from the lab's pinned suites
    (apt's cache on the controller and on a worker), made a flat APT repository with
    dpkg-scanpackages and archived: what a site builds from Debian's source package for its
    hosts' release. The archive and its sha256."""
    names = {name for source in lab.LAB_SLURM_SOURCE["repositories"] for name in source["packages"]}
    repository = folder / "slurm-repository"
    repository.mkdir()
    for host in (CONTROLLER, WORKERS[0]):
        cached = _on(host, "ls /var/cache/apt/archives").split()
        # with Debian 13's own builds of them, which the image's cache holds: apt takes the newest
        wanted = [
            deb for deb in cached if deb.split("_")[0] in names and not (repository / deb).exists()
        ]  # fmt: skip
        _on(host, f"cd /var/cache/apt/archives && tar -cf /root/slurm-debs.tar {' '.join(wanted)}")
        stream, _ = lab.host_container(SPEC.name, host).get_archive("/root/slurm-debs.tar")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as outer:
            inner = outer.extractfile("slurm-debs.tar")
            assert inner is not None
            with tarfile.open(fileobj=inner) as debs:
                debs.extractall(repository, filter="data")
    assert {deb.name.split("_")[0] for deb in repository.glob("*.deb")} >= {
        "slurmctld", "slurmd", "slurmdbd", "slurm-client", "libllhttp9.4", "libhwloc15"
    }  # fmt: skip
    packages = subprocess.run(
        ["dpkg-scanpackages", "--multiversion", ".", "/dev/null"],
        cwd=repository, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    (repository / "Packages").write_text(packages)
    archive = folder / "slurm-26.05.tar.gz"
    with tarfile.open(archive, "w:gz") as made:
        made.add(repository, arcname="slurm-repository")
    return archive, hashlib.sha256(archive.read_bytes()).hexdigest()


# Issue 69 (1): the upgrade's driver killed (SIGKILL) where a Slurm upgrade is most half-done,
# the same request sent again each time: slurmdbd answering on 26.05 (its database converted),
# slurmctld's package upgraded with it but the daemon still 24.11's; then, in the run sent
# again, slurmctld restarted on 26.05 (upgrade_check.yml restarts a daemon left on a replaced
# binary, before anything else restarts slurmctld) and every slurmd still on 24.11.
UPGRADE_KILLED_AT = ("Wait until slurmdbd answers (its database converted)", "Restart slurmctld")


def test_the_upgrade_installs_from_the_sites_repository_archive(cluster, tmp_path):
    """After the rollback every member is on 24.11 again, the pinned suites removed: the same
    upgrade, the site settings now naming an archive (source: artifact) and its sha256. Its
    driver is killed at each of UPGRADE_KILLED_AT, and the run that ends converges with
    nothing lost: a job running through all three keeps running and is recorded once, every
    record before stays as it was."""
    env = cluster["env"]
    archive, sha256 = _repository_archive(tmp_path)
    site_file = Path(env["SLURM_APP_STATE_DIR"]) / "site.yaml"
    site = yaml.safe_load(site_file.read_text())
    site["slurm"] = {"source": "artifact", "artifact": str(archive), "sha256": "0" * 64}
    site_file.write_text(yaml.safe_dump(site))
    before = {host: host_fingerprint(SPEC.name, host) for host in HOSTS}
    code, result = lab_operation(SPEC.name, env, "upgrade", to_version="2.0.0")
    assert code == 1 and f"sha256 {sha256} on the control node" in result["error"]["message"]
    assert {host: host_fingerprint(SPEC.name, host) for host in HOSTS} == before

    site["slurm"]["sha256"] = sha256
    site_file.write_text(yaml.safe_dump(site))
    recorded = _on(CONTROLLER, "sacct -n -X -P -a -S 2000-01-01 -o JobID,State").split()
    release = "/tmp/release-upgrade-job"
    waits = f"'until [ -e {release} ]; do sleep 1; done'"
    running = _submit("-w", WORKERS[0], "-o", "/dev/null", "--wrap", waits)
    wait_on_host(SPEC.name, CONTROLLER, f"squeue -h -j {running} -t R | grep -q .")
    code, result = lab_operation(
        SPEC.name, env, "upgrade", to_version="2.0.0", killed_at=UPGRADE_KILLED_AT
    )
    assert code == 0, result["error"]
    assert _on(CONTROLLER, f"squeue -h -j {running} -o %T").strip() == "RUNNING"
    _on(WORKERS[0], f"touch {release}")
    _wait_for(running, "COMPLETED", 120)
    now = _on(CONTROLLER, "sacct -n -X -P -a -S 2000-01-01 -o JobID,State").split()
    # the upgrade's readiness job is recorded after these
    assert now[: len(recorded)] == recorded, now
    assert [row for row in now if row.startswith(f"{running}|")] == [f"{running}|COMPLETED"], now
    assert result["adapter_detail"]["upgrade"]["slurm_version"] == "26.05.5"
    versions = _versions()
    assert versions[CONTROLLER].split("\n") == ["slurm-wlm 26.05.5"] * 2, versions
    assert all(versions[worker] == "slurm-wlm 26.05.5" for worker in WORKERS), versions
    for host in HOSTS:
        # from the archive's repository, the only source of 26.05 on the host
        policy = _on(host, "apt-cache policy slurm-client")
        assert re.search(r"\*\*\* 26\.05\.5\S*.*\n\s+\d+ file:\S*slurm-repository", policy), policy
    job = _submit("-N2", "--wrap", "'hostname'")
    _wait_for(job, "COMPLETED", 120)
    code, status = lab_operation(SPEC.name, env, "status")
    assert code == 0 and status["instance"]["health"] == "healthy", status
