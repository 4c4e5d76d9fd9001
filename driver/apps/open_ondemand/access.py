"""The portal's access bundle: how users reach it and how its owner checks it."""

from typing import Any
from uuid import UUID

from driver.models.request import OperationRequest

# Product decision (spec): what users do in the portal is Slurm's business, not the platform's.
AUDIT_NOTICE = (
    "Actions taken in the HPC Portal are managed by Slurm, not tracked in platform audit logs."
)


def access_bundle(request: OperationRequest, portal: dict[str, Any]) -> dict[str, Any]:
    """How users reach the portal and how its owner checks it; paths as the role reported."""
    host = request.allocation(UUID(request.instance.placement_intent["host_allocation_id"]))
    assert host is not None
    return {
        "url": portal.get("url"),
        "cluster_name": portal.get("cluster_name"),
        "open_ondemand_version": portal.get("ondemand_version"),
        "ssh": f"ssh -p {host.ssh_port} {host.ssh_user}@{host.address}",
        "config_paths": portal.get("paths"),
        "health_checks": {
            "apache": "systemctl status apache2",
            "slurm_client": "sinfo; squeue",
            "oidc_metadata": f"curl -sf {(portal.get('oidc_metadata') or {}).get('url')}",
        },
        "audit_notice": AUDIT_NOTICE,
        "notes": [
            AUDIT_NOTICE,
            "Users log in through the OIDC provider; a login whose user name is none of the "
            "cluster's users sees a page saying so.",
        ]
        + (
            []
            if portal.get("ondemand_version")
            else [
                "Open OnDemand is not installed (the driver's site settings choose no source): "
                "the portal serves the login and the account check only."
            ]
        ),
    }
