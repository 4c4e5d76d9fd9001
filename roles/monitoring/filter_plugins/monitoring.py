"""Filters of the monitoring role: Prometheus's units, target list and alerts, the monitoring
host's report, and scrape-target files."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

# Prometheus's own units: durations in seconds, sizes in powers of 1024 (its ParseBytes).
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_BYTES = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "PB": 1 << 50}


def prometheus_seconds(duration: str) -> int:
    """'30s' -> 30, '2m' -> 120: the forms the manifest's patterns allow."""
    match = re.fullmatch(r"([1-9][0-9]*)([smhdwy])", str(duration))
    if match is None:
        raise ValueError(f"not a Prometheus duration: {duration!r}")
    return int(match.group(1)) * _SECONDS[match.group(2)]


def prometheus_bytes(size: str) -> int:
    """'5GB' -> 5368709120, as Prometheus reads --storage.tsdb.retention.size."""
    match = re.fullmatch(r"([1-9][0-9]*)(B|KB|MB|GB|TB|PB)", str(size))
    if match is None:
        raise ValueError(f"not a Prometheus size: {size!r}")
    return int(match.group(1)) * _BYTES[match.group(2)]


def host_port(address: str, port: int) -> str:
    """address:port, with an IPv6 address in brackets."""
    return f"[{address}]:{port}" if ":" in address else f"{address}:{port}"


def scrape_targets(
    member: dict[str, Any], node_exporter_port: int, dcgm_exporter_port: int | None
) -> list[dict[str, Any]]:
    """The target groups of one member's file: its node_exporter, and its dcgm-exporter when it
    has GPUs (dcgm_exporter_port None: dcgm-exporter is not installed anywhere)."""
    labels = {"node": str(member["node"])}
    groups = [
        {
            "targets": [host_port(str(member["address"]), node_exporter_port)],
            "labels": {"job": "node", **labels},
        }
    ]
    if dcgm_exporter_port is not None and int(member.get("gpus") or 0) > 0:
        groups.append(
            {
                "targets": [host_port(str(member["address"]), dcgm_exporter_port)],
                "labels": {"job": "dcgm", **labels},
            }
        )
    return groups


def prometheus_targets(response: dict[str, Any]) -> list[dict[str, Any]]:
    """/api/v1/targets -> one entry per active target: job, node, instance, health
    (up / down / unknown = not scraped yet) and the last scrape's error."""
    active = ((response or {}).get("data") or {}).get("activeTargets") or []
    targets = [
        {
            "job": target.get("labels", {}).get("job"),
            "node": target.get("labels", {}).get("node"),
            "instance": target.get("labels", {}).get("instance"),
            "health": target.get("health", "unknown"),
            "last_error": target.get("lastError") or None,
        }
        for target in active
    ]
    return sorted(targets, key=lambda t: (str(t["job"]), str(t["node"]), str(t["instance"])))


def prometheus_alerts(response: dict[str, Any] | None) -> list[dict[str, Any]]:
    """/api/v1/alerts -> the firing alerts (pending ones have not lasted their `for` yet):
    name, severity, node, summary and since when."""
    alerts = ((response or {}).get("data") or {}).get("alerts") or []
    return [
        {
            "name": alert.get("labels", {}).get("alertname"),
            "severity": alert.get("labels", {}).get("severity"),
            "node": alert.get("labels", {}).get("node"),
            "summary": (alert.get("annotations") or {}).get("summary"),
            "since": alert.get("activeAt"),
        }
        for alert in alerts
        if alert.get("state") == "firing"
    ]


# What status asks Prometheus of every member in one query: its units' states (the systemd
# collector's, `unit_state == 1`: the state it is in), whether that collector could read
# systemd, and the records slurm_common's release_record writes for the textfile collector
# (their names are slurm_readers/reports.py's RECORD_METRICS; a unit test holds them equal).
RELEASE_METRIC = "slurm_app_release_info"
CONVERGED_METRIC = "slurm_app_converged_by_timestamp_seconds"
# `timestamp(up)`, the last scrape's time, is the one series without a name: an instant
# query's own stamp is the evaluation's time.
MEMBERS_QUERY = (
    'node_systemd_unit_state{job="node"} == 1'
    ' or node_scrape_collector_success{job="node",collector="systemd"}'
    f' or {{job="node",__name__=~"{RELEASE_METRIC}|{CONVERGED_METRIC}"}}'
    ' or timestamp(up{job="node"})'
)
# systemd's active states as the members' reports word them (slurm_unit_states)
_UNIT_STATES = {"active": "running", "failed": "failed"}


def prometheus_members_url(base: str) -> str:
    """The instant query of MEMBERS_QUERY on Prometheus at `base`."""
    return f"{base}/api/v1/query?{urlencode({'query': MEMBERS_QUERY})}"


def prometheus_members(answer: dict[str, Any]) -> dict[str, Any]:
    """slurm_common's read of MEMBERS_QUERY's URL -> {answers, error, members: {node: {units,
    systemd_read, release, converged_by, at}}}: each node exporter's last scrape of its member
    (a stopped target's series go stale at once, so a member whose exporter does not answer is
    absent). units: unit (without .service) -> running / failed / stopped; release and
    converged_by: the records (None where none is exported); at: when it was last scraped."""
    body = answer.get("json") or {}
    if answer.get("status") != 200 or body.get("status") != "success":
        status = answer.get("status")
        error = body.get("error") or (
            "Prometheus does not answer" if status == -1 else f"Prometheus answered HTTP {status}"
        )
        return {"answers": False, "error": str(error), "members": {}}
    members: dict[str, dict[str, Any]] = {}
    for series in (body.get("data") or {}).get("result") or []:
        labels = dict(series.get("metric") or {})
        _, value = series.get("value") or (0, "0")
        node = labels.pop("node", None)
        if node is None:
            continue
        member = members.setdefault(
            node,
            {"units": {}, "systemd_read": False, "release": None, "converged_by": None, "at": 0.0},
        )
        name = labels.pop("__name__", "")
        for label in ("job", "instance"):
            labels.pop(label, None)
        if not name:
            member["at"] = float(value)
        elif name == "node_systemd_unit_state":
            unit = labels.get("name", "").removesuffix(".service")
            member["units"][unit] = _UNIT_STATES.get(labels.get("state", ""), "stopped")
        elif name == "node_scrape_collector_success":
            member["systemd_read"] = value == "1"
        elif name == RELEASE_METRIC:
            member["release"] = labels
        elif name == CONVERGED_METRIC:
            at = datetime.fromtimestamp(float(value), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            member["converged_by"] = {**labels, "at": at}
    for member in members.values():
        member["at"] = datetime.fromtimestamp(member["at"], tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"answers": True, "error": None, "members": members}


# Prometheus's command-line flags the report shows, by the name the report gives them.
REPORTED_FLAGS = {
    "retention_time": "storage.tsdb.retention.time",
    "retention_size": "storage.tsdb.retention.size",
    "wal_compression": "storage.tsdb.wal-compression",
    "listen_address": "web.listen-address",
}


def monitoring_report(read: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """The monitoring host's report for the driver, from the answers slurm_common's read
    collected (`slurm_common_read`) and what the role knows (`known`: host, services (its units'
    states), disks (its data's filesystem), scrape_interval, grafana, grafana_url, ports, paths):
    whether Prometheus answers, every scrape target's health, the firing alerts and the flags
    Prometheus runs with. What is down is reported, not a failure."""
    urls = read["urls"]
    flags = ((urls["monitoring_flags"].get("json") or {}).get("data")) or {}
    return {
        "host": known["host"],
        "services": known["services"],
        "disks": known["disks"],
        "prometheus_answers": urls["monitoring_targets"].get("status") == 200,
        "targets": prometheus_targets(urls["monitoring_targets"].get("json") or {}),
        "alerts": prometheus_alerts(urls["monitoring_alerts"].get("json") or {}),
        "prometheus_flags": {name: flags.get(flag) for name, flag in REPORTED_FLAGS.items()},
        "scrape_interval": known["scrape_interval"],
        "grafana": known["grafana"],
        "grafana_url": known["grafana_url"] if known["grafana"] else None,
        "ports": known["ports"],
        "paths": known["paths"],
    }


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "prometheus_seconds": prometheus_seconds,
            "prometheus_bytes": prometheus_bytes,
            "prometheus_targets": prometheus_targets,
            "prometheus_alerts": prometheus_alerts,
            "prometheus_members": prometheus_members,
            "prometheus_members_url": prometheus_members_url,
            "monitoring_report": monitoring_report,
            "scrape_targets": scrape_targets,
            "host_port": host_port,
        }
