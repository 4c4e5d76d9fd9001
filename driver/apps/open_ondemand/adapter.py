"""The open-ondemand companion app: a portal attached to a slurm-reference instance."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from uuid import UUID

from driver.apps.base import AppAdapter, OperationError, Violation, observed
from driver.apps.open_ondemand.access import access_bundle
from driver.apps.open_ondemand.health import portal_health
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
    login_user_rules,
    storage_vars,
    teardown_data,
)
from driver.apps.sources import NeededSource, debian, vendor_sources
from driver.catalog import load_entry
from driver.details.open_ondemand import PortalDetail
from driver.events import Health, InstanceStatus
from driver.inventory import Inventory, apply_defaults
from driver.models.manifest import Version
from driver.models.request import Allocation, LinkedInstance, MemberStatus, OperationRequest
from driver.site import Site, load_site
from driver.site import role_vars as site_role_vars

# The operations that install the portal's packages (a rollback restores its files only)
INSTALLING_OPERATIONS = frozenset({"deploy", "upgrade"})


class OpenOnDemand(AppAdapter):
    slug = "open-ondemand"
    lease_group = "open_ondemand"
    detail_model = PortalDetail
    config_fields = frozenset(
        {"portal_title", "interactive_apps", "server_name", "embed_origins", "oidc"}
    )
    address_fields = ((("oidc", "issuer_url"), "url"),)
    operation_errors: ClassVar[dict[str, OperationError]] = {
        "account_exists": ACCOUNT_EXISTS,
        "storage_not_shared": STORAGE_NOT_SHARED,
        "storage_conflict": STORAGE_CONFLICT,
        "slurm_host": OperationError(
            "the request places a companion portal on a host that runs a Slurm daemon (the "
            "role checks the host itself); nothing was changed",
            None,
            (InstanceStatus.FAILED, Health.UNKNOWN),
        ),
        **RELEASE_ERRORS,
    }

    def rules(self, request: OperationRequest, version: Version) -> Iterator[Violation]:
        """The portal shares a host with its cluster only as the controller's co-host: on a
        worker, a companion's install and teardown would take that worker's munge, key and
        users."""
        cluster = _linked_cluster(request)
        portal = UUID(request.instance.placement_intent["host_allocation_id"])
        if cluster is None:
            return
        index = request.linked_instances.index(cluster)
        yield from login_user_rules(request, cluster.config, ("linked_instances", index, "config"))
        yield from _app_runtime_rules(request.instance.config, cluster.config)
        on_portal_host = {
            m.component_key
            for m in cluster.members
            if m.allocation_id == portal and m.status is not MemberStatus.REMOVED
        }
        if on_portal_host and "controller" not in on_portal_host:
            yield Violation(
                "allocation-reused",
                ("instance", "placement_intent", "host_allocation_id"),
                f"the portal's allocation backs the cluster's {', '.join(sorted(on_portal_host))}:"
                " expected the cluster's controller (co-hosted) or an allocation of its own",
            )

    def sources(
        self, request: OperationRequest, version: Version, site: Site
    ) -> list[NeededSource]:
        if request.operation.type not in INSTALLING_OPERATIONS:
            return []
        portal = ("instance", "app_slug")
        return [
            debian("Apache, mod_auth_openidc and the Slurm client (the portal host)", portal),
            *vendor_sources("open_ondemand", site.open_ondemand, portal),
        ]

    def inventory_vars(
        self, request: OperationRequest, version: Version, inventory: Inventory
    ) -> None:
        """The portal's role variables; on deploy (and an upgrade, which converges as a deploy
        does), the attached cluster's controller joins the inventory (group slurm_controller)
        so the portal can copy its munge key, nothing more."""
        config = apply_defaults(version.config_schema, request.instance.config)
        cluster = _linked_cluster(request)
        cluster_config = _cluster_config(cluster)
        nodes = _nodes(request, cluster)
        controller = _controller_allocation(request, cluster)
        portal = request.allocation(UUID(request.instance.placement_intent["host_allocation_id"]))
        assert portal is not None  # validation guarantees every reference resolves
        if request.operation.type in ("deploy", "upgrade") and controller is not None:
            key_file = request.credentials.ssh_private_key_file
            inventory.add(controller, ["slurm_controller"], key_file)
        oidc = config["oidc"]
        secrets_dir = request.credentials.secrets_dir or ""
        site = load_site()
        inventory.group_vars.update(
            {
                "open_ondemand_cluster_name": cluster_config.get("cluster_name", ""),
                "open_ondemand_cohosted": controller is not None and controller.id == portal.id,
                "open_ondemand_login_host": controller.address if controller else "",
                "open_ondemand_node_addresses": sorted({a.address for a in nodes}),
                "open_ondemand_portal_title": config["portal_title"],
                "open_ondemand_server_name": config.get("server_name") or portal.address,
                "open_ondemand_interactive_apps": config["interactive_apps"],
                "open_ondemand_session_idle_minutes": site.sessions.idle_minutes,
                "open_ondemand_embed_origins": config["embed_origins"],
                "open_ondemand_oidc": {
                    "issuer_url": oidc["issuer_url"],
                    "client_id": oidc["client_id"],
                    "client_secret_src": str(Path(secrets_dir) / oidc["client_secret_ref"]),
                    "remote_user_claim": oidc["remote_user_claim"],
                    "scopes": oidc["scopes"],
                    "allowed_groups": oidc["allowed_groups"],
                    "groups_claim": oidc["groups_claim"],
                },
                "slurm_common_users": cluster_config.get("users", []),
                **storage_vars(cluster_config),
                **site_role_vars(site, ("open_ondemand",)),
            }
        )
        # the operations that converge the portal or judge its release
        if request.operation.type in ("deploy", *RELEASE_OPERATIONS):
            inventory.group_vars.update(release_vars(self.slug, request, version))
        if request.operation.type == "upgrade":
            inventory.group_vars["open_ondemand_upgrade_force"] = bool(
                request.operation.options.get("force", False)
            )
        if request.operation.type == "rollback":
            inventory.group_vars["open_ondemand_rollback_to"] = request.operation.options[
                "to_version"
            ]

    def observed_state(
        self, request: OperationRequest, reported: dict[str, Any]
    ) -> tuple[InstanceStatus, Health] | None:
        if request.operation.type != "status":
            return None
        return observed(portal_health(reported.get("slurm_app_portal") or {})["classification"])

    def detail(
        self,
        request: OperationRequest,
        inventory: Inventory,
        reported: dict[str, Any],
        failed: bool,
    ) -> dict[str, Any]:
        detail: dict[str, Any] = {}
        portal = reported.get("slurm_app_portal")
        if portal:
            detail["portal"] = portal
            detail["health"] = portal_health(portal)
            if not failed:
                detail["access_bundle"] = access_bundle(request, portal)
        detail.update(teardown_data(reported, preview=False))
        if request.operation.type in RELEASE_OPERATIONS:
            detail[request.operation.type] = upgrade_detail(reported, request.operation.type)
        if reported.get("slurm_app_releases"):
            detail["releases"] = member_releases(reported)
        if reported.get("slurm_app_converged_by"):
            detail["converged_by"] = member_converged_by(reported)
        return detail


def _linked_cluster(request: OperationRequest) -> LinkedInstance | None:
    wanted = request.instance.placement_intent.get("slurm_instance_id")
    if wanted is None:
        return None
    return next((i for i in request.linked_instances if i.id == UUID(wanted)), None)


def _cluster_config(cluster: LinkedInstance | None) -> dict[str, Any]:
    """The attached cluster's config as its roles saw it (its manifest's defaults applied)."""
    if cluster is None:
        return {}
    loaded = load_entry(cluster.app_slug)
    version = loaded.entry.reading(cluster.version) if loaded else None
    return apply_defaults(version.config_schema, cluster.config) if version else cluster.config


def _controller_allocation(request: OperationRequest, cluster: LinkedInstance | None) -> Any:
    if cluster is None:
        return None
    member = next(
        (
            m
            for m in cluster.members
            if m.component_key == "controller" and m.status is not MemberStatus.REMOVED
        ),
        None,
    )
    return request.allocation(member.allocation_id) if member else None


def _nodes(request: OperationRequest, cluster: LinkedInstance | None) -> list[Allocation]:
    """The allocations of the cluster's worker nodes (not removed): the hosts the portal's
    /node/ proxy may reach, where interactive sessions run."""
    if cluster is None:
        return []
    allocations = (
        request.allocation(m.allocation_id)
        for m in cluster.members
        if m.component_key == "worker" and m.status is not MemberStatus.REMOVED
    )
    return [a for a in allocations if a is not None]


# Each interactive app and the cluster runtime it starts on a node; an app missing here has no
# runtime the bundle can install yet, for the reason APP_BLOCKED gives.
APP_RUNTIMES = {"jupyter": "jupyter", "desktop": "desktop", "vscode": "vscode"}
APP_BLOCKED = {
    "rstudio": "RStudio Server is in no Debian 12 or 13 package (Posit ships it only as its own "
    ".deb, from its site)",
}


def _app_runtime_rules(
    config: dict[str, Any], cluster_config: dict[str, Any]
) -> Iterator[Violation]:
    """An app is offered only where it runs: its runtime is on the linked cluster's workers."""
    runtimes = cluster_config.get("interactive_runtimes", [])
    for position, app in enumerate(config.get("interactive_apps", [])):
        runtime = APP_RUNTIMES.get(app)
        if runtime is None:
            expected = (
                f"an app the bundle can provide a runtime for ({', '.join(APP_RUNTIMES)}): "
                + APP_BLOCKED.get(app, "no runtime")
            )
        elif runtime not in runtimes:
            expected = (
                f"the linked cluster to list {runtime!r} in its interactive_runtimes (its "
                f"workers have {', '.join(runtimes) or 'none'})"
            )
        else:
            continue
        yield Violation(
            "app-runtime-missing",
            ("instance", "config", "interactive_apps", position),
            f"{app} would be a tile whose sessions never start: expected {expected}",
        )
