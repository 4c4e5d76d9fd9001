"""open-ondemand's `adapter_detail`: the portal as the run left it (driver/apps/open_ondemand/
adapter.py builds it from roles/open_ondemand/tasks/report.yml's report)."""

from driver.details.common import CommonDetail
from driver.models.common import OutputModel


class OidcMetadata(OutputModel):
    """Whether the OIDC provider's metadata answers from the portal's host."""

    url: str
    """The metadata's URL."""
    status: int | str
    """Its HTTP status (-1: no answer)."""
    error: str | None
    """Why it did not answer."""


class PortalReport(OutputModel):
    """The portal's state as the run read it."""

    host: str
    """The portal's host."""
    services: dict[str, str]
    """Each unit's state: running, stopped, failed or absent."""
    ondemand_version: str | None
    """Open OnDemand's package version; null where it is not installed."""
    slurm_client_answers: bool
    """Whether the Slurm client reaches the controller."""
    converge_skipped: bool
    """deploy: the host, the request and the bundle were as the last deploy left them."""
    oidc_metadata: OidcMetadata
    """Whether the OIDC provider answers."""
    url: str
    """The portal's URL."""
    cluster_name: str
    """The Slurm cluster it serves."""
    paths: dict[str, str]
    """Its configuration files and logs."""


class PortalHealth(OutputModel):
    """The portal's health, with the evidence."""

    classification: str
    """healthy, degraded or failed."""
    problems: list[str]
    """What is wrong, each naming its host and unit."""
    services: dict[str, dict[str, str]]
    """Host to each unit's state."""


class PortalAccess(OutputModel):
    """How users reach the portal and how its owner checks it: only in a successful result."""

    url: str | None
    """The portal's URL."""
    cluster_name: str | None
    """The Slurm cluster it serves."""
    open_ondemand_version: str | None
    """Open OnDemand's version; null where it is not installed."""
    ssh: str
    """How the owner logs in to the portal's host."""
    config_paths: dict[str, str] | None
    """Its configuration files and logs."""
    health_checks: dict[str, str]
    """Commands that check it."""
    audit_notice: str
    """What the portal records of its users."""
    notes: list[str]
    """What the owner should know."""


class PortalDetail(CommonDetail):
    """open-ondemand's detail."""

    portal: PortalReport | None = None
    """The portal's state."""
    health: PortalHealth | None = None
    """Its health."""
    access_bundle: PortalAccess | None = None
    """How users reach it (only after a success)."""
