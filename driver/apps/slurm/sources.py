"""The sources a slurm-reference operation installs from (driver/apps/sources.py names them)."""

from pathlib import Path

from driver.apps.slurm.operations import traits
from driver.apps.sources import NeededSource, debian, npm_registry, slurm_sources, vendor_sources
from driver.inventory import apply_defaults
from driver.models.manifest import Version
from driver.models.request import OperationRequest
from driver.site import Site

# The Slurm major release each catalog version runs where it is not the distribution's: its
# hosts take it from the site settings' slurm source (docs/operations.md, Slurm 26.05), and
# refuse a source that does not offer it ([slurm_unavailable]). The manifest's release notes
# say the same.
SLURM_SERIES = {"2.0.0": "26.05"}


def arrives_at(request: OperationRequest, version: Version) -> str:
    """The catalog version whose Slurm the run leaves on the hosts: a rollback's target, else
    the version checked (an upgrade's target, or the instance's own)."""
    if request.operation.type == "rollback":
        return str(request.operation.options.get("to_version", version.version))
    return version.version


def needed_sources(request: OperationRequest, version: Version, site: Site) -> list[NeededSource]:
    operation = traits(request.operation.type)
    if not operation.installs:
        return []
    config = apply_defaults(version.config_schema, request.instance.config)
    found = [debian("munge, Slurm, MariaDB, Prometheus and node_exporter", ("instance",))]
    if SLURM_SERIES.get(arrives_at(request, version)):
        moves = request.operation.type in ("upgrade", "rollback")
        series = ("operation", "options", "to_version") if moves else ("instance", "version")
        found += slurm_sources(site.slurm, series)
    if operation.monitoring and config["monitoring"]["enabled"]:
        enabled = ("instance", "config", "monitoring", "enabled")
        found += vendor_sources("grafana", site.grafana, enabled)
        gpu = next((i for i, a in enumerate(request.allocations) if a.gpus), None)
        if gpu is not None:
            found += vendor_sources(
                "dcgm_exporter", site.dcgm_exporter, ("allocations", gpu, "gpus")
            )
    if operation.prepares_workers and "vscode" in config["interactive_runtimes"]:
        runtimes = ("instance", "config", "interactive_runtimes")
        found.append(npm_registry(request, site, "code-server (the vscode runtime)", runtimes))
    return found


def npm_registry_vars(request: OperationRequest, site: Site) -> dict[str, str]:
    """slurm_worker's registry: the one the source policy held to its rules, and the path of
    its token on the driver's host where the tenant's registry has one (request_check proved
    the file inside secrets_dir)."""
    tenant = request.tenant_npm_registry
    if tenant is None:
        return {"slurm_worker_npm_registry": site.sources.npm_registry}
    token = ""
    if tenant.token_secret_ref and request.credentials.secrets_dir:
        token = str(Path(request.credentials.secrets_dir) / tenant.token_secret_ref)
    return {"slurm_worker_npm_registry": tenant.url, "slurm_worker_npm_registry_token_src": token}
