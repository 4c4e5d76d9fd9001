"""slurm_controller's slurm_sacctmgr module: what it plans from what slurmdbd holds. The
module runs for real against slurmdbd in every deploy (e2e, Molecule); its idempotence is
Molecule's idempotence step."""

import importlib.util

import pytest
from conftest import ROOT

_spec = importlib.util.spec_from_file_location(
    "slurm_sacctmgr", ROOT / "roles/slurm_controller/library/slurm_sacctmgr.py"
)
assert _spec is not None and _spec.loader is not None
sacctmgr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sacctmgr)

REGISTERED = {
    "cluster": True,
    "accounts": ["root"],
    "associations": ["root@root"],
    "admin_levels": {"root": "Administrator"},
}


def _params(**overrides):
    params = {
        "cluster": "lab",
        "create_cluster": False,
        "accounts": [{"name": "default", "description": "", "organization": ""}],
        "users": sacctmgr.wanted_users(
            [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002, "admin": True}],
            "default",
        ),
    }
    return {**params, **overrides}


def test_a_fresh_cluster_gets_the_account_users_and_admin_level():
    commands, after = sacctmgr.plan(REGISTERED, _params())
    assert [" ".join(c[2:5]) for c in commands] == [
        "add account default",
        "add user alice",
        "add user bob",
        "modify user where",
    ]
    assert commands[-1][-1] == "AdminLevel=Administrator"
    assert after["associations"] == ["alice@default", "bob@default", "root@root"]
    assert after["admin_levels"]["alice"] == "None"


def test_the_state_it_plans_for_needs_no_further_command():
    _, after = sacctmgr.plan(REGISTERED, _params())
    assert sacctmgr.plan(after, _params()) == ([], after)


def test_an_admin_level_is_corrected_and_nothing_is_removed():
    state = {
        "cluster": True,
        "accounts": ["default", "root", "handmade"],
        "associations": ["alice@default", "bob@default", "carol@handmade", "root@root"],
        "admin_levels": {"alice": "Administrator", "bob": "Administrator", "carol": "None"},
    }
    commands, after = sacctmgr.plan(state, _params())
    assert commands == [
        ["sacctmgr", "-i", "modify", "user", "where", "name=alice", "set", "AdminLevel=None"]
    ]
    assert "carol@handmade" in after["associations"] and "handmade" in after["accounts"]


def test_the_cluster_is_added_only_when_asked():
    unregistered = {**REGISTERED, "cluster": False}
    assert sacctmgr.plan(unregistered, _params())[0][0][3] == "account"
    commands, after = sacctmgr.plan(unregistered, _params(create_cluster=True))
    assert commands[0] == ["sacctmgr", "-i", "add", "cluster", "lab"] and after["cluster"]


@pytest.mark.parametrize(
    "users, message",
    [
        ([{"uid": 5}], r"users\[0\].name"),
        ([{"name": "x", "admin_level": "Root"}], r"users\[0\].admin_level"),
    ],
)
def test_bad_users_are_named(users, message):
    with pytest.raises(ValueError, match=message):
        sacctmgr.wanted_users(users, "default")


def test_a_user_without_an_account_is_named():
    with pytest.raises(ValueError, match=r"users\[0\] \(x\): no account"):
        sacctmgr.wanted_users([{"name": "x"}], "")
