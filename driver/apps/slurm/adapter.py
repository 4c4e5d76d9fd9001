"""What the driver knows about the slurm-reference app beyond its manifest."""

from collections.abc import Iterator
from typing import Any, ClassVar
from uuid import UUID

from driver.apps.base import AppAdapter, OperationError, Violation, observed
from driver.apps.release import (
    RELEASE_ERRORS,
    RELEASE_OPERATIONS,
    member_converged_by,
    member_releases,
    release_vars,
    upgrade_detail,
)
from driver.apps.shared import (
    ACCOUNT_EXISTS,
    STORAGE_CONFLICT,
    STORAGE_NOT_SHARED,
    hosts_not_reached,
    login_user_rules,
    storage_vars,
    teardown_data,
)
from driver.apps.slurm.access import access_bundle, controller_allocation_id
from driver.apps.slurm.backup import backup_detail, restore_detail
from driver.apps.slurm.health import health_of, with_observed_members
from driver.apps.slurm.monitoring import monitoring_vars
from driver.apps.slurm.operations import traits
from driver.apps.slurm.portals import portal_hosts, portals_detail, without_portals
from driver.apps.slurm.replacement import replacement_groups
from driver.apps.slurm.rules import config_rules, placement_rules
from driver.apps.slurm.sources import (
    SLURM_SERIES,
    arrives_at,
    needed_sources,
    npm_registry_vars,
)
from driver.apps.sources import NeededSource
from driver.details.slurm import SlurmDetail
from driver.documents import LinePath
from driver.events import Health, InstanceStatus
from driver.inventory import Inventory, apply_defaults
from driver.models.manifest import Version
from driver.models.request import MemberStatus, OperationRequest
from driver.site import Site, backup_dir, load_site

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
    "backup_id": "slurm_controller_restore_backup_id",
    "batch_size": "slurm_worker_upgrade_batch_size",
    "to_version": "slurm_controller_rollback_to",
}
# An option whose role variable depends on the operation (None: slurm_common_release carries
# it, or an extra var set in inventory_vars).
OPERATION_OPTION_VARS: dict[tuple[str, str], str | None] = {
    ("upgrade", "force"): "slurm_controller_upgrade_force",
    ("rollback", "force"): "slurm_controller_rollback_force",
    ("upgrade", "to_version"): None,
    ("status", "read"): None,
}
PENDING_OPTIONS: dict[str, str] = {}
# replace_controller's refusals of a backup, made before any host changed.
BACKUP_CODES = ("backup_missing", "backup_mismatch", "backup_corrupt", "backup_incompatible")


class SlurmReference(AppAdapter):
    slug = "slurm-reference"
    # replace_controller's inventory holds the new controller alone there
    lease_group = "slurm_controller"
    detail_model = SlurmDetail
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
        "slurm_unavailable": OperationError(
            "the host's package sources do not offer the Slurm this catalog version runs (the "
            "site settings' slurm source names where it comes from); nothing was installed",
            None,
            (InstanceStatus.FAILED, Health.UNKNOWN),
        ),
        "storage_not_shared": STORAGE_NOT_SHARED,
        "storage_conflict": STORAGE_CONFLICT,
        "no_node_in_service": OperationError(
            "every node the readiness job would run on is drained, or busy with no earlier "
            "proof standing, so no job can prove the cluster ready; the operation's changes "
            "are applied and drained nodes stay drained until resumed",
            None,
            (InstanceStatus.RUNNING, Health.DEGRADED),
        ),
        "backup_failed": OperationError(
            "the backup could not be taken (the reason is named); slurmctld runs as before and "
            "no earlier backup was touched",
            None,
            (InstanceStatus.RUNNING, Health.UNKNOWN),
        ),
        "backup_refused": OperationError(
            "the controller's answer to the backup is not the backup format's, or would pass "
            "this instance's share of the control plane's backups folder (the field is named); "
            "nothing of it was written, and no earlier backup was touched",
            None,
            (InstanceStatus.RUNNING, Health.UNKNOWN),
        ),
        **{
            code: OperationError(
                f"replace_controller refused the backup ({meaning}); nothing was changed on "
                "any host, and a lost controller stays lost",
                None,
                (InstanceStatus.RUNNING, Health.UNKNOWN),
            )
            for code, meaning in zip(
                BACKUP_CODES,
                (
                    "there is none, or not the one named",
                    "it is another instance's or cluster's",
                    "a file is missing or its checksum is not the manifest's",
                    "the new controller's Slurm release cannot read its state",
                ),
                strict=True,
            )
        },
        **RELEASE_ERRORS,
        "config_refused": OperationError(
            "the new config cannot be applied to the running cluster; nothing was changed",
            None,
            (InstanceStatus.RUNNING, Health.UNKNOWN),
        ),
    }
    carries_attached: ClassVar[frozenset[str]] = frozenset({"replace_controller"})
    status_after: ClassVar[dict[str, MemberStatus | None]] = {
        **AppAdapter.status_after,
        "replace_controller": MemberStatus.REMOVED,
    }
    # A backup observes nothing of the cluster's health.
    instance_after: ClassVar[dict[str, tuple[InstanceStatus, Health]]] = {
        **AppAdapter.instance_after,
        "backup": (InstanceStatus.RUNNING, Health.UNKNOWN),
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
            "backup",
            "scheduler",
        }
    )

    def rules(self, request: OperationRequest, version: Version) -> Iterator[Violation]:
        yield from placement_rules(request)
        yield from self.config_rules(request.instance.config, ("instance", "config"))
        yield from login_user_rules(request, request.instance.config, ("instance", "config"))

    def config_rules(self, config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
        return config_rules(config, base)

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
                "slurm_controller_accounting_retention": accounting["retention"],
                "slurm_controller_accounting_archive": accounting["archive"],
                "slurm_controller_instance_id": str(request.instance.id),
                "slurm_controller_backup_interval": config["backup"].get("interval", ""),
                "slurm_controller_backup_keep": config["backup"]["keep"],
                "slurm_controller_backup_metrics": config["backup"]["metrics"],
                "slurm_controller_max_job_count": config["scheduler"]["max_job_count"],
                "slurm_controller_private_data": config["scheduler"]["private_data"],
                "slurm_common_users": config["users"],
                "slurm_common_munge_key_src": request.credentials.munge_key_file or "",
                "slurm_common_slurm_series": SLURM_SERIES.get(arrives_at(request, version), ""),
                **load_site().slurm.role_vars(),
                **storage_vars(config),
            }
        )
        if traits(request.operation.type).monitoring:
            inventory.group_vars.update(monitoring_vars(request, config["monitoring"]))
        if traits(request.operation.type).backup:
            site = load_site()
            inventory.group_vars.update(
                {
                    "slurm_controller_backup_fetch_dir": str(
                        backup_dir(site) / str(request.instance.id)
                    ),
                    "slurm_controller_backup_fetch_max_bytes": site.backups.instance_max_bytes,
                    "slurm_controller_backup_fetch_max_count": site.backups.instance_max_count,
                }
            )
        if traits(request.operation.type).prepares_workers:
            inventory.group_vars["slurm_worker_interactive_runtimes"] = config[
                "interactive_runtimes"
            ]
            inventory.group_vars.update(npm_registry_vars(request, load_site()))
        spec = version.operation(request.operation.type)
        schema = spec.options_schema if spec is not None else {}
        options = apply_defaults(schema, request.operation.options)
        for option, value in options.items():
            key = (request.operation.type, option)
            name = (
                OPERATION_OPTION_VARS[key]
                if key in OPERATION_OPTION_VARS
                else OPTION_VARS.get(option)
            )
            if name is not None:
                inventory.group_vars[name] = value
        inventory.group_vars.update(release_vars(self.slug, request, version))
        if request.operation.type == "upgrade" and "batch_size" in options:
            # a play keyword (the workers' batches), which only extra vars reach; without it
            # the playbook's tenth of the workers
            inventory.extra_vars["slurm_worker_upgrade_batch_size"] = int(options["batch_size"])
        if request.operation.type == "status":
            # the play's hosts: without monitoring no Prometheus answers for the workers
            inventory.extra_vars["slurm_app_status_every_member"] = int(
                options["read"] == "every_member" or not config["monitoring"]["enabled"]
            )
        # drain, resume and remove act on one node; a join of several names them in the
        # inventory's slurm_workers
        if (
            request.operation.target is not None
            and spec is not None
            and (spec.target_component_key == "worker")
        ):
            allocation = request.allocation(request.operation.target.allocation_id)
            if allocation is not None:  # validation guarantees it
                inventory.group_vars["slurm_controller_target_node"] = allocation.hostname
        replacement_groups(request, inventory)
        if request.operation.type in self.carries_attached:
            portal_hosts(request, inventory)

    def failed_past_return(
        self, request: OperationRequest, reported: dict[str, Any]
    ) -> tuple[InstanceStatus, Health, str] | None:
        # replace_controller, once the backup was found restorable: the old controller was
        # stopped or was lost, and the new one did not get to run the cluster
        if request.operation.type == "replace_controller" and reported.get(
            "slurm_app_no_controller"
        ):
            return (
                InstanceStatus.FAILED,
                Health.FAILED,
                "no controller runs the cluster (the old one is stopped or lost); send the same "
                "request again to resume: the new controller keeps the backup it was given, "
                "which is not restored twice",
            )
        return None

    def observed_state(
        self, request: OperationRequest, reported: dict[str, Any]
    ) -> tuple[InstanceStatus, Health] | None:
        if request.operation.type == "status":
            return observed(
                health_of(request, with_observed_members(request, reported))["classification"]
            )
        # a deploy whose monitoring stack failed still made a cluster that runs jobs
        if reported.get("slurm_app_monitoring_failed"):
            return observed("degraded")
        if self.hosts_left_out(request, reported):
            if request.operation.type == "stop":
                return InstanceStatus.STOPPED, Health.DEGRADED
            return observed("degraded")
        return None

    def hosts_left_out(self, request: OperationRequest, reported: dict[str, Any]) -> set[str]:
        if traits(request.operation.type).leaves_workers_behind:
            return set(reported.get("slurm_app_not_reached") or {})
        return set()

    def hosts_done(self, request: OperationRequest, reported: dict[str, Any]) -> set[str] | None:
        # a worker reports its daemons only once it joined (add_worker, replace_worker's
        # replacement): one that failed before, or was never reached, is not in the report
        if traits(request.operation.type).reports_joined_workers:
            return set(reported.get("slurm_app_workers") or {})
        return None

    def sources(
        self, request: OperationRequest, version: Version, site: Site
    ) -> list[NeededSource]:
        return needed_sources(request, version, site)

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
        if traits(request.operation.type).leaves_workers_behind:
            return hosts_not_reached(reported, "not_reached")
        portals = (
            portals_detail(request, reported)
            if request.operation.type in self.carries_attached and request.linked_instances
            else None
        )
        reported = with_observed_members(request, without_portals(reported, inventory))
        if request.operation.type == "backup" and reported.get("slurm_app_backup"):
            return {"backup": backup_detail(reported["slurm_app_backup"])}
        controller = reported.get("slurm_app_controller") or {}
        release: dict[str, Any] = {}
        if request.operation.type in RELEASE_OPERATIONS:
            release[request.operation.type] = upgrade_detail(reported, request.operation.type)
            if reported.get("slurm_app_backup"):
                release[request.operation.type]["backup"] = backup_detail(
                    reported["slurm_app_backup"]
                )
        if not controller:
            return {
                **teardown_data(reported, self.previews(request)),
                **release,
                **({"portals": portals} if portals is not None else {}),
            }
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
        if reported.get("slurm_app_restore"):
            detail["restore"] = restore_detail(
                reported["slurm_app_restore"], reported.get("slurm_app_jobs_at_loss") or {}
            )
            if not failed:
                # what the platform records as the instance's placement from now on
                detail["placement_intent"] = {
                    **request.instance.placement_intent,
                    "controller_allocation_id": str(controller_allocation_id(request)),
                }
        if "services" in controller:
            detail["health"] = health_of(request, reported, asked=inventory.hosts)
        if reported.get("slurm_app_releases"):
            detail["releases"] = member_releases(reported)
        if reported.get("slurm_app_converged_by"):
            detail["converged_by"] = member_converged_by(reported)
        detail.update(release)
        detail.update(teardown_data(reported, preview=False))
        if portals is not None:
            detail["portals"] = portals
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


def _readiness(smoke: dict[str, Any] | None) -> dict[str, Any] | None:
    if not smoke:
        return None
    nodes = str(smoke.get("nodes", ""))
    return {**smoke, "nodes": int(nodes) if nodes.isdigit() else None}
