"""status through the controller: what a member exports for node_exporter's textfile collector,
how the monitoring host's Prometheus answer is read back, and how the driver fills in every
worker it did not read itself."""

import importlib
import json
from datetime import UTC, datetime
from types import ModuleType

import pytest
import yaml
from conftest import ROOT, example
from prometheus_client.parser import text_string_to_metric_families

from driver.apps.slurm.health import WORKER_UNITS, health_of, with_observed_members
from driver.documents import load_json
from driver.request_check import check_request
from driver.role_code import role_code
from driver.runner.plan import RunPlan

monitoring = role_code("monitoring", "filter_plugins", "monitoring")
# slurm_output puts the readers' package on the import path
role_code("slurm_common", "filter_plugins", "slurm_output")


def reports() -> ModuleType:
    """The readers' reports module, where the record files are made."""
    return importlib.import_module("slurm_readers.reports")


RELEASE = {"app_slug": "slurm-reference", "app_version": "1.4.0", "bundle_version": "1.4.0"}
CONVERGED = {
    "operation_id": "op-1",
    "operation": "add_worker",
    "correlation_id": "corr-1",
    "instance_id": "5b0e8a52-0000-4000-8000-000000000001",
    "app_slug": "slurm-reference",
    "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    "at": "2026-12-04T05:06:07Z",
}


def _textfile(record: dict, kind: str) -> str:
    (_, metrics) = reports().slurm_record_files(
        record, kind, "/var/lib/slurm-app/x.json", "/var/lib/prometheus/node-exporter/x.prom"
    )
    assert metrics["path"].endswith(".prom") and metrics["mode"] == "0644"
    return metrics["content"]


def _query_answer(node: str, textfiles: list[str], units: dict[str, str], systemd: bool) -> dict:
    """What Prometheus's instant query answers for one member, its series built from what the
    member exports (the textfiles as the real parser reads them, as the scrape adds `job`,
    `instance` and the target file's `node`)."""
    stamp = 1796360000.5
    target = {"job": "node", "instance": "10.0.0.2:9100", "node": node}
    result = [
        {"metric": {"__name__": sample.name, **sample.labels, **target},
         "value": [stamp, repr(sample.value).removesuffix(".0")]}
        for text in textfiles
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]  # fmt: skip
    result += [
        {"metric": {"__name__": "node_systemd_unit_state", "name": f"{unit}.service",
                    "state": state, "type": "simple", **target}, "value": [stamp, "1"]}
        for unit, state in units.items()
    ]  # fmt: skip
    result.append(
        {"metric": {"__name__": "node_scrape_collector_success", "collector": "systemd", **target},
         "value": [stamp, "1" if systemd else "0"]}
    )  # fmt: skip
    # timestamp(up): the last scrape's time, the one series without a name
    result.append({"metric": target, "value": [stamp, "1796359990.25"]})
    return {"status": 200, "json": {"status": "success", "data": {"result": result}}}


def test_the_records_read_back_from_prometheus_as_they_were_written():
    textfiles = [_textfile(RELEASE, "release"), _textfile(CONVERGED, "converged_by")]
    answer = _query_answer("w1", textfiles, {"munge": "active", "slurmd": "inactive"}, True)
    members = monitoring.prometheus_members(answer)
    assert members["answers"] is True and members["error"] is None
    assert members["members"]["w1"] == {
        "units": {"munge": "running", "slurmd": "stopped"},
        "systemd_read": True,
        "release": RELEASE,
        "converged_by": CONVERGED,
        "at": datetime.fromtimestamp(1796359990.25, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def test_a_label_value_is_escaped_as_the_exposition_format_wants():
    record = {**RELEASE, "app_version": 'a"b\\c\nd'}
    (family,) = text_string_to_metric_families(_textfile(record, "release"))
    assert family.samples[0].labels["app_version"] == 'a"b\\c\nd'


def test_a_failed_query_names_why():
    assert monitoring.prometheus_members({"status": -1, "json": None}) == {
        "answers": False,
        "error": "Prometheus does not answer",
        "members": {},
    }
    bad = {"status": 400, "json": {"status": "error", "error": "parse error"}}
    assert monitoring.prometheus_members(bad)["error"] == "parse error"


def test_the_query_asks_for_the_records_by_the_names_they_are_written_under():
    names = {name for name, _ in reports().RECORD_METRICS.values()}
    assert names == {monitoring.RELEASE_METRIC, monitoring.CONVERGED_METRIC}
    assert all(name in monitoring.MEMBERS_QUERY for name in names)


def test_the_records_go_where_node_exporter_reads_text_files():
    common = yaml.safe_load((ROOT / "roles/slurm_common/vars/main.yml").read_text())
    exporter = yaml.safe_load((ROOT / "roles/monitoring/vars/main.yml").read_text())
    folder = exporter["__monitoring_node_exporter_textfile_dir"]
    for name in ("__slurm_common_release_metrics", "__slurm_common_converged_by_metrics"):
        assert common[name].rsplit("/", 1)[0] == folder
    worker = yaml.safe_load((ROOT / "roles/slurm_worker/vars/main.yml").read_text())
    assert tuple(worker["__slurm_worker_report_units"]) == WORKER_UNITS


def _plan(options: dict | None = None, monitoring_on: bool = True) -> RunPlan:
    data = example("slurm-reference/status")
    if options is not None:
        data["operation"]["options"] = options
    if not monitoring_on:
        data["instance"]["config"]["monitoring"] = {"enabled": False}
    checked = check_request(load_json(json.dumps(data)))
    assert checked.request is not None and checked.version is not None, checked.findings
    return RunPlan.of(checked.request, checked.version)


@pytest.mark.parametrize(
    ("options", "monitoring_on", "every_member"),
    [(None, True, 0), ({"read": "every_member"}, True, 1), (None, False, 1)],
)
def test_status_reads_every_member_when_asked_or_when_nothing_watches_them(
    options, monitoring_on, every_member
):
    inventory = _plan(options, monitoring_on).inventory
    assert inventory.extra_vars["slurm_app_status_every_member"] == every_member


def _workers(plan: RunPlan) -> list[str]:
    return sorted(plan.inventory.groups["slurm_workers"])


def _reported(plan: RunPlan, members: dict, targets: dict[str, str]) -> dict:
    controller_host = plan.inventory.groups["slurm_controller"][0]
    return {
        "slurm_app_controller": {
            "host": controller_host,
            "services": {"munge": "running", "slurmctld": "running"},
            "slurmctld_answers": True,
            "nodes": [
                {
                    "name": w,
                    "base_state": "idle",
                    "flags": [],
                    "state": "idle",
                    "version": "24.11.5",
                }
                for w in _workers(plan)
            ],
        },
        "slurm_app_monitoring": {
            "host": controller_host,
            "services": {"prometheus": "running"},
            "prometheus_answers": True,
            "targets": [
                {
                    "job": "node",
                    "node": w,
                    "instance": f"{w}:9100",
                    "health": health,
                    "last_error": "connection refused" if health == "down" else None,
                }
                for w, health in targets.items()
            ],
        },
        "slurm_app_observed": {"answers": True, "error": None, "members": members},
    }


def _member(units: dict[str, str], systemd_read: bool = True) -> dict:
    return {"units": units, "systemd_read": systemd_read, "release": RELEASE,
            "converged_by": CONVERGED, "at": "2026-12-04T05:06:07Z"}  # fmt: skip


def test_workers_read_through_prometheus_and_the_controllers_node_listing():
    plan = _plan()
    first, second = _workers(plan)[:2]
    members = {first: _member({"munge": "running", "slurmd": "running"}),
               second: _member({"munge": "running"})}  # fmt: skip
    reported = with_observed_members(
        plan.request, _reported(plan, members, {first: "up", second: "up"})
    )
    assert reported["slurm_app_workers"][first] == {
        "node": first,
        "services": {"munge": "running", "slurmd": "running"},
        "slurmd_version": "24.11.5",
    }
    # slurmd has no series: systemd did not load it (stopped, nothing wants it)
    assert reported["slurm_app_workers"][second]["services"]["slurmd"] == "stopped"
    assert reported["slurm_app_releases"][first] == RELEASE
    assert reported["slurm_app_converged_by"][first] == CONVERGED
    assert reported["slurm_app_observed_at"][first] == "2026-12-04T05:06:07Z"
    health = health_of(plan.request, reported)
    assert health["read"] == "through_controller" and health["unknown"] == {}
    assert f"{second}: slurmd is stopped" in health["problems"]


def test_a_worker_prometheus_cannot_answer_for_is_unknown_with_why():
    plan = _plan()
    down, blind = _workers(plan)[:2]
    members = {blind: _member({}, systemd_read=False)}
    reported = with_observed_members(
        plan.request, _reported(plan, members, {down: "down", blind: "up"})
    )
    assert reported["slurm_app_unknown"] == {
        down: "its node exporter does not answer: connection refused",
        blind: "its node exporter cannot read systemd (the systemd collector failed)",
    }
    unscraped = with_observed_members(plan.request, _reported(plan, {}, {down: "unknown"}))
    assert unscraped["slurm_app_unknown"] == {
        down: "its node exporter was not scraped yet",
        blind: "Prometheus has no scrape target for it",
    }
    assert reported["slurm_app_workers"][down]["services"] == dict.fromkeys(WORKER_UNITS, "unknown")
    health = health_of(plan.request, reported)
    assert health["unknown"] == reported["slurm_app_unknown"]
    # no evidence is no problem; the target down is one, and so would be Slurm's node state
    assert [p for p in health["problems"] if "unknown" in p] == []
    assert any(p.startswith(f"monitoring: node exporter on {down}") for p in health["problems"])
    failed = {"answers": False, "error": "Prometheus does not answer", "members": {}}
    reported = with_observed_members(
        plan.request, {**_reported(plan, {}, {}), "slurm_app_observed": failed}
    )
    assert set(reported["slurm_app_unknown"].values()) == {
        "Prometheus's query failed: Prometheus does not answer"
    }


def test_a_worker_read_over_ssh_is_kept_as_read():
    """A controller that is also a worker (same_node) is read itself."""
    plan = _plan()
    first = _workers(plan)[0]
    reported = _reported(plan, {}, {})
    reported["slurm_app_workers"] = {
        first: {"node": first, "services": {"munge": "running", "slurmd": "failed"},
                "slurmd_version": "24.11.5"}
    }  # fmt: skip
    observed = with_observed_members(plan.request, reported)
    assert observed["slurm_app_workers"][first]["services"]["slurmd"] == "failed"
    assert first not in observed["slurm_app_unknown"]
