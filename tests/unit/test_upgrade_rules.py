"""Slurm's upgrade rules as the upgrade and the rollback apply them, on readings of real hosts
(dpkg-query and apt-cache policy captured on Debian 13 and Debian 12 lab hosts)."""

import pytest
from conftest import ROOT
from slurm_readers.upgrade import (
    UPGRADE_HOLD_REASON,
    slurm_jobs_gone,
    slurm_listed_jobs,
    slurm_upgrade_changed_since,
    slurm_upgrade_verdict,
)
from slurm_readers.versions import (
    slurm_downgrade_packages,
    slurm_offered,
    slurm_packages,
    slurm_upgrade_refusal,
)

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
TRIXIE = "24.11.5-4+deb13u1"
BOOKWORM = "22.05.8-4+deb12u3"


def _reading(packages: dict, units: dict | None = None, release: dict | None = None) -> dict:
    return {
        "release": release or {},
        "packages": packages,
        "units": units or {"munge": "running", "slurmd": "running"},
        "snapshot": False,
    }


def _installed(version: str, candidate: str | None = None, *names: str) -> dict:
    return {name: {"installed": version, "candidate": candidate or version} for name in names}


def _cluster(controller_version: str, candidate: str, worker_candidate: str | None = None):
    controller = _installed(controller_version, candidate, "slurmctld", "slurmdbd")
    worker = _installed(controller_version, worker_candidate or candidate, "slurmd")
    units = {"munge": "running", "slurmctld": "running", "slurmdbd": "running", "slurmd": "absent"}
    return {"ctl": _reading(controller, units), "w1": _reading(worker)}


NODES = [
    {"name": "w1", "state": "allocated", "base_state": "allocated", "flags": []},
]
PATH = {"from": "1.0", "to": "1.1.0"}


def test_the_packages_are_read_as_dpkg_and_apt_print_them():
    installed = (FIXTURES / "24.11" / "dpkg-slurm.txt").read_text()
    policy = (FIXTURES / "24.11" / "apt-policy.txt").read_text()
    assert slurm_packages(installed, policy) == {
        "slurmd": {"installed": None, "candidate": TRIXIE},
        "slurmctld": {"installed": TRIXIE, "candidate": TRIXIE},
        "slurmdbd": {"installed": TRIXIE, "candidate": TRIXIE},
    }
    policy = (FIXTURES / "22.05" / "apt-policy.txt").read_text()
    assert slurm_packages("", policy)["slurmctld"] == {"installed": None, "candidate": BOOKWORM}


def test_the_same_slurm_is_no_slurm_upgrade_and_changes_no_package():
    verdict = slurm_upgrade_verdict(_cluster(TRIXIE, TRIXIE), "ctl", PATH, NODES)
    assert verdict == {
        "running": "24.11.5",
        "candidate": "24.11.5",
        "changes": {},
        "hold_reason": UPGRADE_HOLD_REASON,
        "refusal": "",
    }


def test_debian_12s_slurm_cannot_go_to_debian_13s_in_one_step():
    """22.05 -> 24.11 directly loses the queue and cannot convert the accounting database."""
    verdict = slurm_upgrade_verdict(_cluster(BOOKWORM, TRIXIE), "ctl", PATH, NODES)
    refusal = verdict["refusal"]
    assert refusal.startswith("[upgrade_unsupported]")
    for named in ("24.11.5", "22.05.8", "23.02, 23.11, 24.05"):
        assert named in refusal
    assert "deb1" not in refusal  # Slurm's versions, not Debian's package revisions


def test_a_downgrade_is_refused():
    refusal = slurm_upgrade_verdict(_cluster(TRIXIE, BOOKWORM), "ctl", PATH, NODES)["refusal"]
    assert refusal.startswith("[upgrade_unsupported]") and "no downgrade" in refusal


def test_a_release_in_the_window_is_applied_to_every_package_that_changes():
    verdict = slurm_upgrade_verdict(_cluster("24.05.4-1", TRIXIE), "ctl", PATH, NODES)
    assert verdict["refusal"] == ""
    assert verdict["changes"] == {"ctl": ["slurmdbd", "slurmctld"], "w1": ["slurmd"]}


FORKY = "26.05.5-1"
TO_26 = {"from": "1.1.0", "to": "2.0.0", "series": "26.05"}


def test_a_series_of_its_own_is_judged_before_its_source_is_placed():
    """Before the site's source is on any host the candidates are Debian 13's own: the window
    is judged against the series, and nothing is said to change yet."""
    verdict = slurm_upgrade_verdict(_cluster(TRIXIE, TRIXIE), "ctl", TO_26, NODES, offered=False)
    assert verdict == {
        "running": "24.11.5",
        "candidate": "26.05",
        "changes": {},
        "hold_reason": UPGRADE_HOLD_REASON,
        "refusal": "",
    }


def test_an_upgrade_taken_up_again_after_a_failure_is_judged_as_it_stands():
    """The controller's packages reached 26.05 before slurmctld failed; the workers did not."""
    cluster = _cluster(TRIXIE, TRIXIE)
    cluster["ctl"]["packages"] = _installed(FORKY, FORKY, "slurmctld", "slurmdbd")
    verdict = slurm_upgrade_verdict(cluster, "ctl", TO_26, NODES, offered=False)
    assert verdict["refusal"] == "" and verdict["running"] == "26.05.5", verdict
    cluster["w1"]["packages"] = _installed(TRIXIE, FORKY, "slurmd")
    verdict = slurm_upgrade_verdict(cluster, "ctl", TO_26, NODES)
    assert verdict["refusal"] == "" and verdict["changes"] == {"w1": ["slurmd"]}, verdict


def test_debian_12s_slurm_is_refused_the_series_before_any_host_changes():
    cluster = _cluster(BOOKWORM, BOOKWORM)
    refusal = slurm_upgrade_verdict(cluster, "ctl", TO_26, NODES, offered=False)["refusal"]
    assert refusal.startswith("[upgrade_unsupported] ctl: Slurm 26.05 takes")
    for named in ("22.05.8", "24.11, 25.05, 25.11", "upgrade to one of those first"):
        assert named in refusal, refusal


def test_the_placed_source_must_offer_the_series():
    refusal = slurm_upgrade_verdict(_cluster(TRIXIE, TRIXIE), "ctl", TO_26, NODES)["refusal"]
    assert refusal == (
        "[upgrade_unsupported] 2.0.0 runs Slurm 26.05; the controller's package sources offer "
        f"slurmctld {TRIXIE}: the site settings' slurm source must name where 26.05 comes from"
    )


def test_the_series_source_changes_every_slurm_package():
    verdict = slurm_upgrade_verdict(_cluster(TRIXIE, FORKY), "ctl", TO_26, NODES)
    assert verdict["refusal"] == "" and verdict["candidate"] == "26.05.5"
    assert verdict["changes"] == {"ctl": ["slurmdbd", "slurmctld"], "w1": ["slurmd"]}


# apt-cache policy on a Debian 13 lab host with the site's forky suite pinned (2026-12-05)
PINNED = (FIXTURES / "26.05" / "apt-policy-pinned.txt").read_text()


def test_every_version_the_sources_offer_is_read_pinned_away_or_not():
    assert slurm_offered(PINNED) == {"slurmctld": [FORKY, TRIXIE], "slurmdbd": [FORKY, TRIXIE]}
    policy = (FIXTURES / "24.11" / "apt-policy.txt").read_text()
    assert slurm_offered(policy) == {name: [TRIXIE] for name in ("slurmd", "slurmctld", "slurmdbd")}


def test_a_rollback_takes_the_backups_slurm_from_what_the_sources_offer():
    upgraded = {
        "slurmctld": {"installed": FORKY, "candidate": FORKY},
        "slurmdbd": {"installed": FORKY, "candidate": FORKY},
        "slurmd": {"installed": None, "candidate": FORKY},
        "slurm-client": {"installed": FORKY, "candidate": FORKY},
    }
    offered = slurm_offered(PINNED) | {"slurm-client": [FORKY, TRIXIE, "24.11.5-4+deb13u2"]}
    assert slurm_downgrade_packages(upgraded, offered, "24.11.5") == {
        "install": [
            "slurm-client=24.11.5-4+deb13u2",
            f"slurmctld={TRIXIE}",
            f"slurmdbd={TRIXIE}",
        ],
        "missing": [],
    }
    assert slurm_downgrade_packages(upgraded, offered, "24.11.6")["missing"] == [
        "slurm-client",
        "slurmctld",
        "slurmdbd",
    ]
    at_backup = {"slurmctld": {"installed": TRIXIE, "candidate": FORKY}}
    assert slurm_downgrade_packages(at_backup, offered, "24.11.5") == {"install": [], "missing": []}


def test_a_rollback_of_a_slurm_upgrade_takes_either_version_and_names_any_other():
    members = [
        ("ctl", _installed(FORKY, None, "slurmctld")),
        ("w1", _installed(TRIXIE, None, "slurmd")),
    ]
    assert slurm_upgrade_changed_since(members, "24.11.5", "26.05.5") == []
    assert slurm_upgrade_changed_since(members, "24.11.5") == ["ctl slurmctld 26.05.5"]


def test_members_offered_different_slurm_versions_are_refused_naming_the_host():
    cluster = _cluster("24.05.4-1", TRIXIE, worker_candidate="24.05.4-1")
    refusal = slurm_upgrade_verdict(cluster, "ctl", PATH, NODES)["refusal"]
    assert refusal.startswith("[upgrade_unsupported] w1 would install slurmd 24.05.4-1")


def test_a_member_on_another_release_than_the_request_says_is_refused():
    cluster = _cluster(TRIXIE, TRIXIE)
    cluster["w1"]["release"] = {"app_version": "0.9"}
    refusal = slurm_upgrade_verdict(cluster, "ctl", PATH, NODES)["refusal"]
    assert refusal.startswith("[upgrade_mismatch]") and "w1 records 0.9" in refusal
    # an upgrade taken up again: members already on the target are on the path
    cluster["w1"]["release"] = {"app_version": "1.1.0"}
    assert slurm_upgrade_verdict(cluster, "ctl", PATH, NODES)["refusal"] == ""


@pytest.mark.parametrize(
    ("where", "state"),
    [("units", "stopped"), ("node", "drained"), ("node", "down*")],
)
def test_an_unhealthy_cluster_is_refused_unless_forced(where, state):
    cluster, nodes = _cluster(TRIXIE, TRIXIE), [dict(NODES[0])]
    if where == "units":
        cluster["w1"]["units"]["slurmd"] = state
    else:
        nodes[0].update(state=state, base_state=state.rstrip("*"))
    refusal = slurm_upgrade_verdict(cluster, "ctl", PATH, nodes)["refusal"]
    assert refusal.startswith("[upgrade_unhealthy]") and state in refusal
    assert slurm_upgrade_verdict(cluster, "ctl", PATH, nodes, True)["refusal"] == ""


def test_a_node_finishing_a_job_or_held_by_this_upgrade_is_not_unhealthy():
    cluster = _cluster(TRIXIE, TRIXIE)
    completing = {"name": "w1", "state": "completing", "base_state": "idle"}
    completing["flags"] = ["completing"]
    assert slurm_upgrade_verdict(cluster, "ctl", PATH, [completing])["refusal"] == ""
    # a node an earlier run of the upgrade held (it failed before giving it back)
    held = {"name": "w1", "state": "drained", "base_state": "idle", "flags": ["drain"]}
    verdict = slurm_upgrade_verdict(cluster, "ctl", PATH, [held | {"reason": "maintenance"}])
    assert verdict["refusal"].startswith("[upgrade_unhealthy]")
    held["reason"] = verdict["hold_reason"]
    assert slurm_upgrade_verdict(cluster, "ctl", PATH, [held])["refusal"] == ""
    held["flags"] = ["drain", "not_responding"]
    assert slurm_upgrade_verdict(cluster, "ctl", PATH, [held])["refusal"].startswith(
        "[upgrade_unhealthy]"
    )


def test_a_rollback_sees_every_package_whose_slurm_changed_since_the_backup():
    members = [
        ("ctl", _installed(TRIXIE, None, "slurmctld")),
        ("w1", _installed(BOOKWORM, None, "slurmd")),
    ]
    assert slurm_upgrade_changed_since(members, "24.11.5") == ["w1 slurmd 22.05.8"]
    assert slurm_upgrade_changed_since(members[:1], "24.11.5") == []


@pytest.mark.parametrize(
    ("running", "candidate", "refused"),
    [
        ("22.05.8", "24.11.5", True),
        ("23.02.7", "24.11.5", False),
        ("24.11.5", "22.05.8", True),
        ("24.11.5", "24.11.6", False),
        ("21.08.8", "23.11.1", True),
        ("24.11.5", "27.05.0", True),
    ],
)
def test_the_window_names_both_versions_when_it_refuses(running, candidate, refused):
    refusal = slurm_upgrade_refusal(running, candidate)
    assert bool(refusal) is refused
    if refused:
        assert running in refusal and candidate in refusal


def test_a_job_the_restored_state_runs_but_its_node_does_not_ended_after_the_backup():
    on_w01 = slurm_listed_jobs((FIXTURES / "24.11" / "listpids.txt").read_text())
    assert on_w01 == ["8"]
    running = "3 up1-w01\n8 up1-w01\n9 up1-w02\n12 up1-w09\n"
    # 3 is gone from w01, 8 runs there, w02 runs nothing now, w09 was not read
    assert slurm_jobs_gone(running, {"up1-w01": on_w01, "up1-w02": []}) == ["3", "9"]
