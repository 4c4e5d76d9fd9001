"""slurm_controller's slurm_sacctmgr module (its plan in module_utils/slurm_accounting.py):
what it plans from what slurmdbd holds. The
module runs for real against slurmdbd in every deploy (e2e, Molecule); its idempotence is
Molecule's idempotence step."""

import pytest

from driver.role_code import role_code

sacctmgr = role_code("slurm_controller", "module_utils", "slurm_accounting")

REGISTERED = {
    "cluster": True,
    "qos": {
        "normal": {
            "priority": 0,
            "max_gpus_per_user": None,
            "max_gpus": None,
            "max_jobs_per_user": None,
            "max_wall": None,
        }
    },
    "accounts": ["root"],
    "account_settings": {"root": {"fairshare": 1, "qos": ["normal"], "default_qos": ""}},
    "associations": ["root@root"],
    "default_accounts": {"root": "root"},
    "admin_levels": {"root": "Administrator"},
}
USERS = [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002, "admin": True}]


def _params(accounts=(), qos=(), users=USERS, default_account="default", **overrides):
    accounts = [{"users": [], **a} for a in accounts]
    params = {
        "cluster": "lab",
        "create_cluster": False,
        "qos": list(qos),
        "accounts": sacctmgr.wanted_accounts(accounts, default_account),
        "users": sacctmgr.wanted_users(users, default_account, accounts),
    }
    return {**params, **overrides}


def _verbs(commands):
    return [" ".join(c[2:5]) for c in commands]


def test_a_fresh_cluster_gets_the_account_users_and_admin_level():
    commands, after = sacctmgr.plan(REGISTERED, _params())
    assert _verbs(commands) == [
        "add account default",
        "add user alice",
        "add user bob",
        "modify user where",
    ]
    assert commands[0][-3:] == ["Fairshare=1", "QOS=normal", "DefaultQOS=normal"]
    assert commands[-1][-1] == "AdminLevel=Administrator"
    assert after["associations"] == ["alice@default", "bob@default", "root@root"]
    assert after["admin_levels"]["alice"] == "None"
    assert after["default_accounts"]["alice"] == "default"


def test_the_state_it_plans_for_needs_no_further_command():
    _, after = sacctmgr.plan(REGISTERED, _params())
    assert sacctmgr.plan(after, _params()) == ([], after)
    teams = _params(
        accounts=[{"name": "vision", "fairshare": 5, "qos": ["gpu"], "users": ["alice"]}],
        qos=[{"name": "gpu", "max_gpus_per_user": 2, "max_wall": "1-00:00:00"}],
    )
    _, teamed = sacctmgr.plan(after, teams)
    assert sacctmgr.plan(teamed, teams) == ([], teamed)


def test_a_team_gets_its_qos_share_and_users_and_leaves_the_default_account():
    _, after = sacctmgr.plan(REGISTERED, _params())
    params = _params(
        accounts=[{"name": "vision", "fairshare": 5, "qos": ["gpu"], "users": ["alice"]}],
        qos=[{"name": "gpu", "priority": 10, "max_gpus_per_user": 2, "max_wall": "90"}],
    )
    commands, teamed = sacctmgr.plan(after, params)
    assert commands == [
        [
            "sacctmgr",
            "-i",
            "add",
            "qos",
            "gpu",
            "Priority=10",
            "MaxTRESPerUser=gres/gpu=2",
            "GrpTRES=gres/gpu=-1",
            "MaxJobsPerUser=-1",
            "MaxWall=90",
        ],
        [
            "sacctmgr",
            "-i",
            "add",
            "account",
            "vision",
            "Cluster=lab",
            "Description=vision",
            "Organization=vision",
            "Fairshare=5",
            "QOS=gpu",
            "DefaultQOS=gpu",
        ],
        ["sacctmgr", "-i", "add", "user", "alice", "Account=vision", "Cluster=lab"],
        ["sacctmgr", "-i", "modify", "user", "where", "name=alice", "set", "DefaultAccount=vision"],
        # only after the default account moved: sacctmgr refuses the other order
        [
            "sacctmgr",
            "-i",
            "delete",
            "user",
            "where",
            "name=alice",
            "account=default",
            "cluster=lab",
        ],
    ]
    assert "alice@default" not in teamed["associations"]
    assert "bob@default" in teamed["associations"]


def test_a_user_made_by_hand_keeps_its_association_in_a_described_account():
    state = {**REGISTERED, "accounts": ["default", "root"]}
    state["associations"] = ["carol@default", "root@root"]
    state["default_accounts"] = {**REGISTERED["default_accounts"], "carol": "default"}
    commands, after = sacctmgr.plan(state, _params())
    assert not [c for c in commands if c[2] == "delete"]
    assert "carol@default" in after["associations"]


def test_an_account_s_default_qos_is_the_first_it_lists():
    (default, team) = sacctmgr.wanted_accounts(
        [{"name": "vision", "qos": ["gpu-standard", "gpu-priority"]}], "default"
    )
    assert (default["qos"], default["default_qos"]) == (["normal"], "normal")
    assert (team["qos"], team["default_qos"]) == (["gpu-priority", "gpu-standard"], "gpu-standard")


def test_a_changed_limit_is_modified_and_a_dropped_one_cleared():
    qos = [{"name": "gpu", "max_gpus_per_user": 2, "max_gpus": 8}]
    _, state = sacctmgr.plan(REGISTERED, _params(qos=qos))
    commands, _ = sacctmgr.plan(state, _params(qos=[{"name": "gpu", "max_gpus_per_user": 4}]))
    assert commands == [
        [
            "sacctmgr",
            "-i",
            "modify",
            "qos",
            "where",
            "name=gpu",
            "set",
            "Priority=0",
            "MaxTRESPerUser=gres/gpu=4",
            "GrpTRES=gres/gpu=-1",
            "MaxJobsPerUser=-1",
            "MaxWall=-1",
        ]
    ]


def test_an_admin_level_is_corrected_and_nothing_it_was_not_told_about_is_removed():
    state = {
        **REGISTERED,
        "accounts": ["default", "root", "handmade"],
        "account_settings": {
            **REGISTERED["account_settings"],
            "default": {"fairshare": 1, "qos": ["normal"], "default_qos": "normal"},
            "handmade": {"fairshare": 3, "qos": ["normal"], "default_qos": ""},
        },
        "associations": ["alice@default", "bob@default", "carol@handmade", "root@root"],
        "default_accounts": {"alice": "default", "bob": "default", "carol": "handmade"},
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
    "text, minutes",
    [
        ("90", 90),
        ("30:00", 30),
        ("01:00:00", 60),
        ("1-00:00:00", 1440),
        ("2-12", 3600),
        ("1-00:30", 1470),
        ("00:00:30", 1),
    ],
)
def test_slurm_times_read_the_same_from_a_config_and_from_sacctmgr(text, minutes):
    assert sacctmgr.slurm_minutes(text) == minutes


def test_what_sacctmgr_prints_for_a_qos_is_read_back():
    row = ["gpu", "10", "gres/gpu=2", "cpu=8,gres/gpu=16", "", "1-00:00:00"]
    assert sacctmgr.qos_row(row) == {
        "priority": 10,
        "max_gpus_per_user": 2,
        "max_gpus": 16,
        "max_jobs_per_user": None,
        "max_wall": 1440,
    }


@pytest.mark.parametrize(
    "accounts, qos, problems",
    [
        (
            [{"name": "t", "qos": ["normal", "gold"]}],
            [],
            [
                (
                    ("accounting", "accounts", 0, "qos", 1),
                    "expected a QoS of accounting.qos or normal, got 'gold'",
                )
            ],
        ),
        (
            [{"name": "t", "qos": ["normal"], "default_qos": "gpu"}],
            [{"name": "gpu"}],
            [
                (
                    ("accounting", "accounts", 0, "default_qos"),
                    "expected one of the account's qos, got 'gpu'",
                )
            ],
        ),
        (
            [{"name": "t", "default_qos": "gpu"}],
            [{"name": "gpu"}],
            [
                (
                    ("accounting", "accounts", 0, "default_qos"),
                    "expected one of the account's qos, got 'gpu'",
                )
            ],
        ),
        (
            [{"name": "ok"}, {"name": "t", "users": ["alice", "eve"]}],
            [],
            [(("accounting", "accounts", 1, "users", 1), "expected a name from users, got 'eve'")],
        ),
        (
            [{"name": "t", "qos": ["gpu"], "default_qos": "gpu", "users": ["bob"]}],
            [{"name": "gpu"}],
            [],
        ),
    ],
)
def test_what_accounts_name_that_the_config_lacks_is_named_at_its_path(accounts, qos, problems):
    assert sacctmgr.reference_problems(USERS, accounts, qos) == problems


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
