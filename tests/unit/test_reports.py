"""The roles' reports for the driver's result (the controller's, a worker's: slurm_readers'
reports.py; the monitoring host's: the monitoring role's filter), built from answers as
slurm_common's read collects them: nodes as real 22.05 and 24.11 daemons print them, a stopped
daemon, an unanswering Prometheus. The reports run for real in every status and deploy
(e2e, Molecule)."""

import pytest
from conftest import ROOT
from slurm_readers.reports import slurm_controller_report, slurm_worker_report

from driver.role_code import role_code

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
monitoring = role_code("monitoring", "filter_plugins", "monitoring")
UNITS = "Id=munge.service\nLoadState=loaded\nActiveState=active\nSubState=running\n"
DF = (
    "   1B-blocks        Used       Avail Use% File                     Mounted on\n"
    "270553174016 29509292032 79435001856  28% /var/lib/slurm/slurmctld /\n"
)
FACTS = {
    "slurmctld_port": "6817",
    "munge_key": "/etc/munge/munge.key",
    "log_dir": "/var/log/slurm",
    "munge_log": "/var/log/munge/munged.log",
}
KNOWN = {
    "host": "c-ctl",
    "cluster_name": "research",
    "accounting": True,
    "container": True,
    "units": ["munge", "slurmctld"],
    "facts": FACTS,
    "conf_dir": "/etc/slurm",
    "fragments_dir": "/etc/slurm-app",
    "smoke_test": None,
}


def _answer(stdout: str, rc: int = 0) -> dict:
    return {"rc": rc, "stdout": stdout, "stderr": ""}


def _controller_read(version: str, slurmctld_rc: int = 0) -> dict:
    """Both forms of the node listing are read in the same round trip; only the version's
    answers (22.05 has no `scontrol --json`; 24.11's `sinfo --json` groups the nodes)."""
    folder = FIXTURES / version
    scontrol = folder / "scontrol-nodes.json"
    slurm = f"slurm {(folder / 'VERSION').read_text()}"
    return {
        "commands": {
            "controller_ping": _answer("Slurmctld(primary) at c-ctl is UP\n"),
            "controller_slurmctld": _answer(slurm, slurmctld_rc),
            "controller_munge": _answer("munge-0.5.15 (2022-12-20)\n"),
            "controller_nodes_sinfo": _answer(
                "" if scontrol.exists() else (folder / "sinfo.json").read_text(),
                1 if scontrol.exists() else 0,
            ),
            "controller_nodes_scontrol": _answer(
                scontrol.read_text() if scontrol.exists() else "", 0 if scontrol.exists() else 1
            ),
            "controller_clusters": _answer("research\n"),
            "controller_slurmdbd": _answer(slurm),
            "controller_units": _answer(UNITS),
            # df left out the missing path it was asked about (and said so on stderr)
            "controller_disks": _answer(DF, 1),
        },
        "urls": {},
    }  # fmt: skip


@pytest.mark.parametrize(("version", "node"), [("22.05", "cb-w01"), ("24.11", "ct-w01")])
def test_the_controller_report_reads_the_nodes_in_its_versions_form(version, node):
    report = slurm_controller_report(_controller_read(version), KNOWN)
    assert report["versions"]["slurmctld"].startswith(version)
    assert report["versions"]["slurmdbd"] == report["versions"]["slurmctld"]
    assert report["versions"]["munge"] == "0.5.15"
    assert [each["name"] for each in report["nodes"]] == [node]
    assert report["slurmctld_answers"] and report["accounting_answers"]
    assert report["services"] == {"munge": "running", "slurmctld": "absent"}
    assert report["slurmctld_port"] == 6817
    assert report["disks"] == [
        {
            "path": "/var/lib/slurm/slurmctld",
            "mount": "/",
            "size_bytes": 270553174016,
            "used_bytes": 29509292032,
            "percent": 28,
        }
    ]
    assert report["profile"] == "container"
    assert report["config_paths"]["slurmdbd_conf"] == "/etc/slurm/slurmdbd.conf"
    assert report["log_paths"] == {
        "slurmctld": "/var/log/slurm/slurmctld.log",
        "munge": "/var/log/munge/munged.log",
        "slurmdbd": "/var/log/slurm/slurmdbd.log",
    }


def test_a_stopped_slurmctld_is_reported_not_a_failure():
    read = _controller_read("24.11", slurmctld_rc=1)
    read["commands"]["controller_ping"] = _answer("Slurmctld(primary) at c-ctl is DOWN\n", 1)
    read["commands"]["controller_clusters"] = _answer("", 1)
    report = slurm_controller_report(read, {**KNOWN, "container": False})
    assert report["versions"]["slurmctld"] == "" and report["nodes"] == []
    assert not report["slurmctld_answers"] and not report["accounting_answers"]
    assert report["profile"] == "production"


def test_without_accounting_the_report_names_no_slurmdbd():
    read = _controller_read("22.05")
    for name in ("controller_clusters", "controller_slurmdbd"):
        del read["commands"][name]  # not read without accounting
    report = slurm_controller_report(read, {**KNOWN, "accounting": False})
    assert "slurmdbd" not in report["versions"] and "slurmdbd" not in report["log_paths"]
    assert "slurmdbd_conf" not in report["config_paths"]
    assert report["accounting"] is False and report["accounting_answers"] is False


@pytest.mark.parametrize(("rc", "version"), [(0, "24.11.5"), (127, None)])
def test_a_workers_report(rc, version):
    read = {"commands": {"worker_slurmd": _answer("slurm 24.11.5\n", rc),
                         "worker_units": _answer(UNITS)}}  # fmt: skip
    assert slurm_worker_report(read, {"node": "w1", "units": ["munge", "slurmd"]}) == {
        "node": "w1",
        "services": {"munge": "running", "slurmd": "absent"},
        "slurmd_version": version,
    }


MONITORING_KNOWN = {
    "host": "c-ctl",
    "services": {"prometheus": "running"},
    "disks": [],
    "scrape_interval": "30s",
    "grafana": False,
    "grafana_url": "https://c-ctl:3000/",
    "ports": {"prometheus": "127.0.0.1:9090"},
    "paths": {"alert_rules": "/etc/prometheus/rules.d/slurm-app.yml"},
}


def test_the_monitoring_report_reads_prometheus_answers():
    read = {
        "urls": {
            "monitoring_targets": {"status": 200, "json": {"data": {"activeTargets": [
                {"labels": {"job": "node", "node": "w1", "instance": "10.0.0.2:9100"},
                 "health": "up"}]}}},
            "monitoring_flags": {"status": 200, "json": {"data": {
                "storage.tsdb.retention.time": "15d", "web.listen-address": "127.0.0.1:9090"}}},
            "monitoring_alerts": {"status": 200, "json": {"data": {"alerts": [
                {"labels": {"alertname": "TargetDown"}, "state": "firing"}]}}},
        }
    }  # fmt: skip
    report = monitoring.monitoring_report(read, MONITORING_KNOWN)
    assert report["prometheus_answers"] is True
    assert [t["node"] for t in report["targets"]] == ["w1"]
    assert [a["name"] for a in report["alerts"]] == ["TargetDown"]
    assert report["prometheus_flags"] == {
        "retention_time": "15d",
        "retention_size": None,
        "wal_compression": None,
        "listen_address": "127.0.0.1:9090",
    }
    assert report["grafana_url"] is None  # no Grafana: no link
    assert report["ports"] == MONITORING_KNOWN["ports"]


def test_a_prometheus_that_does_not_answer_is_reported():
    silent = {"status": -1, "json": None}
    read = {
        "urls": dict.fromkeys(
            ("monitoring_targets", "monitoring_flags", "monitoring_alerts"), silent
        )
    }
    report = monitoring.monitoring_report(read, {**MONITORING_KNOWN, "grafana": True})
    assert report["prometheus_answers"] is False
    assert report["targets"] == [] and report["alerts"] == []
    assert set(report["prometheus_flags"].values()) == {None}
    assert report["grafana_url"] == "https://c-ctl:3000/"
