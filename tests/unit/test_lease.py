"""The instance's lease: slurm_common's slurm_lease module on a host's files, and which host of
a run's inventory keeps it (the e2e lab runs two drivers against one cluster)."""

import contextlib
import json
import multiprocessing
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, example, run_events

from driver.documents import load_json
from driver.request_check import check_request
from driver.role_code import role_code
from driver.runner.lease import LEASE_PLAY, RENEW_PLAYBOOK
from driver.runner.plan import RunPlan

lease = role_code("slurm_common", "library", "slurm_lease")

A = {"operation_id": "op-a", "operation": "deploy", "correlation_id": "c-a", "driver": "drv-1"}
B = {"operation_id": "op-b", "operation": "restart", "correlation_id": "c-b", "driver": "drv-2"}
NOW = 1_800_000_000.0


def _path(tmp_path: Path) -> str:
    return str(tmp_path / "slurm-app-lease" / "instance-1.json")


def test_a_free_lease_is_taken_and_another_driver_is_told_who_holds_it(tmp_path):
    path = _path(tmp_path)
    taken = lease.take(path, A, 600, NOW)
    assert taken["held_by"] is None and taken["lease"]["holder"] == A
    assert taken["lease"]["expires_at"] == "2027-01-15T08:10:00Z"
    assert (Path(path).parent.stat().st_mode & 0o777) == 0o700
    refused = lease.take(path, B, 600, NOW + 10)
    assert refused["held_by"]["holder"] == A
    assert json.loads(Path(path).read_text())["holder"] == A  # nothing written
    # the folder's own lock: no lock file, no staged file left beside the lease
    assert [f.name for f in Path(path).parent.iterdir()] == ["instance-1.json"]


def test_it_expires_and_is_renewed_by_its_own_operation(tmp_path):
    path = _path(tmp_path)
    lease.take(path, A, 600, NOW)
    renewed = lease.take(path, A, 600, NOW + 300)
    assert renewed["held_by"] is None
    assert renewed["lease"]["expires_epoch"] == int(NOW + 900)
    assert lease.take(path, B, 600, NOW + 901)["lease"]["holder"] == B


def test_the_same_driver_takes_over_a_dead_runs_lease(tmp_path):
    """The driver takes the lease only while it holds its own instance lock: another operation
    of the same driver holding it is a run that died (killed, then run again)."""
    path = _path(tmp_path)
    lease.take(path, A, 600, NOW)
    again = {**A, "operation_id": "op-a2"}
    assert lease.take(path, again, 600, NOW + 5)["lease"]["holder"] == again


@pytest.mark.parametrize("content", ["", "{", "[]", '{"holder": {}}'])
def test_a_torn_or_foreign_file_gives_way(tmp_path, content):
    path = _path(tmp_path)
    Path(path).parent.mkdir(mode=0o700)
    Path(path).write_text(content)
    assert lease.take(path, B, 600, NOW)["held_by"] is None


def test_only_its_holder_gives_it_back(tmp_path):
    path = _path(tmp_path)
    lease.take(path, A, 600, NOW)
    assert lease.give_back(path, B)["lease"]["holder"] == A
    assert Path(path).exists()
    assert lease.give_back(path, A) == {"held_by": None, "lease": None}
    assert not Path(path).exists()
    assert lease.give_back(path, A) == {"held_by": None, "lease": None}
    # its folder gone (a reboot; a host torn down): nothing to give back
    Path(path).parent.rmdir()
    assert lease.give_back(path, A) == {"held_by": None, "lease": None}


def _race(path: str, holder: dict, start, answers) -> None:
    start.wait()
    answers.put((holder["driver"], lease.take(path, holder, 600, NOW)["held_by"] is None))


def test_two_drivers_at_once_one_takes_it(tmp_path):
    path = _path(tmp_path)
    Path(path).parent.mkdir(mode=0o700)
    context = multiprocessing.get_context("fork")
    start, answers = context.Barrier(8), context.Queue()
    holders = [{**A, "operation_id": f"op-{n}", "driver": f"drv-{n}"} for n in range(8)]
    racers = [context.Process(target=_race, args=(path, h, start, answers)) for h in holders]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)
    won = [driver for driver, took in (answers.get(timeout=5) for _ in racers) if took]
    assert len(won) == 1
    assert json.loads(Path(path).read_text())["holder"]["driver"] == won[0]


def _plan(name: str, monkeypatch, tmp_path, site: str = "") -> RunPlan:
    monkeypatch.setenv("SLURM_APP_STATE_DIR", str(tmp_path / "state"))
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "site.yaml").write_text(site)
    monkeypatch.setenv("SLURM_APP_SITE", str(tmp_path / "site.yaml"))
    checked = check_request(load_json(json.dumps(example(name))))
    assert checked.request is not None and checked.version is not None, checked.findings
    return RunPlan.of(checked.request, checked.version)


def test_the_controller_keeps_the_lease_with_the_sites_settings(monkeypatch, tmp_path):
    site = "lease: {driver_name: platform-a, expiry_s: 900}\n"
    plan = _plan("slurm-reference/add_worker", monkeypatch, tmp_path, site)
    inventory = plan.inventory
    assert inventory.groups["slurm_app_lease_holder"] == inventory.groups["slurm_controller"]
    assert inventory.group_vars["slurm_common_lease"] == {"driver": "platform-a", "expiry_s": 900}


def test_replace_controller_takes_it_on_the_new_controller(monkeypatch, tmp_path):
    plan = _plan("slurm-reference/replace_controller", monkeypatch, tmp_path)
    request, hosts = plan.request, plan.inventory.allocation_hosts
    assert request.operation.replacement is not None
    new = hosts[request.operation.replacement.allocation_id]
    assert plan.inventory.groups["slurm_app_lease_holder"] == [new]


def test_a_read_only_operation_takes_none(monkeypatch, tmp_path):
    inventory = _plan("slurm-reference/status", monkeypatch, tmp_path).inventory
    assert "slurm_app_lease_holder" not in inventory.groups
    assert "slurm_common_lease" not in inventory.group_vars


def test_the_portal_keeps_its_own(monkeypatch, tmp_path):
    inventory = _plan("open-ondemand/deploy", monkeypatch, tmp_path).inventory
    assert inventory.groups["slurm_app_lease_holder"] == inventory.groups["open_ondemand"]


def test_two_installations_get_two_default_names(monkeypatch, tmp_path):
    names = set()
    for state in ("one", "two"):
        plan = _plan("slurm-reference/restart", monkeypatch, tmp_path / state)
        names.add(plan.inventory.group_vars["slurm_common_lease"]["driver"])
    assert len(names) == 2 and all(name.startswith("driver-") for name in names)


def test_the_keeper_waits_for_the_preflights_own_lease_play():
    """The keeper tells a lost lease from the preflight's refusal to come by that play's name."""
    plays = yaml.safe_load((ROOT / "playbooks" / "preflight.yml").read_text())
    assert LEASE_PLAY in [play.get("name") for play in plays]


# A run of the driver whose playbook takes the lease as the preflight does, on this machine (its
# lease file in /run, as on a controller), then works for longer than the lease's expiry.
LONG_RUN = f"""\
- name: {LEASE_PLAY}
  hosts: "{{{{ groups['slurm_app_lease_holder'] }}}}"
  connection: local
  gather_facts: false
  tasks:
    - name: Take the instance's lease
      ansible.builtin.import_role:
        name: slurm_common
        tasks_from: lease
        rolespec_validate: false
      vars:
        slurm_common_lease_state: held
- name: Work for longer than the lease's expiry
  hosts: "{{{{ groups['slurm_app_lease_holder'] }}}}"
  connection: local
  gather_facts: false
  tasks:
    - name: Work
      ansible.builtin.command: sleep SECONDS
      changed_when: false
"""
EXPIRY_S = 10  # the site's least: renewed every 3.3 s


def _long_run(tmp_path: Path, seconds: int) -> tuple[subprocess.Popen, Path, float]:
    """The driver started on a deploy whose playbook is LONG_RUN; (its process, the lease's
    path, when it started). A fresh instance id: the lease file is this machine's."""
    request = example("slurm-reference/deploy")
    request["instance"]["id"] = str(uuid.uuid4())
    key = tmp_path / request["project_id"] / request["instance"]["id"] / "id_ed25519"
    key.parent.mkdir(parents=True)
    key.write_text("placeholder, never used to connect\n")
    key.chmod(0o600)
    request["credentials"] = {"ssh_private_key_file": str(key)}
    request["instance"]["config"] = {"cluster_name": "research"}
    (tmp_path / "request.json").write_text(json.dumps(request))
    bundle = tmp_path / "bundle"
    (bundle / "playbooks").mkdir(parents=True)
    for name in ("manifests", "roles", "ansible.cfg"):
        (bundle / name).symlink_to(ROOT / name)
    # the real renewal, on this machine as the run's own plays
    renewal = (
        (ROOT / RENEW_PLAYBOOK)
        .read_text()
        .replace("  gather_facts: false\n", "  connection: local\n  gather_facts: false\n")
    )
    assert "connection: local" in renewal
    (bundle / RENEW_PLAYBOOK).write_text(renewal)
    (bundle / "playbooks" / "deploy.yml").write_text(LONG_RUN.replace("SECONDS", str(seconds)))
    (tmp_path / "site.yaml").write_text(f"lease: {{driver_name: drv-test, expiry_s: {EXPIRY_S}}}\n")
    started = time.time()
    driver = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "slurm-app-driver"),
            "run",
            str(tmp_path / "request.json"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            "SLURM_APP_STATE_DIR": str(tmp_path / "state"),
            "SLURM_APP_CREDENTIALS_ROOT": str(tmp_path),
            "SLURM_APP_BUNDLE": str(bundle),
            "SLURM_APP_SITE": str(tmp_path / "site.yaml"),
            "PATH": "/usr/bin:/bin",
        },
    )
    return driver, Path(f"/run/slurm-app-lease/{request['instance']['id']}.json"), started


def _held(path: Path, deadline_s: float = 60) -> dict:
    """The lease once the run's preflight has taken it."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return json.loads(path.read_text())
        time.sleep(0.2)
    raise AssertionError(f"{path}: never taken")


@pytest.mark.skipif(os.geteuid() != 0, reason="the lease lives in /run, root's")
def test_a_run_longer_than_the_expiry_keeps_its_lease(tmp_path):
    driver, path, started = _long_run(tmp_path, seconds=2 * EXPIRY_S)
    try:
        first = _held(path)
        # past the expiry the preflight gave it, another driver is still refused
        time.sleep(max(first["expires_epoch"] + 2 - time.time(), 0))
        other = lease.take(str(path), B, EXPIRY_S, time.time())
        assert other["held_by"] is not None and other["held_by"]["holder"]["driver"] == "drv-test"
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 0, out[-2000:] + err[-2000:]
        assert json.loads(path.read_text())["expires_epoch"] > started + 2 * EXPIRY_S
    finally:
        driver.kill()
        path.unlink(missing_ok=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="the lease lives in /run, root's")
def test_a_run_that_lost_its_lease_stops(tmp_path):
    """Another driver's operation holds the lease (this run's renewals failed for longer than
    the expiry): the next renewal finds it, and the run is stopped, naming the holder."""
    driver, path, started = _long_run(tmp_path, seconds=60)
    try:
        first = _held(path)
        time.sleep(1)  # the preflight's play has ended: the work has started
        foreign = {**first, "holder": B, "expires_epoch": int(time.time()) + 600}
        path.write_text(json.dumps(foreign))
        out, err = driver.communicate(timeout=120)
        assert driver.returncode == 1, out[-2000:] + err[-2000:]
        assert time.time() - started < 40  # not the 60 s of work
        final = run_events(out)[-1]["result"]
        assert final["status"] == "failed" and final["error"]["code"] == "lease_lost", final
        assert "restart op-b" in final["error"]["message"] and "drv-2" in final["error"]["message"]
        assert json.loads(path.read_text())["holder"] == B  # the other's, untouched
    finally:
        driver.kill()
        path.unlink(missing_ok=True)
