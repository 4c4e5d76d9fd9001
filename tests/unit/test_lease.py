"""The instance's lease: slurm_common's slurm_lease module on a host's files, and which host of
a run's inventory keeps it (the e2e lab runs two drivers against one cluster)."""

import json
import multiprocessing
from pathlib import Path

import pytest
from conftest import example

from driver.documents import load_json
from driver.request_check import check_request
from driver.role_code import role_code
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
