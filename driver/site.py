"""The platform's own settings for this driver installation: where packages that Debian does
not carry come from, where backups are fetched, how runs and the instance's lease go. Read
from SLURM_APP_SITE, else `site.yaml` in the state folder; absent means none of those packages
is installed (a vendor's repository is trusted only through a pin the platform sets).
Trusted (the platform's operators write it), unlike requests.
"""

import hashlib
import os
import socket
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from driver.catalog import CatalogError, state_dir
from driver.models.common import AbsolutePath, StrictModel
from driver.models.sources import SourceRule

Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class PackageSource(StrictModel):
    """repository: the vendor's APT repository; artifact: a .deb on the driver's machine,
    installed only when its sha256 matches; none: the component is not installed."""

    # the roles' own words: one vocabulary for the site file and an operator's inventory
    source: Literal["repository", "artifact", "none"] = "none"
    artifact: AbsolutePath | None = None
    sha256: Sha256 | None = None
    # repository: the sha256 of the file the vendor's repository is trusted through (Grafana's
    # signing key, NVIDIA's cuda-keyring .deb, OSC's release .deb). The roles refuse to
    # install from the repository without it, and the hosts refuse a download that differs.
    bootstrap_sha256: Sha256 | None = None

    @model_validator(mode="after")
    def _artifact_complete(self) -> "PackageSource":
        _refuse_incomplete_artifact(self.source, self.artifact, self.sha256)
        return self


def _refuse_incomplete_artifact(source: str, artifact: str | None, sha256: str | None) -> None:
    """Both package sources' rule: an artifact is installed only from its file and its sha256."""
    if source == "artifact" and (artifact is None or sha256 is None):
        raise ValueError("source: artifact needs artifact (an absolute path) and sha256")


DebianName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.+-]{0,63}$")]
# a host, an optional port and a plain path: no credentials, query or fragment in a URL the site
# names (a collector's token goes in the SDK's header variable, not in the URL)
HttpUrl = Annotated[
    str, Field(pattern=r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%/-]*)?$")
]


class AptRepository(StrictModel):
    """One suite of an APT repository that the hosts trust for the named packages only: apt
    pins every other package of the suite at -1, so nothing else of it is ever installed."""

    uri: HttpUrl
    suite: DebianName
    components: list[DebianName] = Field(default_factory=lambda: ["main"], min_length=1)
    packages: list[DebianName] = Field(min_length=1)
    # a keyring already on the hosts: Debian's own archive keyring signs every Debian suite
    signed_by: AbsolutePath
    # false for a snapshot, or a mirror whose Release file has expired (its Valid-Until past)
    check_valid_until: bool = True


class SlurmPackageSource(StrictModel):
    """Where the hosts get the Slurm that a catalog version runs when it is not the
    distribution's (slurm-reference 2.0.0 runs Slurm 26.05 on Debian 13, whose own is 24.11).
    distribution: the host's own suites. repository: pinned suites (Debian's forky for Slurm and
    libllhttp9.4, trixie-backports for hwloc: docs/operations.md, Slurm 26.05). artifact: a
    .tar.gz of a flat APT repository (folder slurm-repository) with the packages built for the
    hosts' release, installed only when its sha256 matches."""

    source: Literal["distribution", "repository", "artifact"] = "distribution"
    repositories: list[AptRepository] = Field(default_factory=list)
    artifact: AbsolutePath | None = None
    sha256: Sha256 | None = None

    @model_validator(mode="after")
    def _source_complete(self) -> "SlurmPackageSource":
        if self.source == "repository" and not self.repositories:
            raise ValueError("source: repository needs repositories (uri, suite, packages)")
        _refuse_incomplete_artifact(self.source, self.artifact, self.sha256)
        return self

    def role_vars(self) -> dict[str, Any]:
        """slurm_common's variables for this source."""
        found: dict[str, Any] = {"slurm_common_slurm_source": self.source}
        if self.source == "repository":
            found["slurm_common_slurm_repositories"] = [
                repository.model_dump() for repository in self.repositories
            ]
        if self.source == "artifact":
            found["slurm_common_slurm_artifact"] = str(self.artifact)
            found["slurm_common_slurm_artifact_sha256"] = str(self.sha256)
        return found


class Backups(StrictModel):
    """Where a backup of an instance without a platform mount is fetched to: one folder per
    instance below `directory` (default: backups/ in the driver's state folder), 0700. Each
    instance's share of it: at most `instance_max_bytes` (a backup that would pass it is refused
    before it is fetched, and no file a playbook writes on the control plane can grow past it)
    and `instance_max_count` backups, whatever the instance's `backup.keep` says."""

    directory: AbsolutePath | None = None
    instance_max_bytes: int = Field(default=20 * 1024**3, ge=1024**2)
    instance_max_count: int = Field(default=10, ge=1, le=1000)


class Runs(StrictModel):
    """How the driver's playbooks run. `forks`: the hosts Ansible works on at once in a task
    (ansible.cfg's 20 for operators); a run over more hosts does each task in waves of this
    many (bench/README.md: the 24-worker lab). `mitogen`: Mitogen's strategy for every play
    that names none (status's keeps Ansible's linear); false runs Ansible's own, for a host
    Mitogen cannot reach (bench/README.md: Mitogen without its CPU pinning)."""

    forks: int = Field(default=50, ge=1, le=1000)
    mitogen: bool = True


class Lease(StrictModel):
    """The instance's lease, which every operation that changes something takes on the
    instance's controller (the portal's host for a portal) so that one operation at a time
    changes it, from whichever driver host. `driver_name`: how this driver installation is
    named in the lease, on the customer's host and in another driver's `instance_busy`
    (default: an opaque name, from which the customer's host learns nothing of the platform).
    `expiry_s`: how long a lease holds when its driver died holding it, unless the same
    driver runs the instance again (it holds its own instance lock then, so the dead run's
    lease is its to take over; a run renews its lease every third of it, so this bounds how
    long a dead driver keeps an instance, not how long an operation runs; default 2 h). The
    name must differ between driver installations (state
    folders): the default derives it from this host's name and the state folder."""

    driver_name: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
    expiry_s: int = Field(default=7200, ge=10, le=7 * 86400)

    def driver(self) -> str:
        if self.driver_name:
            return self.driver_name
        installation = f"{socket.gethostname()}:{state_dir().resolve()}"
        return f"driver-{hashlib.sha256(installation.encode()).hexdigest()[:12]}"


class Traces(StrictModel):
    """Where the driver sends each operation's spans: OTLP over HTTP (protobuf), through
    OpenTelemetry's SDK. `otlp_endpoint`: the collector's full traces URL, such as
    `http://collector:4318/v1/traces`; none (the default) sends no span, and the trace id is
    in the events, the result and the host journal all the same. `timeout_s`: the longest an
    operation waits for the collector at its end (an export that fails is said on the driver's
    stderr and fails nothing). The collector's credentials and CA come from the SDK's own
    variables in the driver's environment (OTEL_EXPORTER_OTLP_TRACES_HEADERS,
    OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE), never from this file."""

    otlp_endpoint: HttpUrl | None = None
    timeout_s: float = Field(default=5.0, gt=0, le=60)


class SiteSources(StrictModel):
    """The platform's layer of the source policy. `deny`: the global hard-deny; a source any
    rule matches is refused for every request, whatever its project overlay allows.
    `npm_registry`: the platform's blessed npm registry (code-server, the vscode runtime)."""

    deny: list[SourceRule] = Field(default_factory=list, max_length=256)
    npm_registry: HttpUrl = "https://registry.npmjs.org/"


class Sessions(StrictModel):
    """The portal's interactive sessions. `idle_minutes`: a session with no client connected
    for this long ends (its job is cancelled and its GPUs freed; the node's journal says why);
    0 turns the idle stop off. Applied at each portal deploy."""

    idle_minutes: int = Field(default=60, ge=0, le=7 * 24 * 60)


class Site(StrictModel):
    backups: Backups = Backups()
    runs: Runs = Runs()
    lease: Lease = Lease()
    traces: Traces = Traces()
    sessions: Sessions = Sessions()
    sources: SiteSources = SiteSources()
    grafana: PackageSource = PackageSource()
    dcgm_exporter: PackageSource = PackageSource()
    # artifact: a .tar.gz of a flat APT repository (folder ood-repository) with ondemand and
    # its dependencies, for hosts that cannot reach OSC's repository
    open_ondemand: PackageSource = PackageSource()
    slurm: SlurmPackageSource = SlurmPackageSource()


def backup_dir(site: Site) -> Path:
    """The control plane's folder of fetched backups (one subfolder per instance)."""
    return Path(site.backups.directory) if site.backups.directory else state_dir() / "backups"


def site_file() -> Path:
    override = os.environ.get("SLURM_APP_SITE")
    return Path(override) if override else state_dir() / "site.yaml"


def load_site() -> Site:
    path = site_file()
    if not path.is_file():
        return Site()
    try:
        return Site.model_validate(yaml.safe_load(path.read_text()) or {})
    except (yaml.YAMLError, ValidationError) as exc:
        raise CatalogError(f"{path}: invalid site settings: {exc}") from exc


# Each site component: the role variables' prefix, and the role variable that pins the
# repository's bootstrap file.
COMPONENTS = {
    "grafana": ("monitoring_grafana", "monitoring_grafana_apt_key_sha256"),
    "dcgm_exporter": ("monitoring_dcgm_exporter", "monitoring_dcgm_exporter_keyring_sha256"),
    "open_ondemand": ("open_ondemand", "open_ondemand_release_package_sha256"),
}


def role_vars(site: Site, components: tuple[str, ...]) -> dict[str, str]:
    """The source variables of the given components' roles."""
    result: dict[str, str] = {}
    for component in components:
        prefix, pin = COMPONENTS[component]
        choice: PackageSource = getattr(site, component)
        result[f"{prefix}_source"] = choice.source
        if choice.source == "repository" and choice.bootstrap_sha256:
            result[pin] = choice.bootstrap_sha256
        if choice.source == "artifact":
            result[f"{prefix}_artifact"] = str(choice.artifact)
            result[f"{prefix}_artifact_sha256"] = str(choice.sha256)
    return result
