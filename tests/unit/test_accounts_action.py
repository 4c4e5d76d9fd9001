"""slurm_common's slurm_accounts action on this machine through real ansible-playbook, as root:
its guard (state=checked) looks at every home's place without making one, whatever the run's
mode, and both states refuse a planted link with the one [storage_conflict] message that
folder_refusal.yml's fail task gives too. No account is made: the cluster user's name is
not on this machine, and state=present runs with accounts=false."""

import json
import os
from pathlib import Path

import pytest
from conftest import ROOT
from local_play import run_play

from driver.role_code import role_filters

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="owners can be given as root only")

USER = {"name": "zz-accounts-test", "uid": 42431}
COMMON = ROOT / "roles" / "slurm_common"


def run_accounts(work: Path, args: dict) -> dict:
    """One slurm_accounts step on the control node itself; its result as the play registered it."""
    play = [
        {
            "hosts": "target",
            "gather_facts": False,
            "tasks": [
                {"name": "Accounts", "slurm_accounts": args, "register": "ran",
                 "ignore_errors": True},
                {"name": "Keep", "ansible.builtin.copy": {"content": "{{ ran | to_json }}",
                                                          "dest": str(work / "ran.json")}},
            ],
        }
    ]  # fmt: skip
    plugins = {
        "ANSIBLE_ACTION_PLUGINS": str(COMMON / "action_plugins"),
        "ANSIBLE_LIBRARY": str(COMMON / "library"),
        "ANSIBLE_FILTER_PLUGINS": str(COMMON / "filter_plugins"),
    }
    run_play(work, play, environment=plugins)
    return json.loads((work / "ran.json").read_text())


@pytest.fixture
def mount(tmp_path: Path) -> Path:
    """The platform's mount with its homes' folder, both root's."""
    root = tmp_path / "workspace"
    (root / "home").mkdir(parents=True)
    root.chmod(0o755)
    return root


def accounts(mount: Path, tmp_path: Path, state: str) -> dict:
    return {
        "state": state,
        "users": [USER],
        "record": str(tmp_path / "accounts"),
        "home_base": str(mount / "home"),
        "home_root": str(mount),
        "makes_homes": True,
        "accounts": False,
    }


def test_the_guard_makes_no_home(mount: Path, tmp_path: Path):
    ran = run_accounts(tmp_path, accounts(mount, tmp_path, "checked"))
    assert not ran.get("failed") and not ran["changed"], ran
    assert not (mount / "home" / USER["name"]).exists()


@pytest.mark.parametrize("state", ["checked", "present"])
def test_a_planted_link_is_refused_with_the_storage_conflict_message(
    mount: Path, tmp_path: Path, state: str
):
    target = tmp_path / "target"
    target.mkdir()
    planted = mount / "home" / USER["name"]
    planted.symlink_to(target)
    ran = run_accounts(tmp_path, accounts(mount, tmp_path, state))
    refused = [{"msg": f"{planted} is a symbolic link or not a folder; it is never followed"}]
    said = role_filters("slurm_users").slurm_storage_conflict(refused, "target")
    assert ran["failed"] and ran["msg"] == said, ran
    assert planted.is_symlink() and list(target.iterdir()) == []


def test_present_makes_its_files_first_in_the_same_step(mount: Path, tmp_path: Path):
    """The record of the accounts is made before any account, in the accounts' own step: a
    refused home still leaves the record (a run killed midway leaves no account unrecorded),
    and the step run again changes nothing."""
    record = tmp_path / "state" / "accounts"
    args = accounts(mount, tmp_path, "present") | {
        "homes": False,
        "files": [
            {"path": str(record.parent), "state": "directory", "mode": "0700"},
            {"path": str(record), "content": f"{USER['name']}\n", "mode": "0600"},
        ],
    }
    ran = run_accounts(tmp_path, args)
    assert not ran.get("failed") and ran["changed"], ran
    assert record.read_text() == f"{USER['name']}\n"
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    assert run_accounts(tmp_path, args)["changed"] is False
    (mount / "home" / USER["name"]).symlink_to(tmp_path)
    record.unlink()
    refused = run_accounts(tmp_path, args | {"homes": True})
    assert refused["failed"] and "[storage_conflict]" in refused["msg"], refused
    assert record.exists()
