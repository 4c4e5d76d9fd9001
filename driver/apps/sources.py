"""Every source the bundle's roles install from, named once by kind: Debian's suites, the
vendors' repositories and the files those are trusted through, npm's registry, and the
site's own files. Each app's adapter picks the ones an operation needs (`AppAdapter.sources`);
request_check holds them to the site's deny list and the request's overlay before any host
changes. tests/unit/test_sources.py holds the roles to this list: every URL a role fetches
from is named here."""

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from driver.documents import LinePath
from driver.models.request import OperationRequest
from driver.models.sources import Source, SourceKind
from driver.site import PackageSource, Site, SlurmPackageSource


@dataclass(frozen=True)
class NeededSource:
    source: Source
    # the request's field that makes the operation need it: where a refusal points
    needed_by: LinePath


@dataclass(frozen=True)
class VendorRepository:
    """A vendor's APT repository, trusted through one file fetched by URL and pinned by the
    site's sha256 (`bootstrap_sha256`): a signing key, or a package that installs one."""

    name: str
    repository: str
    trust_file: str
    purpose: str


# <major>, <release>, <arch>: what the roles fill in per host (Debian's major version and
# codename, NVIDIA's name for the architecture); the rules match the host.
VENDORS = {
    "grafana": VendorRepository(
        "grafana",
        "https://apt.grafana.com",
        "https://apt.grafana.com/gpg.key",
        "Grafana (the monitoring host)",
    ),
    "dcgm_exporter": VendorRepository(
        "nvidia-cuda",
        "https://developer.download.nvidia.com/compute/cuda/repos/",
        "https://developer.download.nvidia.com/compute/cuda/repos/debian<major>/<arch>/cuda-keyring_1.1-1_all.deb",
        "DCGM and its exporter (GPU nodes)",
    ),
    "open_ondemand": VendorRepository(
        "osc-ondemand",
        "https://apt.osc.edu/ondemand/4.2/",
        "https://apt.osc.edu/ondemand/4.2/ondemand-release-web_4.2.0-<release>_all.deb",
        "Open OnDemand (the portal host)",
    ),
}

DEBIAN_MIRROR = "the Debian mirror each host is configured with"


def source(
    name: str,
    kind: SourceKind,
    location: str,
    purpose: str,
    checksum: str | None = None,
    tier: Literal["platform", "tenant"] = "platform",
) -> Source:
    host = urlsplit(location).hostname if location.startswith(("http://", "https://")) else None
    return Source(
        name=name,
        kind=kind,
        location=location,
        host=host,
        checksum=checksum,
        purpose=purpose,
        tier=tier,
    )


def debian(purpose: str, needed_by: LinePath) -> NeededSource:
    """Debian's own suites: the distribution's packages every member installs."""
    return NeededSource(source("debian", "apt", DEBIAN_MIRROR, purpose), needed_by)


def _sha256(value: str | None) -> str | None:
    return f"sha256:{value}" if value else None


def vendor_sources(
    component: str, choice: PackageSource, needed_by: LinePath
) -> list[NeededSource]:
    """What the site's choice for a vendor's component installs from: its repository and the
    file that repository is trusted through, or the site's own archive; none for `none`."""
    vendor = VENDORS[component]
    if choice.source == "repository":
        return [
            NeededSource(source(vendor.name, "apt", vendor.repository, vendor.purpose), needed_by),
            NeededSource(
                source(
                    f"{vendor.name}:trust",
                    "artifact",
                    vendor.trust_file,
                    f"what {vendor.name}'s repository is trusted through",
                    _sha256(choice.bootstrap_sha256),
                ),
                needed_by,
            ),
        ]
    if choice.source == "artifact":
        return [
            NeededSource(
                source(
                    f"{vendor.name}:artifact",
                    "artifact",
                    str(choice.artifact),
                    vendor.purpose,
                    _sha256(choice.sha256),
                ),
                needed_by,
            )
        ]
    return []


def slurm_sources(choice: SlurmPackageSource, needed_by: LinePath) -> list[NeededSource]:
    """Where a catalog version that runs its own Slurm series gets it (the site's `slurm`)."""
    if choice.source == "repository":
        return [
            NeededSource(
                source(
                    f"slurm:{repository.suite}",
                    "apt",
                    repository.uri,
                    f"{', '.join(repository.packages)} (suite {repository.suite})",
                ),
                needed_by,
            )
            for repository in choice.repositories
        ]
    if choice.source == "artifact":
        return [
            NeededSource(
                source(
                    "slurm:artifact",
                    "artifact",
                    str(choice.artifact),
                    "Slurm's packages",
                    _sha256(choice.sha256),
                ),
                needed_by,
            )
        ]
    return []


def npm_registry(
    request: OperationRequest, site: Site, purpose: str, needed_by: LinePath
) -> NeededSource:
    """The tenant's registry where the request names one, else the platform's."""
    tenant = request.tenant_npm_registry
    if tenant is None:
        return NeededSource(source("npm", "npm", site.sources.npm_registry, purpose), needed_by)
    return NeededSource(
        source("npm", "npm", tenant.url, purpose, tier="tenant"),
        ("tenant_sources", "npm_registry", "url"),
    )
