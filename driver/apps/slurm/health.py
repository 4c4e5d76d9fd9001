"""A cluster's health from what its roles reported: every daemon, node and monitoring target."""

from collections.abc import Collection
from typing import Any

from driver.models.request import MemberStatus, OperationRequest

# The units a worker's report holds (slurm_worker's __slurm_worker_report_units; a unit test
# holds them equal).
WORKER_UNITS = ("munge", "slurmd")
# Node states that mean a node cannot run jobs although nobody asked for it (a drain is asked).
UNHEALTHY_NODE_STATES = {"down", "fail", "failing", "unknown", "future"}
UNHEALTHY_NODE_FLAGS = {"not_responding", "fail", "invalid_reg"}
# slurm_controller's slurm.conf SlurmUser: the user slurmctld records for a drain it made itself
# (a prolog or epilog that failed, a job it could not end), which nobody asked for.
SLURM_USER = "slurm"
NODE_PROBLEMS_LISTED = 20
# A watched filesystem (the queue's state, the accounting database, Prometheus's data) this full
# or more degrades the cluster: time to grow it before a daemon stops on a full disk.
DISK_FULL_PERCENT = 85


def with_observed_members(request: OperationRequest, reported: dict[str, Any]) -> dict[str, Any]:
    """`reported` with every worker the run did not read itself (status through the
    controller) as the monitoring host's Prometheus holds it: its units, slurmd's version (the
    controller's node listing), its release and last converge. A worker Prometheus cannot answer
    for is in slurm_app_unknown with why; its units are `unknown`. Unchanged where the run read
    every member (no slurm_app_observed)."""
    observed = reported.get("slurm_app_observed")
    if observed is None:
        return reported
    workers = dict(reported.get("slurm_app_workers") or {})
    releases = dict(reported.get("slurm_app_releases") or {})
    converged_by = dict(reported.get("slurm_app_converged_by") or {})
    controller = reported.get("slurm_app_controller") or {}
    versions = {node.get("name"): node.get("version") for node in controller.get("nodes") or []}
    targets = {
        target.get("node"): target
        for target in (reported.get("slurm_app_monitoring") or {}).get("targets") or []
        if target.get("job") == "node"
    }
    unknown: dict[str, str] = {}
    observed_at: dict[str, str] = {}
    for host in _worker_hosts(request):
        if host in workers:
            continue
        member = (observed.get("members") or {}).get(host)
        why = _not_observed_because(observed, member, targets.get(host))
        if why is not None:
            unknown[host] = why
            workers[host] = {
                "node": host,
                "services": dict.fromkeys(WORKER_UNITS, "unknown"),
                "slurmd_version": versions.get(host),
            }
            continue
        assert member is not None  # _not_observed_because names a missing member
        workers[host] = {
            "node": host,
            # a unit systemd has not loaded (stopped, nothing wants it) has no series
            "services": {unit: member["units"].get(unit, "stopped") for unit in WORKER_UNITS},
            "slurmd_version": versions.get(host),
        }
        releases[host] = member.get("release")
        converged_by[host] = member.get("converged_by")
        observed_at[host] = member["at"]
    return {
        **reported,
        "slurm_app_workers": workers,
        "slurm_app_releases": releases,
        "slurm_app_converged_by": converged_by,
        "slurm_app_unknown": unknown,
        "slurm_app_observed_at": observed_at,
    }


def _not_observed_because(
    observed: dict[str, Any], member: dict[str, Any] | None, target: dict[str, Any] | None
) -> str | None:
    """Why Prometheus cannot answer for a worker; None when it can."""
    if not observed.get("answers"):
        return f"Prometheus's query failed: {observed.get('error')}"
    if target is not None and target.get("health") == "down":
        error = f": {target['last_error']}" if target.get("last_error") else ""
        return f"its node exporter does not answer{error}"
    if member is not None and member.get("systemd_read"):
        return None
    if member is not None:
        return "its node exporter cannot read systemd (the systemd collector failed)"
    if target is None:
        return "Prometheus has no scrape target for it"
    return "its node exporter was not scraped yet"


def health_of(
    request: OperationRequest, reported: dict[str, Any], asked: Collection[str] | None = None
) -> dict[str, Any]:
    """healthy / degraded / failed, with the evidence: every daemon's state, the nodes that
    cannot run jobs and why, accounting, the workers that did not answer, how full the
    watched filesystems are and how the last backup went. `asked`: the hosts the run asked (a
    targeted operation's inventory); None: every member was asked. `reported` as
    with_observed_members gives it."""
    controller = reported.get("slurm_app_controller") or {}
    workers = reported.get("slurm_app_workers") or {}
    services: dict[str, str] = controller.get("services") or {}
    fatal: list[str] = []
    problems: list[str] = []
    for daemon in ("munge", "slurmctld"):
        if services.get(daemon) != "running":
            fatal.append(f"{controller.get('host')}: {daemon} is {services.get(daemon, 'absent')}")
    if not controller.get("slurmctld_answers"):
        fatal.append("slurmctld does not answer `scontrol ping`")
    if controller.get("accounting"):
        for daemon in ("mariadb", "slurmdbd"):
            if services.get(daemon) != "running":
                problems.append(
                    f"{controller.get('host')}: {daemon} is {services.get(daemon, 'absent')}"
                )
        if not controller.get("accounting_answers"):
            problems.append("slurmdbd does not answer `sacctmgr show cluster`")
    unknown: dict[str, str] = reported.get("slurm_app_unknown") or {}
    worker_hosts = [h for h in _worker_hosts(request) if asked is None or h in asked]
    for host in worker_hosts:
        report = workers.get(host)
        if report is None:
            problems.append(f"{host}: did not answer")
            continue
        # no evidence either way: what made Prometheus blind (its target down, Prometheus
        # down) is a problem of its own, and Slurm's node state still speaks for the node
        if host not in unknown:
            problems += _not_running(host, report.get("services"))
    problems += _monitoring_problems(reported)
    problems += _node_problems(controller.get("nodes") or [])
    disks = _disks(reported)
    problems += [
        f"{disk['host']}: {disk['path']} is on a filesystem {disk['percent']} % full "
        f"({disk['mount']}; {DISK_FULL_PERCENT} % or more)"
        for disk in disks
        if disk["percent"] >= DISK_FULL_PERCENT
    ]
    backup = controller.get("backup")
    problems += _backup_problems(backup)
    classification = "failed" if fatal else "degraded" if problems else "healthy"
    return {
        "classification": classification,
        "problems": fatal + problems,
        "services": {
            str(controller.get("host")): services,
            **{host: (workers.get(host) or {}).get("services") for host in worker_hosts},
        },
        "accounting_reachable": controller.get("accounting_answers"),
        "disks": disks,
        "backup": backup,
        "read": "through_controller" if "slurm_app_observed" in reported else "every_member",
        "unknown": unknown,
        "observed_at": reported.get("slurm_app_observed_at") or {},
    }


def _node_problems(nodes: list[dict[str, Any]]) -> list[str]:
    """Each node that cannot run jobs, with what its state flags say (a node that does not
    answer may still be `idle` to slurmctld); past NODE_PROBLEMS_LISTED, one line counts the
    rest, so that a large cluster's outage stays readable (`nodes` has every node)."""
    found = []
    for node in nodes:
        flags = set(node.get("flags") or [])
        if "drain" in flags and node.get("reason_set_by") == SLURM_USER:
            found.append(f"node {node.get('name')} is {node.get('state')} by Slurm itself"
                         f" ({node.get('reason')})")  # fmt: skip
        elif node.get("base_state") in UNHEALTHY_NODE_STATES or flags & UNHEALTHY_NODE_FLAGS:
            why = ", ".join(flag.replace("_", " ") for flag in sorted(flags & UNHEALTHY_NODE_FLAGS))
            reason = f" ({node['reason']})" if node.get("reason") else ""
            found.append(f"node {node.get('name')} is {node.get('state')}"
                         f"{', ' + why if why else ''}{reason}")  # fmt: skip
    if len(found) > NODE_PROBLEMS_LISTED:
        more = len(found) - NODE_PROBLEMS_LISTED
        return [*found[:NODE_PROBLEMS_LISTED], f"and {more} more nodes that cannot run jobs"]
    return found


def _backup_problems(backup: dict[str, Any] | None) -> list[str]:
    """A last backup that failed, and scheduled backups none of which succeeded for two
    intervals: the recovery point is further back than promised."""
    if not backup:
        return []
    problems = []
    attempt = backup.get("last_attempt") or {}
    if attempt and not attempt.get("ok"):
        problems.append(f"the last backup failed at {attempt.get('at')}: {attempt.get('reason')}")
    if backup.get("overdue"):
        success = backup.get("last_success")
        since = f"the last one {success.get('age_s')} s ago" if success else "none yet"
        problems.append(
            f"no backup succeeded for two intervals ({backup.get('interval_s')} s each; {since})"
        )
    return problems


def _disks(reported: dict[str, Any]) -> list[dict[str, Any]]:
    """The watched filesystems, each with the host it is on: the controller's (state,
    accounting, the platform's mount that holds the backups) and the monitoring host's
    (Prometheus's data)."""
    return [
        {"host": report.get("host"), **disk}
        for report in (reported.get("slurm_app_controller"), reported.get("slurm_app_monitoring"))
        for disk in (report or {}).get("disks") or []
    ]


def _not_running(host: Any, units: dict[str, str] | None) -> list[str]:
    """`host: unit is state` for each of the host's units that does not run."""
    return [
        f"{host}: {unit} is {state}"
        for unit, state in sorted((units or {}).items())
        if state != "running"
    ]


def _monitoring_problems(reported: dict[str, Any]) -> list[str]:
    """What is wrong with the monitoring stack: a deploy's monitoring failure, a daemon down,
    Prometheus not answering, a scrape target down, an exporter stopped (read from systemd,
    before Prometheus notices), an alert firing."""
    monitoring = reported.get("slurm_app_monitoring")
    problems: list[str] = [
        f"monitoring: {host}: {reason}"
        for host, reason in sorted((reported.get("slurm_app_monitoring_failed") or {}).items())
    ]
    for host, units in sorted((reported.get("slurm_app_exporters") or {}).items()):
        problems += _not_running(host, units)
    if not monitoring:
        return problems
    host = monitoring.get("host")
    problems += _not_running(host, monitoring.get("services"))
    if not monitoring.get("prometheus_answers"):
        problems.append(f"{host}: Prometheus does not answer")
    for target in monitoring.get("targets") or []:
        if target.get("health") == "down":
            error = f": {target['last_error']}" if target.get("last_error") else ""
            problems.append(
                f"monitoring: {target.get('job')} exporter on {target.get('node')} "
                f"({target.get('instance')}) is down{error}"
            )
    # What the alert rules found (disk pressure, Slurm unreadable, nodes down); an `info`
    # alert (retention near its cap: the oldest data goes first, as configured) is no problem.
    for alert in monitoring.get("alerts") or []:
        if alert.get("severity") != "info":
            since = f" since {alert['since']}" if alert.get("since") else ""
            problems.append(
                f"alert {alert.get('name')} firing on {alert.get('node') or host}{since}: "
                f"{alert.get('summary') or 'no summary'}"
            )
    return problems


def _worker_hosts(request: OperationRequest) -> list[str]:
    hosts = []
    for member in request.members:
        if member.component_key == "worker" and member.status not in (
            MemberStatus.REMOVED,
            MemberStatus.PENDING,
        ):
            allocation = request.allocation(member.allocation_id)
            if allocation is not None:
                hosts.append(allocation.hostname)
    return hosts
