"""What the driver knows about the slurm-reference app beyond its manifest."""

import importlib.util
from collections import Counter
from collections.abc import Collection, Iterator
from functools import cache
from pathlib import Path, PurePosixPath
from types import ModuleType
from typing import Any, ClassVar
from uuid import UUID

import yaml

from driver.apps.base import AppAdapter, OperationError, Violation, observed
from driver.catalog import bundle_root
from driver.documents import LinePath
from driver.events import Health, InstanceStatus, connection_reason
from driver.inventory import Inventory, apply_defaults
from driver.models.manifest import Version
from driver.models.request import MemberStatus, OperationRequest
from driver.site import load_site
from driver.site import role_vars as site_role_vars

# What the result shows of each node the controller reports (slurm_common's slurm_nodes).
NODE_FIELDS = (
    "name",
    "state",
    "reason",
    "cpus",
    "alloc_cpus",
    "real_memory",
    "gres",
    "gpus",
    "partitions",
)


# Operation options -> the role variable that receives each (defaults from the options schema).
OPTION_VARS = {
    "wait_idle_timeout_s": "slurm_worker_wait_idle_timeout",
    "drain_timeout_s": "slurm_controller_drain_timeout",
    "reason": "slurm_controller_drain_reason",
    "force": "slurm_controller_remove_force",
    "preview": "slurm_common_clean_preview",
}
PENDING_OPTIONS: dict[str, str] = {}
# The operations whose playbooks include the monitoring role (drain, resume and the lifecycle
# leave the monitoring stack alone).
MONITORING_OPERATIONS = {
    "deploy",
    "add_worker",
    "remove_worker",
    "replace_worker",
    "status",
    "decommission",
}
# The operations that prepare workers (slurm_worker's main): where the runtimes are installed.
JOINING_OPERATIONS = {"deploy", "add_worker", "replace_worker"}
# They go on without a worker whose host does not answer (preflight's slurm_app_may_be_gone)
LIFECYCLE_OPERATIONS = {"start", "stop", "restart"}
# Node states that mean a node cannot run jobs although nobody asked for it (a drain is asked).
UNHEALTHY_NODE_STATES = {"down", "fail", "failing", "unknown", "future"}
UNHEALTHY_NODE_FLAGS = {"not_responding", "fail", "invalid_reg"}


# slurm_common refuses a cluster user whose name a host already has (the image's login user, a
# service account) as a user or group it did not create: the portal's companion host too.
ACCOUNT_EXISTS = OperationError(
    "a cluster user's name is an account the host already had (not created by this bundle); "
    "nothing was changed on that host",
    None,
    (InstanceStatus.FAILED, Health.UNKNOWN),
)


# storage.model platform_mount: a host whose mount is missing, not writable or not the
# controller's (slurm_common's storage_check.yml), found before anything was installed.
STORAGE_NOT_SHARED = OperationError(
    "the platform's storage is not mounted, not writable or not shared on a host; nothing was "
    "changed on any host",
    None,
    (InstanceStatus.FAILED, Health.UNKNOWN),
)


# storage.model platform_mount: a link, a folder not root's alone, or another uid's folder
# where the roles' homes or job directories go (slurm_common's slurm_folder), found before
# anything was changed: what a cluster user planted on the mount is never followed.
STORAGE_CONFLICT = OperationError(
    "a symbolic link, or a folder that another uid owns, is where the bundle's folders go on "
    "the platform's storage (the path is named); nothing was changed on any host",
    None,
    (InstanceStatus.FAILED, Health.UNKNOWN),
)


def storage_vars(config: dict[str, Any]) -> dict[str, Any]:
    """slurm_common's storage variables from a cluster config's `storage` (defaults applied)."""
    storage = config.get("storage") or {}
    return {
        "slurm_common_storage_model": storage.get("model", "allocation_local"),
        "slurm_common_storage_mount_path": storage.get("mount_path", "/workspace"),
        "slurm_common_storage_holds": storage.get("holds", "homes"),
    }


class SlurmReference(AppAdapter):
    slug = "slurm-reference"
    operation_errors: ClassVar[dict[str, OperationError]] = {
        "drain_timeout": OperationError(
            "jobs still ran on the node when drain_timeout_s ran out; it stays draining and "
            "no job was touched",
            MemberStatus.DRAINING,
            (InstanceStatus.RUNNING, Health.UNKNOWN),
        ),
        "node_busy": OperationError(
            "jobs run on the node and force is false; nothing was changed",
            None,
            (InstanceStatus.RUNNING, Health.UNKNOWN),
        ),
        "account_exists": ACCOUNT_EXISTS,
        "storage_not_shared": STORAGE_NOT_SHARED,
        "storage_conflict": STORAGE_CONFLICT,
        "no_node_in_service": OperationError(
            "every node the readiness job would run on is drained, so no job can prove the "
            "cluster ready; the operation's changes are applied and the nodes stay drained "
            "until resumed",
            None,
            (InstanceStatus.RUNNING, Health.DEGRADED),
        ),
        "config_refused": OperationError(
            "the new config cannot be applied to the running cluster; nothing was changed",
            None,
            (InstanceStatus.RUNNING, Health.UNKNOWN),
        ),
    }
    address_fields = (
        (("monitoring", "alerting", "webhook", "url"), "url"),
        (("monitoring", "alerting", "email", "smarthost"), "relay"),
        (("monitoring", "grafana", "oidc", "issuer_url"), "url"),
    )
    config_fields = frozenset(
        {
            "cluster_name",
            "partitions",
            "accounting",
            "users",
            "monitoring",
            "storage",
            "interactive_runtimes",
        }
    )

    def rules(self, request: OperationRequest, version: Version) -> Iterator[Violation]:
        yield from _placement_rules(request)
        yield from self.config_rules(request.instance.config, ("instance", "config"))
        yield from login_user_rules(request, request.instance.config, ("instance", "config"))

    def config_rules(self, config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
        return _config_rules(config, base)

    def inventory_vars(
        self, request: OperationRequest, version: Version, inventory: Inventory
    ) -> None:
        """Role variables from the config and the options (defaults applied), and
        same_node's controller-as-worker."""
        config = apply_defaults(version.config_schema, request.instance.config)
        placement = request.instance.placement_intent
        if request.operation.type == "deploy" and placement.get("worker_placement") == "same_node":
            controller = request.allocation(UUID(placement["controller_allocation_id"]))
            if controller is not None:
                inventory.add(
                    controller, ["slurm_workers"], request.credentials.ssh_private_key_file
                )
        accounting = config["accounting"]
        inventory.group_vars.update(
            {
                "slurm_controller_cluster_name": config["cluster_name"],
                "slurm_controller_partitions": config["partitions"],
                "slurm_controller_accounting_enabled": accounting["enabled"],
                "slurm_controller_default_account": accounting["default_account"],
                "slurm_controller_accounts": accounting["accounts"],
                "slurm_controller_qos": accounting["qos"],
                "slurm_controller_priority": accounting.get("fair_share") or {},
                "slurm_common_users": config["users"],
                "slurm_common_munge_key_src": request.credentials.munge_key_file or "",
                **storage_vars(config),
            }
        )
        if request.operation.type in MONITORING_OPERATIONS:
            inventory.group_vars.update(monitoring_vars(request, config["monitoring"]))
        if request.operation.type in JOINING_OPERATIONS:
            inventory.group_vars["slurm_worker_interactive_runtimes"] = config[
                "interactive_runtimes"
            ]
        spec = version.operation(request.operation.type)
        schema = spec.options_schema if spec is not None else {}
        options = apply_defaults(schema, request.operation.options)
        for option, value in options.items():
            if option in OPTION_VARS:
                inventory.group_vars[OPTION_VARS[option]] = value
        # drain, resume and remove act on one node; a join of several names them in the
        # inventory's slurm_workers
        if request.operation.target is not None:
            allocation = request.allocation(request.operation.target.allocation_id)
            if allocation is not None:  # validation guarantees it
                inventory.group_vars["slurm_controller_target_node"] = allocation.hostname
        # replace_worker: both workers are in slurm_workers; its plays tell them apart
        if request.operation.replacement is not None and request.operation.target is not None:
            hosts = inventory.allocation_hosts
            inventory.groups["slurm_app_replaced"] = [hosts[request.operation.target.allocation_id]]
            inventory.groups["slurm_app_replacement"] = [
                hosts[request.operation.replacement.allocation_id]
            ]

    def observed_state(
        self, request: OperationRequest, reported: dict[str, Any]
    ) -> tuple[InstanceStatus, Health] | None:
        if request.operation.type == "status":
            return observed(health_of(request, reported)["classification"])
        # a deploy whose monitoring stack failed still made a cluster that runs jobs
        if reported.get("slurm_app_monitoring_failed"):
            return observed("degraded")
        if self.hosts_left_out(request, reported):
            if request.operation.type == "stop":
                return InstanceStatus.STOPPED, Health.DEGRADED
            return observed("degraded")
        return None

    def hosts_left_out(self, request: OperationRequest, reported: dict[str, Any]) -> set[str]:
        if request.operation.type in LIFECYCLE_OPERATIONS:
            return set(reported.get("slurm_app_not_reached") or {})
        return set()

    def hosts_done(self, request: OperationRequest, reported: dict[str, Any]) -> set[str] | None:
        # a worker reports its daemons only once it joined (add_worker, replace_worker's
        # replacement): one that failed before, or was never reached, is not in the report
        if request.operation.type in JOINING_OPERATIONS - {"deploy"}:
            return set(reported.get("slurm_app_workers") or {})
        return None

    def previews(self, request: OperationRequest) -> bool:
        return request.operation.type == "decommission" and bool(
            request.operation.options.get("preview")
        )

    def detail(
        self,
        request: OperationRequest,
        inventory: Inventory,
        reported: dict[str, Any],
        failed: bool,
    ) -> dict[str, Any]:
        if request.operation.type in LIFECYCLE_OPERATIONS:
            return hosts_not_reached(reported, "not_reached")
        controller = reported.get("slurm_app_controller") or {}
        if not controller:
            return teardown_data(reported, self.previews(request))
        detail: dict[str, Any] = {
            "cluster_name": controller.get("cluster_name"),
            "daemon_versions": {
                **controller.get("versions", {}),
                "slurmd": {
                    report["node"]: report["slurmd_version"]
                    for report in (reported.get("slurm_app_workers") or {}).values()
                    if report.get("slurmd_version")
                },
            },
            "nodes": [
                {field: node.get(field) for field in NODE_FIELDS}
                for node in controller.get("nodes", [])
            ],
            "accounting": controller.get("accounting"),
            "profile": controller.get("profile"),
            "readiness": _readiness(controller.get("smoke_test")),
        }
        if reported.get("slurm_app_monitoring"):
            detail["monitoring"] = reported["slurm_app_monitoring"]
        if reported.get("slurm_app_key_rotation"):
            detail["munge_key"] = reported["slurm_app_key_rotation"]
        if "services" in controller:
            detail["health"] = health_of(request, reported, asked=inventory.hosts)
        detail.update(teardown_data(reported, preview=False))
        # An access bundle is a promise that there is a cluster to use: only after a success.
        if not failed:
            users = request.instance.config.get("users") or []
            detail["access_bundle"] = access_bundle(
                request,
                controller,
                reported.get("slurm_app_worker_files") or {},
                users[0]["name"] if users else None,
                reported.get("slurm_app_monitoring"),
            )
        return detail


# What a teardown's removed paths held, for the result: the first prefix that matches
# (most specific first).
DESTROYED_KINDS = (
    ("/home/", "home directory: the user's files and job output"),
    ("/var/lib/mysql", "accounting database: every job record and association"),
    ("/var/lib/slurm-app", "the bundle's records of the last deploy"),
    ("/var/lib/slurm", "Slurm state and spool: queued jobs, node states, job scripts"),
    ("/var/lib/prometheus", "Prometheus's metrics history"),
    ("/var/lib/grafana", "Grafana's database: users, sessions, dashboard edits"),
    ("/var/log/", "logs"),
    ("/etc/munge", "munge key"),
    ("/var/lib/munge", "munge state"),
    ("/etc/", "configuration"),
    ("/run/", "runtime files"),
)


def teardown_data(reported: dict[str, Any], preview: bool) -> dict[str, Any]:
    """What a teardown destroyed and what it left on the platform's storage, per host with
    sizes; a preview's are what it would destroy and keep."""
    destroyed, kept = ("would_destroy", "would_keep") if preview else ("destroyed", "kept")
    detail: dict[str, Any] = {"preview": True} if preview else {}
    if reported.get("slurm_app_destroyed"):
        detail[destroyed] = destroyed_data(reported["slurm_app_destroyed"])
    if reported.get("slurm_app_kept"):
        detail[kept] = kept_data(reported["slurm_app_kept"])
    # hosts a forced remove or a decommission left behind because they did not answer: their
    # packages, keys and data are still there, for the platform to reclaim or wipe
    detail.update(hosts_not_reached(reported, "not_cleaned"))
    return detail


def hosts_not_reached(reported: dict[str, Any], key: str) -> dict[str, Any]:
    """The hosts the run left out because they did not answer, with the SSH error, under
    `key` (none: nothing)."""
    if not reported.get("slurm_app_not_reached"):
        return {}
    return {
        key: [
            {"host": host, "reason": connection_reason(str(reason))}
            for host, reason in sorted(reported["slurm_app_not_reached"].items())
        ]
    }


# What a path left on the platform's storage holds, by its folder there (slurm_common's
# <mount>/home/<user> and <mount>/jobs/<user>).
KEPT_KINDS = {
    "home": "home directory on the platform's storage: the user's files and job output",
    "jobs": "job directory on the platform's storage: the user's job output",
}


def kept_data(reported: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per host, each path left on the platform's storage with its size and what it holds."""
    return {
        host: [
            {**entry, "held": KEPT_KINDS.get(PurePosixPath(entry["path"]).parent.name, "data")}
            for entry in entries
        ]
        for host, entries in sorted(reported.items())
    }


def destroyed_data(reported: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per host, each removed (or kept) path with its size and what it held."""
    return {
        host: [
            {
                **entry,
                "held": next(
                    (what for prefix, what in DESTROYED_KINDS if entry["path"].startswith(prefix)),
                    "data",
                ),
            }
            for entry in entries
        ]
        for host, entries in sorted(reported.items())
    }


def health_of(
    request: OperationRequest, reported: dict[str, Any], asked: Collection[str] | None = None
) -> dict[str, Any]:
    """healthy / degraded / failed, with the evidence: every daemon's state, the nodes that
    cannot run jobs and why, accounting, and the workers that did not answer. `asked`: the
    hosts the run asked (a targeted operation's inventory); None: every member was asked."""
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
    worker_hosts = [h for h in _worker_hosts(request) if asked is None or h in asked]
    for host in worker_hosts:
        report = workers.get(host)
        if report is None:
            problems.append(f"{host}: did not answer")
            continue
        problems += _not_running(host, report.get("services"))
    problems += _monitoring_problems(reported)
    for node in controller.get("nodes") or []:
        flags = set(node.get("flags") or [])
        if node.get("base_state") in UNHEALTHY_NODE_STATES or flags & UNHEALTHY_NODE_FLAGS:
            reason = f" ({node['reason']})" if node.get("reason") else ""
            problems.append(f"node {node.get('name')} is {node.get('state')}{reason}")
    classification = "failed" if fatal else "degraded" if problems else "healthy"
    return {
        "classification": classification,
        "problems": fatal + problems,
        "services": {
            str(controller.get("host")): services,
            **{host: (workers.get(host) or {}).get("services") for host in worker_hosts},
        },
        "accounting_reachable": controller.get("accounting_answers"),
    }


def monitoring_vars(request: OperationRequest, monitoring: dict[str, Any]) -> dict[str, Any]:
    """The monitoring role's variables: the config's, the site's package sources, and the
    Grafana OIDC client secret as a file inside secrets_dir (request_check proved it there)."""
    role_vars: dict[str, Any] = {
        "monitoring_enabled": monitoring["enabled"],
        "monitoring_prometheus_retention_time": monitoring["retention_time"],
        "monitoring_prometheus_retention_size": monitoring["retention_size"],
        "monitoring_prometheus_scrape_interval": monitoring["scrape_interval"],
        **site_role_vars(load_site(), ("grafana", "dcgm_exporter")),
    }
    oidc = (monitoring.get("grafana") or {}).get("oidc")
    if oidc and request.credentials.secrets_dir:
        role_vars["monitoring_grafana_oidc"] = {
            "issuer_url": oidc["issuer_url"],
            "client_id": oidc["client_id"],
            "client_secret_src": str(
                Path(request.credentials.secrets_dir) / oidc["client_secret_ref"]
            ),
            "scopes": oidc.get("scopes", ["openid", "profile", "email"]),
            "admin_role": oidc.get("admin_role", "slurm-admin"),
            "allowed_groups": oidc["allowed_groups"],
            "groups_claim": oidc.get("groups_claim", "groups"),
            "claims_from": oidc.get("claims_from", "access_token"),
        }
    root_url = (monitoring.get("grafana") or {}).get("root_url")
    if root_url:
        role_vars["monitoring_grafana_root_url"] = root_url
    role_vars.update(_alerting_vars(request, monitoring.get("alerting") or {}))
    return role_vars


def _alerting_vars(request: OperationRequest, alerting: dict[str, Any]) -> dict[str, Any]:
    """Alertmanager's receivers and intervals; a secret reference becomes its file inside
    secrets_dir (request_check proved it there)."""
    secrets_dir = Path(request.credentials.secrets_dir or "")
    role_vars: dict[str, Any] = {
        f"monitoring_alertmanager_{key}": alerting[key]
        for key in ("group_wait", "group_interval", "repeat_interval")
        if key in alerting
    }
    if webhook := alerting.get("webhook"):
        role_vars["monitoring_alertmanager_webhook"] = {
            "url": webhook["url"],
            **(
                {"bearer_token_src": str(secrets_dir / webhook["bearer_token_secret_ref"])}
                if webhook.get("bearer_token_secret_ref")
                else {}
            ),
        }
    if email := alerting.get("email"):
        role_vars["monitoring_alertmanager_email"] = {
            key: email[key]
            for key in ("to", "from", "smarthost", "require_tls", "auth_username")
            if key in email
        } | (
            {"auth_password_src": str(secrets_dir / email["auth_password_secret_ref"])}
            if email.get("auth_password_secret_ref")
            else {}
        )
    return role_vars


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


def _readiness(smoke: dict[str, Any] | None) -> dict[str, Any] | None:
    if not smoke:
        return None
    nodes = str(smoke.get("nodes", ""))
    return {**smoke, "nodes": int(nodes) if nodes.isdigit() else None}


def _placement_rules(request: OperationRequest) -> Iterator[Violation]:
    placement = request.instance.placement_intent
    controller = placement.get("controller_allocation_id")
    if placement.get("worker_placement") == "separate":
        for index, member in enumerate(request.members):
            if member.component_key == "worker" and member.allocation_id == UUID(controller):
                yield Violation(
                    "member-mismatch",
                    ("members", index, "allocation_id"),
                    "separate placement: no worker runs on the controller's allocation",
                )


def _config_rules(config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
    partitions = config.get("partitions")
    if isinstance(partitions, list):
        names = [p.get("name") for p in partitions]
        for name, count in Counter(names).items():
            if count > 1:
                yield Violation(
                    "duplicate-key",
                    (*base, "partitions", names.index(name, names.index(name) + 1), "name"),
                    f"partition {name!r} appears {count} times",
                )
        defaults = sum(1 for p in partitions if p.get("default"))
        if defaults != 1:
            yield Violation(
                "config-inconsistent",
                (*base, "partitions"),
                f"expected exactly one default partition, got {defaults}",
            )
    users = config.get("users")
    if isinstance(users, list):
        yield from _user_rules(users, (*base, "users"))
    yield from _fair_share_rules(config, base)
    yield from _secret_transport_rules(config, base)
    storage = config.get("storage")
    if isinstance(storage, dict) and storage.get("model", "allocation_local") != "platform_mount":
        for field in ("mount_path", "holds"):
            if field in storage:
                yield Violation(
                    "config-inconsistent",
                    (*base, "storage", field),
                    f"{field} is for model platform_mount: expected no {field} with "
                    f"model {storage.get('model', 'allocation_local')}",
                )


def _secret_transport_rules(config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
    """A bearer token goes only over https, an SMTP password only over STARTTLS."""
    monitoring = config.get("monitoring") if isinstance(config.get("monitoring"), dict) else {}
    alerting = monitoring.get("alerting") if isinstance(monitoring.get("alerting"), dict) else {}
    webhook = alerting.get("webhook") if isinstance(alerting.get("webhook"), dict) else {}
    path = (*base, "monitoring", "alerting")
    if webhook.get("bearer_token_secret_ref") and not str(webhook.get("url", "")).startswith(
        "https://"
    ):
        yield Violation(
            "config-inconsistent",
            (*path, "webhook", "url"),
            "expected an https:// url: a bearer token is sent only over TLS",
        )
    email = alerting.get("email") if isinstance(alerting.get("email"), dict) else {}
    if email.get("auth_password_secret_ref") and email.get("require_tls") is False:
        yield Violation(
            "config-inconsistent",
            (*path, "email", "require_tls"),
            "expected require_tls true: an SMTP password is sent only after STARTTLS",
        )


def _names(items: Any) -> list[Any]:
    return [i.get("name") for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _fair_share_rules(config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
    """Accounts, QoS and AllowAccounts name each other and the users, and all of them need
    slurmdbd; the schema checks each value alone."""
    accounting = config.get("accounting")
    accounting = accounting if isinstance(accounting, dict) else {}
    partitions = config.get("partitions") if isinstance(config.get("partitions"), list) else []
    accounts = accounting.get("accounts") if isinstance(accounting.get("accounts"), list) else []
    if accounting.get("enabled", True) is False:
        for field in ("accounts", "qos", "fair_share"):
            if accounting.get(field):
                yield Violation(
                    "config-inconsistent",
                    (*base, "accounting", field),
                    f"{field} needs slurmdbd: expected no {field} with accounting.enabled false",
                )
        for index, partition in enumerate(partitions):
            if isinstance(partition, dict) and partition.get("allow_accounts"):
                yield Violation(
                    "config-inconsistent",
                    (*base, "partitions", index, "allow_accounts"),
                    "AllowAccounts needs accounting: expected no allow_accounts with "
                    "accounting.enabled false",
                )
        return
    for field, items in (("accounts", accounts), ("qos", accounting.get("qos"))):
        names = _names(items)
        for name, count in Counter(names).items():
            if count > 1:
                yield Violation(
                    "duplicate-key",
                    (*base, "accounting", field, names.index(name, names.index(name) + 1), "name"),
                    f"{field} {name!r} appears {count} times",
                )
    users = config.get("users") if isinstance(config.get("users"), list) else []
    qos = accounting.get("qos") if isinstance(accounting.get("qos"), list) else []
    # the module that applies them refuses the same (one source: the role's own code, loaded
    # only where there is something to check: it imports Ansible's module_utils, ~70 ms)
    if accounts:
        rules = role_module("slurm_sacctmgr")
        for path, message in rules.reference_problems(users, accounts, qos):
            yield Violation("config-inconsistent", (*base, *path), message)
    account_names = {*_names(accounts), accounting.get("default_account", "default")}
    for index, partition in enumerate(partitions):
        if not isinstance(partition, dict):
            continue
        for position, name in enumerate(partition.get("allow_accounts") or []):
            if name not in account_names:
                yield Violation(
                    "config-inconsistent",
                    (*base, "partitions", index, "allow_accounts", position),
                    f"expected an account of accounting.accounts or the default account, "
                    f"got {name!r}",
                )


def login_user_rules(
    request: OperationRequest, config: dict[str, Any], base: LinePath
) -> Iterator[Violation]:
    """No cluster user is the account the driver logs in with on any of the request's hosts:
    the role would renumber it, and a decommission would delete it with its home."""
    # root and the like are refused already as reserved names: one finding per name
    logins = {allocation.ssh_user for allocation in request.allocations} - set(_role_reserved()[0])
    users = config.get("users")
    for index, user in enumerate(users if isinstance(users, list) else []):
        if isinstance(user, dict) and user.get("name") in logins:
            yield Violation(
                "reserved-name",
                (*base, "users", index, "name"),
                "expected a name other than the SSH login user of the request's allocations",
            )


def _user_rules(users: list[dict[str, Any]], base: LinePath) -> Iterator[Violation]:
    """The rules slurm_common applies to its users, from the role itself (one source)."""
    rules = role_filters("slurm_users")
    for problem in rules.user_problems(users, *_role_reserved()):
        yield Violation(
            problem["code"], (*base, problem["index"], problem["field"]), problem["message"]
        )


def role_filters(name: str) -> ModuleType:
    """A filter-plugin module of slurm_common: the roles' code, shared rather than repeated."""
    return _role_code("slurm_common", "filter_plugins", name)


def role_module(name: str) -> ModuleType:
    """An Ansible module of slurm_controller, loaded for the rules it also applies."""
    return _role_code("slurm_controller", "library", name)


@cache
def _role_code(role: str, folder: str, name: str) -> ModuleType:
    path = bundle_root() / "roles" / role / folder / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{role}_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def _role_reserved() -> tuple[list[str], list[str], int]:
    role_vars = yaml.safe_load(
        (bundle_root() / "roles" / "slurm_common" / "vars" / "main.yml").read_text()
    )
    return (
        role_vars["__slurm_common_reserved_accounts"],
        role_vars["__slurm_common_reserved_account_prefixes"],
        role_vars["__slurm_common_first_login_id"],
    )


def access_bundle(
    request: OperationRequest,
    controller_report: dict[str, Any],
    worker_files: dict[str, Any],
    first_user: str | None,
    monitoring: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """How the customer reaches and checks the cluster. Ports and paths are the ones the roles
    reported (slurm_controller's report.yml, slurm_worker's start.yml), never repeated here."""
    placement = request.instance.placement_intent
    controller = request.allocation(UUID(placement["controller_allocation_id"]))
    assert controller is not None
    # The customer's own access credential, never the platform's key file or any of its paths.
    ssh = f"ssh -p {controller.ssh_port} {controller.ssh_user}@{controller.address}"
    run_as = f"sudo -u {first_user} " if first_user else ""
    storage = storage_access(request.instance.config)
    storage_note = storage.pop("note")
    # job output where every member and the portal see it, when there is such a place
    shared = storage.get("job_directories") or (
        storage["homes"] if storage["model"] == "platform_mount" else None
    )
    output = f"-D {shared}/{first_user} -o %j.out" if shared and first_user else "-o /tmp/%j.out"
    worker_logs = {
        daemon: f"{path} (on each worker)"
        for daemon, path in (worker_files.get("log_paths") or {}).items()
    }
    bundle: dict[str, Any] = {
        "cluster_name": controller_report.get("cluster_name"),
        "controller": {
            "hostname": controller.hostname,
            "address": controller.address,
            "slurmctld_port": controller_report.get("slurmctld_port"),
            "ssh": ssh,
        },
        "config_paths": {
            **(controller_report.get("config_paths") or {}),
            **(worker_files.get("config_paths") or {}),
        },
        "log_paths": {**(controller_report.get("log_paths") or {}), **worker_logs},
        "commands": {
            "nodes": "sinfo -N -l",
            "partitions": "sinfo -s",
            "queue": "squeue -l",
            "submit_example": f"{run_as}sbatch -N1 {output} --wrap 'hostname; sleep 5'",
            "interactive_example": f"{run_as}srun -N1 --pty bash",
            "job_history": "sacct -X -o JobID,JobName,User,State,Elapsed,NodeList",
            "accounts": "sacctmgr show assoc format=cluster,account,user",
        },
        "health_checks": {
            "controller_up": "scontrol ping",
            "nodes_not_responding_or_drained": "sinfo -R",
            "scheduler_statistics": "sdiag",
            "daemons": "systemctl status munge slurmctld slurmdbd mariadb",
            "munge_round_trip": "munge -n | unmunge",
        },
        "notes": [
            "Workers run configless: slurm.conf exists only on the controller; edit the "
            "fragments through the bundle, not the assembled file.",
            storage_note,
        ],
        "storage": storage,
    }
    if monitoring:
        bundle["monitoring"] = monitoring_access(controller, ssh, monitoring)
    return bundle


def storage_access(config: dict[str, Any]) -> dict[str, Any]:
    """Where the users' homes and job output are, and what decommission does to them."""
    role = storage_vars(config)
    if role["slurm_common_storage_model"] != "platform_mount":
        return {
            "model": "allocation_local",
            "homes": "/home/<user> on each member",
            "note": "Home directories and job output are allocation-local and are destroyed by "
            "decommission (decommission with preview: true lists them first).",
        }
    mount = role["slurm_common_storage_mount_path"]
    on_mount = role["slurm_common_storage_holds"] == "homes"
    return {
        "model": "platform_mount",
        "mount_path": mount,
        "homes": f"{mount}/home" if on_mount else "/home/<user> on each member",
        "job_directories": None if on_mount else f"{mount}/jobs",
        "note": f"Files under {mount} are on the platform's storage, shared by every member "
        "and the portal; remove_worker and decommission never delete them.",
    }


def monitoring_access(controller: Any, ssh: str, monitoring: dict[str, Any]) -> dict[str, Any]:
    """Grafana's URL, Prometheus through an SSH tunnel (it answers on the controller only),
    and where the monitoring files are; ports and paths as the role reported them."""
    ports = monitoring.get("ports") or {}
    paths = monitoring.get("paths") or {}
    prometheus = str(ports.get("prometheus", "127.0.0.1:9090"))
    local_port = prometheus.rsplit(":", 1)[-1]
    access: dict[str, Any] = {
        "prometheus": {
            "tunnel": f"{ssh} -N -L {local_port}:{prometheus}",
            "url_through_tunnel": f"http://127.0.0.1:{local_port}/",
            "config": paths.get("prometheus_config"),
            "alert_rules": paths.get("alert_rules"),
            "scrape_targets": paths.get("scrape_targets"),
        },
        "exporters": {
            "slurm": f"http://{controller.address}:{ports.get('slurm_exporter')}/metrics",
            "node": f"http://<member address>:{ports.get('node_exporter')}/metrics",
        },
    }
    if monitoring.get("grafana"):
        access["grafana"] = {
            "url": f"{str(monitoring.get('grafana_url') or '').rstrip('/')}/d/slurm-overview",
            "admin_password_file": f"{paths.get('grafana_admin_password')} (on the controller)",
        }
    else:
        access["grafana"] = None
        access["notes"] = ["Grafana is not installed: the site settings choose no Grafana source."]
    return access
