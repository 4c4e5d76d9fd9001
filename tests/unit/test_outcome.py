"""What a run's outcome means for the members and the instance (runner) and how status
classifies the instance (slurm-reference adapter), from hosts' stats and reported facts."""

import json

import pytest
from conftest import example

from driver.apps.slurm.health import health_of
from driver.documents import load_json
from driver.events import (
    ErrorInfo,
    EventType,
    Health,
    HostStats,
    InstanceOutcome,
    InstanceStatus,
    Result,
    ResultStatus,
    lifecycle_at_end,
)
from driver.models.request import OperationRequest
from driver.request_check import check_request
from driver.runner.collector import Collector
from driver.runner.outcome import member_statuses
from driver.runner.plan import RunPlan


def _plan(name: str) -> RunPlan:
    checked = check_request(load_json(json.dumps(example(f"slurm-reference/{name}"))))
    assert checked.request is not None and checked.version is not None, checked.findings
    return RunPlan.of(checked.request, checked.version)


def _failure(host: str, code: str, message: str, action: str = "ansible.builtin.fail", stderr=""):
    """The run's error as its collector makes it from ansible-runner's events: `message` is
    "<task>: <the task's msg>"; a host that was not reached has no task result."""
    if code != "host_failed":
        return ErrorInfo(code=code, message=message, host=host)
    task, _, msg = message.partition(": ")
    collector = Collector(lambda *args, **kwargs: None, None)
    collector({"event": "playbook_on_task_start", "event_data": {"task": task}})
    result = {"msg": msg, "stderr": stderr}
    data = {"host": host, "task_action": action, "res": result}
    collector({"event": "runner_on_failed", "event_data": data})
    return collector.error()


def _statuses(result: Result) -> dict[str, str]:
    return {m.member_id: m.status.value for m in result.members}


def _outcome(
    plan: RunPlan,
    failed_hosts=(),
    error: ErrorInfo | None = None,
    joined=(),
    not_reached: dict[str, str] | None = None,
    stats: dict | None = None,
) -> Result:
    """`joined`: the workers that reported their daemons (slurm_worker's report, which a
    joining worker reaches only once it joined); `not_reached`: the hosts the preflight left
    out, with the SSH error; `stats`: what else the playbook reported."""
    hosts = {h: HostStats(ok=1, failed=1 if h in failed_hosts else 0) for h in plan.inventory.hosts}
    result = Result(status="failed" if failed_hosts else "succeeded", hosts=hosts, error=error)
    reported = {
        "slurm_app_workers": {host: {"node": host} for host in joined},
        "slurm_app_not_reached": not_reached or {},
        **(stats or {}),
    }
    member_statuses(plan, result, bool(failed_hosts), reported)
    return result


def test_a_drain_changes_its_target_only():
    plan = _plan("drain_worker")
    result = _outcome(plan)
    assert _statuses(result) == {"m-ctl": "ready", "m-w1": "ready", "m-w2": "drained"}
    assert result.instance.status == "running"


def test_a_drain_that_ran_out_of_time_leaves_the_target_draining_and_the_controller_ready():
    plan = _plan("drain_worker")
    controller = next(iter(plan.inventory.hosts))
    error = _failure(
        controller,
        "host_failed",
        "Report a drain that ran out of time: [drain_timeout] node w2 still runs job(s) 7",
    )
    result = _outcome(plan, failed_hosts={controller}, error=error)
    assert result.error is not None and result.error.code == "drain_timeout"
    assert "[drain_timeout]" not in result.error.message and "job(s) 7" in result.error.message
    assert _statuses(result) == {"m-ctl": "ready", "m-w1": "ready", "m-w2": "draining"}
    assert (result.instance.status, result.instance.health) == ("running", "unknown")


def test_a_deploy_with_every_node_drained_changes_no_member_and_degrades():
    """Nothing is left to run the readiness job on: the deploy says so, the drains stay."""
    data = example("slurm-reference/deploy")
    for member in data["members"]:
        member["status"] = "ready" if member["component_key"] == "controller" else "drained"
    checked = check_request(load_json(json.dumps(data)))
    assert checked.request is not None and checked.version is not None, checked.findings
    plan = RunPlan.of(checked.request, checked.version)
    controller = plan.inventory.groups["slurm_controller"][0]
    error = _failure(
        controller,
        "host_failed",
        "Say that no node is in service to prove readiness on: [no_node_in_service] "
        "every node is drained (gpu-01, gpu-02): resume one",
    )
    result = _outcome(plan, failed_hosts={controller}, error=error)
    assert result.error is not None and result.error.code == "no_node_in_service"
    assert _statuses(result) == {"m-ctl": "ready", "m-w1": "drained", "m-w2": "drained"}
    assert (result.instance.status, result.instance.health) == ("running", "degraded")


def test_an_unknown_code_in_brackets_is_an_ordinary_failure():
    plan = _plan("drain_worker")
    controller = next(iter(plan.inventory.hosts))
    error = _failure(controller, "host_failed", "x: [not_a_code] boom")
    result = _outcome(plan, failed_hosts={controller}, error=error)
    assert result.error is not None and result.error.code == "host_failed"
    assert _statuses(result)["m-ctl"] == "failed"
    assert result.instance.status == "failed"


@pytest.mark.parametrize(
    ("action", "message", "stderr"),
    [
        # a path named like a code in a command's error output (du on a user's folder)
        (
            "ansible.builtin.command",
            "Measure them: non-zero return code",
            "du: cannot access '/workspace/jobs/[node_busy] x': Permission denied",
        ),
        # a module's own msg that happens to start like one (a host's output in it)
        ("slurm_read", "Read: [node_busy] from the host's answer", ""),
        ("ansible.builtin.shell", "Run: [drain_timeout] printed by the host", ""),
    ],
)
def test_a_code_comes_only_from_a_fail_or_assert_task(action, message, stderr):
    """Issue 44 (8): text a host prints cannot turn a failure into a refusal (members not
    marked failed, instance unknown); only the bundle's own fail and assert tasks can."""
    plan = _plan("remove_worker")
    controller = next(iter(plan.inventory.hosts))
    error = _failure(controller, "host_failed", message, action=action, stderr=stderr)
    result = _outcome(plan, failed_hosts={controller}, error=error)
    assert result.error is not None and result.error.code == "host_failed"
    assert _statuses(result)["m-ctl"] == "failed" and result.instance.status == "failed"


# slurm_accounts: slurm_common's action plugin, whose refusals are built on the control side
@pytest.mark.parametrize(
    "action", ["ansible.builtin.assert", "assert", "ansible.legacy.fail", "slurm_accounts"]
)
def test_an_assert_task_refuses_as_a_fail_task_does(action):
    plan = _plan("remove_worker")
    controller = next(iter(plan.inventory.hosts))
    message = "Refuse: [node_busy] node w2 runs job(s) 7; nothing was changed"
    result = _outcome(
        plan, failed_hosts={controller}, error=_failure(controller, "host_failed", message, action)
    )
    assert result.error is not None and result.error.code == "node_busy"
    assert result.error.message == "Refuse: node w2 runs job(s) 7; nothing was changed"
    assert _statuses(result)["m-ctl"] == "ready"


def test_a_failed_join_fails_the_new_member_and_degrades_the_instance():
    plan = _plan("add_worker")
    new_host = plan.inventory.allocation_hosts[plan.request.operation.target_ids[0]]
    result = _outcome(plan, failed_hosts={new_host})
    assert _statuses(result) == {
        "m-ctl": "ready",
        "m-w1": "ready",
        "m-w2": "ready",
        "m-w3": "failed",
    }
    assert (result.instance.status, result.instance.health) == ("running", "degraded")


def test_a_join_of_several_makes_each_new_member_ready():
    plan = _plan("add_workers")
    assert plan.inventory.groups["slurm_workers"] == ["gpu-03", "gpu-04", "gpu-05"]
    result = _outcome(plan)
    assert {k: v for k, v in _statuses(result).items() if k.startswith("m-w")} == {
        "m-w1": "ready",
        "m-w2": "ready",
        "m-w3": "ready",
        "m-w4": "ready",
        "m-w5": "ready",
    }
    assert (result.instance.status, result.instance.health) == ("running", "healthy")


def test_a_join_of_several_where_one_fails_reports_which_joined():
    plan = _plan("add_workers")
    error = _failure("gpu-04", "host_failed", "Start slurmd: boom")
    result = _outcome(plan, failed_hosts={"gpu-04"}, error=error, joined=("gpu-03", "gpu-05"))
    assert _statuses(result) == {
        "m-ctl": "ready",
        "m-w1": "ready",
        "m-w2": "ready",
        "m-w3": "ready",
        "m-w4": "failed",
        "m-w5": "ready",
    }
    assert (result.instance.status, result.instance.health) == ("running", "degraded")
    assert result.error is not None
    assert result.error.message.endswith(
        "; failed on 1 of 3 targets (gpu-04), done on gpu-03, gpu-05"
    )


def test_a_join_of_several_stopped_by_one_that_does_not_answer_joins_none():
    """The preflight stops the whole run: the others answered but never joined."""
    plan = _plan("add_workers")
    error = ErrorInfo(code="host_unreachable", message="Reach the host: timed out", host="gpu-04")
    result = _outcome(plan, failed_hosts={"gpu-04"}, error=error)
    statuses = _statuses(result)
    assert [statuses[m] for m in ("m-w3", "m-w4", "m-w5")] == ["pending", "failed", "pending"]
    assert result.error is not None
    assert result.error.message.endswith("failed on 1 of 3 targets (gpu-04), done on none")


def test_a_join_of_several_where_the_controller_fails_fails_them_all():
    plan = _plan("add_workers")
    error = _failure("slurm-ctl", "host_failed", "Apply: boom")
    result = _outcome(plan, failed_hosts={"slurm-ctl"}, error=error)
    statuses = _statuses(result)
    assert statuses["m-ctl"] == "failed"
    assert [statuses[m] for m in ("m-w3", "m-w4", "m-w5")] == ["pending"] * 3
    assert result.instance.status == "failed"
    assert result.error is not None and result.error.message == "Apply: boom"


def test_a_replacement_takes_the_targets_place():
    plan = _plan("replace_worker")
    assert plan.inventory.groups["slurm_app_replaced"] == ["gpu-02"]
    assert plan.inventory.groups["slurm_app_replacement"] == ["gpu-03"]
    result = _outcome(plan)
    assert _statuses(result) == {
        "m-ctl": "ready",
        "m-w1": "ready",
        "m-w2": "removed",
        "m-w3": "ready",
    }
    assert (result.instance.status, result.instance.health) == ("running", "healthy")


def test_a_new_controller_takes_the_old_ones_place_and_the_placement_follows():
    plan = _plan("replace_controller")
    groups = plan.inventory.groups
    assert groups["slurm_controller"] == groups["monitoring"] == ["slurm-ctl2"]
    assert groups["slurm_app_replaced"] == ["slurm-ctl"]
    assert groups["slurm_workers"] == ["gpu-01", "gpu-02"]
    assert "slurm_controller_target_node" not in plan.inventory.group_vars
    result = _outcome(plan, not_reached={"slurm-ctl": "ssh: connect to host: timed out"})
    assert _statuses(result) == {
        "m-ctl": "removed",
        "m-w1": "ready",
        "m-w2": "ready",
        "m-ctl2": "ready",
    }
    reported = {
        "slurm_app_controller": {"cluster_name": "research", "nodes": []},
        "slurm_app_restore": {
            "backup_id": "20261201T030000Z",
            "source": "control_plane",
            "state_from": "2026-12-01T03:00:01Z",
            "created_at": "2026-12-01T03:00:04Z",
            "slurm_version": "24.11.5",
            "bundle_version": "0.1.0",
            "restored_now": "True",
        },
        "slurm_app_not_reached": {"slurm-ctl": "ssh: connect to host: timed out"},
    }
    detail = plan.adapter.detail(plan.request, plan.inventory, reported, failed=False)
    assert detail["restore"]["state_from"] == "2026-12-01T03:00:01Z"
    assert detail["restore"]["restored_now"] is True
    new_controller = "3c4d5e6f-7a8b-4c3d-8e4f-404142434445"
    assert detail["placement_intent"]["controller_allocation_id"] == new_controller
    assert detail["access_bundle"]["controller"]["address"] == "10.40.0.13"
    assert [h["host"] for h in detail["not_cleaned"]] == ["slurm-ctl"]


def test_a_refused_backup_changes_no_member():
    plan = _plan("replace_controller")
    error = _failure(
        "slurm-ctl2",
        "host_failed",
        "Find and check the backup: [backup_mismatch] backup 20261201T030000Z is of "
        "cluster_name 'other', this cluster's is 'research'",
    )
    result = _outcome(plan, failed_hosts={"slurm-ctl2"}, error=error)
    assert result.error is not None and result.error.code == "backup_mismatch"
    assert "cluster_name 'other'" in result.error.message
    assert _statuses(result) == {
        "m-ctl": "failed",
        "m-w1": "ready",
        "m-w2": "ready",
        "m-ctl2": "pending",
    }
    assert (result.instance.status, result.instance.health) == ("running", "unknown")


# replace_controller's marks: set once the backup was found restorable (the old controller
# is stopped or lost from there), cleared once the new one runs the cluster
NO_CONTROLLER = {
    "before the backup was found restorable": (None, ("running", "degraded")),
    "the old controller stopped, the new one not yet running": (True, ("failed", "failed")),
    "the new controller runs, the old one's cleaning failed": (False, ("running", "degraded")),
}


@pytest.mark.parametrize(("marked", "instance"), NO_CONTROLLER.values(), ids=NO_CONTROLLER)
def test_a_replacement_that_fails_with_no_controller_running_fails_the_instance(marked, instance):
    plan = _plan("replace_controller")
    error = _failure("slurm-ctl2", "host_failed", "Start slurmctld: boom")
    stats = {} if marked is None else {"slurm_app_no_controller": marked}
    result = _outcome(plan, failed_hosts={"slurm-ctl2"}, error=error, stats=stats)
    assert (result.instance.status, result.instance.health) == instance
    assert result.error is not None and result.error.message.startswith("Start slurmctld: boom")
    resumes = "send the same request again to resume" in result.error.message
    assert resumes is (marked is True)


# (failing host, its error code and message, the workers that joined) -> the old worker's and
# the replacement's status, the result's error code, the instance's health
REPLACE_FAILURES = {
    "a failed join leaves the target in service": (
        ("gpu-03", "host_failed", "Detect the node's hardware: boom", ()),
        ("ready", "failed", "host_failed", "degraded"),
    ),
    "a drain too long leaves both in service": (
        (
            "slurm-ctl",
            "host_failed",
            "Report a drain that ran out of time: [drain_timeout] node gpu-02 still runs "
            "job(s) 7 after 1800 s",
            ("gpu-03",),
        ),
        ("draining", "ready", "drain_timeout", "unknown"),
    ),
    "refused before the join, no member changes": (
        (
            "slurm-ctl",
            "host_failed",
            "Refuse: [config_refused] gpu-02 runs on the controller's own host",
            (),
        ),
        ("ready", "pending", "config_refused", "unknown"),
    ),
    "a target that does not answer stops it before the join": (
        ("gpu-02", "host_unreachable", "Reach the host: timed out", ()),
        ("failed", "pending", "host_unreachable", "degraded"),
    ),
    "a target that fails to leave is failed, its replacement ready": (
        ("gpu-02", "host_failed", "Clean the host: boom", ("gpu-03",)),
        ("failed", "ready", "host_failed", "degraded"),
    ),
}


@pytest.mark.parametrize(("failure", "expected"), REPLACE_FAILURES.values(), ids=REPLACE_FAILURES)
def test_a_replacement_that_fails_leaves_at_least_the_capacity_it_found(failure, expected):
    host, code, message, joined = failure
    old, new, error_code, health = expected
    plan = _plan("replace_worker")
    error = _failure(host, code, message)
    result = _outcome(plan, failed_hosts={host}, error=error, joined=joined)
    assert result.error is not None and result.error.code == error_code
    statuses = _statuses(result)
    assert (statuses["m-ctl"], statuses["m-w1"]) == ("ready", "ready")
    assert (statuses["m-w2"], statuses["m-w3"]) == (old, new)
    assert (result.instance.status, result.instance.health) == ("running", health)


@pytest.mark.parametrize(
    ("operation", "drained_after"),
    [
        ("deploy", "drained"),
        ("start", "drained"),
        ("restart", "drained"),
        ("stop", "stopped"),
        ("resume_worker", "ready"),
    ],
)
def test_an_operators_drain_outlasts_every_operation_but_resume(operation, drained_after):
    """Slurm keeps a node's drain through a deploy, a start and a restart: its member stays
    drained (or draining) until resume_worker ends the drain."""
    data = example(f"slurm-reference/{operation}")
    for member in data["members"]:
        if member["member_id"] == "m-w2":
            member["status"] = "drained"
    checked = check_request(load_json(json.dumps(data)))
    assert checked.request is not None and checked.version is not None, checked.findings
    result = _outcome(RunPlan.of(checked.request, checked.version))
    statuses = _statuses(result)
    assert statuses.pop("m-w2") == drained_after
    assert set(statuses.values()) == {"stopped" if operation == "stop" else "ready"}


def test_a_stop_changes_every_touched_member():
    result = _outcome(_plan("stop"))
    assert set(_statuses(result).values()) == {"stopped"}
    assert result.instance.status == "stopped"


@pytest.mark.parametrize(
    ("operation", "others", "instance"),
    [
        ("stop", "stopped", ("stopped", "degraded")),
        ("start", "ready", ("degraded", "degraded")),
        ("restart", "ready", ("degraded", "degraded")),
    ],
)
def test_a_lifecycle_operation_goes_on_without_a_dead_worker_and_fails_its_member(
    operation, others, instance
):
    plan = _plan(operation)
    dead = plan.inventory.allocation_hosts[
        next(m.allocation_id for m in plan.request.members if m.member_id == "m-w2")
    ]
    not_reached = {dead: "Failed to connect to the host via ssh: timed out"}
    result = _outcome(plan, not_reached=not_reached)
    statuses = _statuses(result)
    assert statuses.pop("m-w2") == "failed"
    assert set(statuses.values()) == {others}
    assert (result.instance.status, result.instance.health) == instance
    reported = {"slurm_app_not_reached": not_reached}
    assert plan.adapter.detail(plan.request, plan.inventory, reported, failed=False) == {
        "not_reached": [{"host": dead, "reason": not_reached[dead]}]
    }


def test_a_hosts_reason_is_one_line_with_what_ssh_said_last():
    plan = _plan("restart")
    dead = plan.inventory.allocation_hosts[
        next(m.allocation_id for m in plan.request.members if m.member_id == "m-w2")
    ]
    # Mitogen's words, then ssh's stderr as it received it
    said = (
        "timed out waiting for ping module test: EOF on stream; last 100 lines received:\n"
        "\r\n"
        f"ssh: connect to host {dead} port 22: No route to host\r\n"
    )
    reported = {"slurm_app_not_reached": {dead: said}}
    detail = plan.adapter.detail(plan.request, plan.inventory, reported, failed=False)
    assert detail["not_reached"] == [
        {
            "host": dead,
            "reason": "timed out waiting for ping module test: EOF on stream; last 100 lines "
            f"received: … ssh: connect to host {dead} port 22: No route to host",
        }
    ]


def test_a_decommission_still_removes_the_member_it_could_not_reach():
    plan = _plan("decommission")
    dead = next(iter(set(plan.inventory.hosts) - set(plan.inventory.groups["slurm_controller"])))
    result = _outcome(plan, not_reached={dead: "timed out"})
    assert set(_statuses(result).values()) == {"removed"}


REPORT = {
    "slurm_app_controller": {
        "host": "ctl-01",
        "accounting": True,
        "services": {
            "munge": "running",
            "slurmctld": "running",
            "mariadb": "running",
            "slurmdbd": "running",
        },
        "slurmctld_answers": True,
        "accounting_answers": True,
        "disks": [
            {
                "path": "/var/lib/slurm/slurmctld",
                "mount": "/",
                "size_bytes": 100,
                "used_bytes": 40,
                "percent": 40,
            },
            {
                "path": "/var/lib/mysql",
                "mount": "/srv",
                "size_bytes": 100,
                "used_bytes": 84,
                "percent": 84,
            },
        ],
        "nodes": [
            {"name": "gpu-01", "base_state": "idle", "flags": [], "state": "idle", "reason": None},
            {
                "name": "gpu-02",
                "base_state": "idle",
                "flags": ["drain"],
                "state": "drained",
                "reason": "asked",
                "reason_set_by": "root",
            },
        ],
    },
    "slurm_app_workers": {
        "gpu-01": {"services": {"munge": "running", "slurmd": "running"}},
        "gpu-02": {"services": {"munge": "running", "slurmd": "running"}},
    },
}


def _request() -> OperationRequest:
    return _plan("status").request


def _with(path: tuple, value) -> dict:
    report = json.loads(json.dumps(REPORT))
    node = report
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return report


def test_everything_running_is_healthy_and_a_drain_asked_for_is_no_problem():
    health = health_of(_request(), REPORT)
    assert health["classification"] == "healthy" and health["problems"] == []
    # a filesystem below 85 % full is shown, no problem
    assert [(d["host"], d["path"], d["percent"]) for d in health["disks"]] == [
        ("ctl-01", "/var/lib/slurm/slurmctld", 40),
        ("ctl-01", "/var/lib/mysql", 84),
    ]


@pytest.mark.parametrize(
    ("path", "value", "classification", "problem"),
    [
        (
            ("slurm_app_workers", "gpu-02", "services", "slurmd"),
            "stopped",
            "degraded",
            "gpu-02: slurmd is stopped",
        ),
        (("slurm_app_workers", "gpu-02"), None, "degraded", "gpu-02: did not answer"),
        (
            ("slurm_app_controller", "accounting_answers"),
            False,
            "degraded",
            "slurmdbd does not answer",
        ),
        (
            ("slurm_app_controller", "services", "slurmctld"),
            "stopped",
            "failed",
            "ctl-01: slurmctld is stopped",
        ),
        (
            ("slurm_app_controller", "slurmctld_answers"),
            False,
            "failed",
            "slurmctld does not answer",
        ),
        (
            ("slurm_app_controller", "nodes", 0),
            {
                "name": "gpu-01",
                "base_state": "idle",
                "flags": ["not_responding"],
                "state": "idle",
                "reason": None,
            },
            "degraded",
            "node gpu-01 is idle, not responding",
        ),
        (
            # a job launched onto slurmd while its plugins changed (bench/slurm_upgrade.py)
            ("slurm_app_controller", "nodes", 1, "reason_set_by"),
            "slurm",
            "degraded",
            "node gpu-02 is drained by Slurm itself (asked)",
        ),
        (
            ("slurm_app_controller", "disks", 1, "percent"),
            85,
            "degraded",
            "ctl-01: /var/lib/mysql is on a filesystem 85 % full (/srv; 85 % or more)",
        ),
        (
            ("slurm_app_controller", "backup"),
            {
                "scheduled": False,
                "last_success": None,
                "last_attempt": {"at": "2026-12-01T10:00:00Z", "ok": False, "reason": "x: why"},
                "overdue": False,
            },
            "degraded",
            "the last backup failed at 2026-12-01T10:00:00Z: x: why",
        ),
        (
            ("slurm_app_controller", "backup"),
            {
                "scheduled": True,
                "interval_s": 3600,
                "last_success": {"at": "2026-12-01T07:00:00Z", "ok": True, "age_s": 10800},
                "last_attempt": {"at": "2026-12-01T07:00:00Z", "ok": True},
                "overdue": True,
            },
            "degraded",
            "no backup succeeded for two intervals (3600 s each; the last one 10800 s ago)",
        ),
    ],
)
def test_what_degrades_or_fails_the_instance_is_named(path, value, classification, problem):
    report = _with(path, value)
    if value is None:
        del report[path[0]][path[1]]
    health = health_of(_request(), report)
    assert health["classification"] == classification
    assert any(p.startswith(problem) for p in health["problems"]), health["problems"]


def test_a_thousand_nodes_that_do_not_answer_read_as_twenty_and_a_count():
    """Hostless CLOUD nodes after a reconfigure (bench/cloud_nodes.py): slurmctld pings them,
    each stays `idle` and not responding. The problems name the first twenty and count the
    rest; `nodes` keeps every one."""
    nodes = [
        {"name": f"cloud{index:04d}", "base_state": "idle", "state": "idle",
         "flags": ["cloud", "not_responding"], "reason": None}
        for index in range(1, 1001)
    ]  # fmt: skip
    health = health_of(_request(), _with(("slurm_app_controller", "nodes"), nodes))
    assert health["classification"] == "degraded"
    assert health["problems"] == [
        *(f"node cloud{index:04d} is idle, not responding" for index in range(1, 21)),
        "and 980 more nodes that cannot run jobs",
    ]


def test_firing_alerts_degrade_the_instance_and_informational_ones_do_not():
    monitoring = {
        "host": "ctl-01",
        "services": {"prometheus": "running", "prometheus-alertmanager": "running"},
        "prometheus_answers": True,
        "targets": [],
        "alerts": [
            {"name": "PrometheusDiskPressure", "severity": "warning", "node": "ctl-01",
             "summary": "/ on ctl-01 has less than 10 % free", "since": "2026-11-27T11:02:03Z"},
            {"name": "PrometheusRetentionNearSizeCap", "severity": "info", "node": None,
             "summary": "Prometheus holds more than 90 % of its 5GB cap", "since": None},
        ],
    }  # fmt: skip
    report = _with(("slurm_app_monitoring",), monitoring)
    health = health_of(_request(), report)
    assert health["classification"] == "degraded"
    assert health["problems"] == [
        "alert PrometheusDiskPressure firing on ctl-01 since 2026-11-27T11:02:03Z: "
        "/ on ctl-01 has less than 10 % free"
    ]
    monitoring["alerts"] = monitoring["alerts"][1:]
    assert health_of(_request(), report)["classification"] == "healthy"


def test_a_monitoring_failure_in_a_deploy_degrades_with_its_reason():
    reason = "Write the alert rules (checked by promtool first): failed to validate"
    report = _with(("slurm_app_monitoring_failed",), {"ctl-01": reason})
    health = health_of(_request(), report)
    assert health["classification"] == "degraded"
    assert health["problems"] == [f"monitoring: ctl-01: {reason}"]
    deploy = _plan("deploy")
    assert deploy.adapter.observed_state(deploy.request, report) == (
        InstanceStatus.DEGRADED,
        Health.DEGRADED,
    )
    assert deploy.adapter.observed_state(deploy.request, REPORT) is None  # the default: healthy


def test_a_worker_the_run_did_not_ask_is_no_problem():
    """add_worker's inventory holds the controller and the new worker: the other workers were
    not asked, so their missing reports say nothing about them."""
    report = _with(("slurm_app_workers", "gpu-02"), None)
    del report["slurm_app_workers"]["gpu-02"]
    health = health_of(_request(), report, asked={"ctl-01", "gpu-01"})
    assert health["classification"] == "healthy", health["problems"]
    assert "gpu-02" not in health["services"]


def test_a_detail_says_what_the_run_gave_and_no_more():
    """A key the adapter gave no value for is absent, not null: a control-plane backup has no
    path, a result without a backup no `backup` key; a null the run gave stays."""
    from driver.apps.slurm.backup import backup_detail
    from driver.details.slurm import SlurmDetail

    manifest = {"backup_id": "20261202T084342Z", "files": []}
    reported = {"backup_id": "20261202T084342Z", "destination": "control_plane"}
    detail = SlurmDetail.model_validate(
        {
            "app_version_label": "1.1.0",
            "hosts_touched": ["ctl"],
            "backup": backup_detail({**reported, "manifest": manifest}),
            "releases": {"ctl": None},
        }
    ).model_dump(mode="json")
    assert set(detail) == {"app_version_label", "hosts_touched", "backup", "releases"}
    assert "path" not in detail["backup"] and detail["releases"] == {"ctl": None}
    on_mount = backup_detail({**reported, "manifest": manifest, "path": "/workspace/b"})
    assert (
        SlurmDetail.model_validate(
            {"app_version_label": "1.1.0", "hosts_touched": [], "backup": on_mount}
        ).model_dump(mode="json")["backup"]["path"]
        == "/workspace/b"
    )


def test_a_loops_failure_names_each_failed_item_and_its_own_message():
    """The preflight checks every host's variables in one step, a host per item: the run's
    error names the host and the option, not Ansible's "One or more items failed"."""
    collector = Collector(lambda *args, **kwargs: None, None)
    collector({"event": "playbook_on_task_start", "event_data": {"task": "Check"}})
    results = [
        {"item": "ctl", "_ansible_item_label": "ctl", "failed": False, "msg": "passed"},
        {"item": "w1", "_ansible_item_label": "w1", "failed": True, "msg": "bad slurm_x"},
    ]
    result = {"msg": "One or more items failed", "results": results, "failed": True}
    data = {"host": "ctl", "task_action": "validate_argument_spec", "res": result}
    collector({"event": "runner_on_failed", "event_data": data})
    error = collector.error()
    assert error is not None and error.message == "Check: w1: bad slurm_x"
    hidden = {"msg": "One or more items failed", "results": [{"censored": "x", "failed": True}]}
    collector({"event": "runner_on_failed", "event_data": data | {"res": hidden}})
    assert collector.last_error["ctl"].message == "Check: output hidden (no_log)"


@pytest.mark.parametrize(
    ("operation", "status", "instance", "event"),
    [
        ("deploy", "succeeded", InstanceStatus.RUNNING, EventType.INSTANCE_RUNNING),
        ("deploy", "succeeded", InstanceStatus.DEGRADED, EventType.INSTANCE_RUNNING),
        ("deploy", "failed", InstanceStatus.FAILED, EventType.INSTANCE_FAILED),
        # refused before any host changed: the platform keeps the status it has
        ("deploy", "failed", InstanceStatus.UNCHANGED, None),
        ("upgrade", "failed", InstanceStatus.FAILED, EventType.INSTANCE_FAILED),
        ("upgrade", "succeeded", InstanceStatus.RUNNING, None),
        ("drain_worker", "succeeded", InstanceStatus.DEGRADED, None),
        ("decommission", "succeeded", InstanceStatus.DELETED, EventType.INSTANCE_DELETED),
        ("decommission", "failed", InstanceStatus.FAILED, EventType.INSTANCE_FAILED),
    ],
)
def test_the_lifecycle_event_an_operations_end_means(operation, status, instance, event):
    """The platform's apps.instance.* (product spec 004), from the instance's status in the
    result: running after a deploy, failed after any operation, deleted after a
    decommission."""
    result = Result(status=ResultStatus(status), instance=InstanceOutcome(id="i", status=instance))
    assert lifecycle_at_end(operation, result) == event


def test_an_invalid_requests_result_keeps_a_valid_trace_and_starts_one_for_zeros():
    from driver.events import Context

    given = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    assert Context.salvaged(given).trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"
    zeros = {"traceparent": "00-" + "0" * 32 + "-00f067aa0ba902b7-01"}
    started = Context.salvaged(zeros).trace_id
    assert started != "0" * 32 and len(started) == 32 and int(started, 16) >= 0


def _same_node_replacement() -> dict:
    """replace_controller of a same_node cluster: the old allocation runs the controller and
    a worker; the platform gives the replacement a pending member of each."""
    data = example("slurm-reference/replace_controller")
    old, new = data["operation"]["target"]["allocation_id"], "3c4d5e6f-7a8b-4c3d-8e4f-404142434445"
    data["instance"]["placement_intent"] |= {"worker_placement": "same_node"}
    data["instance"]["placement_intent"]["worker_allocation_ids"] = []
    data["members"] += [
        {
            "member_id": "m-ctl-w",
            "component_key": "worker",
            "allocation_id": old,
            "status": "failed",
        },
        {
            "member_id": "m-ctl2-w",
            "component_key": "worker",
            "allocation_id": new,
            "status": "pending",
        },
    ]
    return data


def test_a_same_node_replacement_makes_the_new_host_controller_and_worker():
    checked = check_request(load_json(json.dumps(_same_node_replacement())))
    assert checked.request is not None and checked.version is not None, checked.findings
    plan = RunPlan.of(checked.request, checked.version)
    groups = plan.inventory.groups
    assert groups["slurm_controller"] == groups["monitoring"] == ["slurm-ctl2"]
    assert groups["slurm_workers"] == ["gpu-01", "gpu-02", "slurm-ctl2"]
    assert groups["slurm_app_replaced"] == ["slurm-ctl"]
    assert plan.inventory.group_vars["slurm_controller_restore_forget_nodes"] == ["slurm-ctl"]
    result = _outcome(plan)
    assert _statuses(result) == {
        "m-ctl": "removed",
        "m-ctl-w": "removed",
        "m-w1": "ready",
        "m-w2": "ready",
        "m-ctl2": "ready",
        "m-ctl2-w": "ready",
    }


def test_a_separate_replacement_forgets_no_node():
    plan = _plan("replace_controller")
    assert plan.inventory.group_vars["slurm_controller_restore_forget_nodes"] == []
    assert "slurm-ctl" not in plan.inventory.groups["slurm_workers"]
