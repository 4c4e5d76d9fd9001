"""Where an instance's software comes from, and the rules that decide which sources it may use
(product spec 004, "Artifact and Registry Model"). Two layers: the site's deny list (the
platform's, which nothing overrides) and the request's project overlay (an allowlist, which
only narrows). The sources an app needs are listed by its adapter (`AppAdapter.sources`)."""

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, StringConstraints, model_validator
from pydantic.json_schema import SkipJsonSchema

from driver.models.common import OutputModel, StrictModel

# apt: a suite of an APT repository (Debian's, a vendor's); npm: a package registry;
# artifact: one file, taken only by its checksum (a signing key, a keyring or release .deb, a
# site's archive)
SourceKind = Literal["apt", "npm", "artifact"]

# A DNS name in lower case, or `*.` and one: the name and every name below it
HostPattern = Annotated[
    str,
    StringConstraints(
        pattern=r"^(\*\.)?[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$",
        max_length=253,
    ),
]


# What the bundle calls a source (driver/apps/sources.py): `debian`, `grafana`, `slurm:forky`
SourceName = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9:.-]{0,62}$", max_length=63)
]


class SourceRule(StrictModel):
    """Matches a source when every field it names matches; at least one field."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    name: SourceName | SkipJsonSchema[None] = None
    """The source's name in the bundle: `debian` is Debian's own suites, from the mirror each
    host is configured with, which no host rule can name."""
    kind: SourceKind | SkipJsonSchema[None] = None
    """The source's kind: apt, npm or artifact."""
    host: HostPattern | SkipJsonSchema[None] = None
    """The host the source is fetched from: `apt.grafana.com`, or `*.nvidia.com` for that
    name and every name below it. A source with no host of its own (Debian's suites, from
    the mirror each host is configured with; a file the site keeps) matches no host rule."""

    @model_validator(mode="after")
    def _names_something(self) -> "SourceRule":
        if self.name is None and self.kind is None and self.host is None:
            raise ValueError("a rule names at least one of name, kind and host")
        return self

    def matches(self, source: "Source") -> bool:
        if self.name is not None and self.name != source.name:
            return False
        if self.kind is not None and self.kind != source.kind:
            return False
        host = source.host
        if self.host is None:
            return True
        if host is None:
            return False
        if self.host.startswith("*."):
            return host == self.host[2:] or host.endswith(self.host[1:])
        return host == self.host

    def said(self) -> str:
        return ", ".join(f"{name}: {value}" for name, value in self.model_dump().items() if value)


class SourcePolicy(StrictModel):
    """The project's overlay on the platform's sources (the platform's entitlement, delivered
    with the request)."""

    allow: list[SourceRule] = Field(max_length=64)
    """The sources the project allows: each source the operation needs must match one rule,
    or the request is refused before any host changes. It narrows and never broadens: the
    platform's deny list holds whatever it allows."""


class Source(OutputModel):
    """One source an operation installs from."""

    name: SourceName
    """What the bundle calls it: `debian`, `slurm:forky`, `grafana`, `npm`, ..."""
    kind: SourceKind
    """apt, npm or artifact."""
    location: str
    """The URL it is fetched from; for Debian's own suites, the mirror each host is configured
    with; for a site's file, where the driver reads it."""
    host: str | None
    """The host name the rules match; none for Debian's own suites and the site's files."""
    checksum: str | None
    """What an artifact is taken by (`sha256:<hex>`, npm's `sha512-<base64>`); none for a
    repository, whose packages its signed index vouches for."""
    purpose: str
    """What the bundle installs from it."""
    tier: Literal["platform", "tenant"] = "platform"
    """Whose source it is: the platform's (the bundle's and the site's) or the tenant's own
    (the request's `tenant_sources`)."""


# A bare file name in credentials.secrets_dir (request_check's SECRET_REF says the same)
SecretRefName = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$", max_length=128)
]
HttpsUrl = Annotated[
    str,
    StringConstraints(
        pattern=r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%-]+)*/?$", max_length=2048
    ),
]


class TenantRegistry(StrictModel):
    """A registry of the tenant's own (a private enterprise registry)."""

    url: HttpsUrl
    """The registry's URL, over HTTPS."""
    token_secret_ref: SecretRefName | SkipJsonSchema[None] = None
    """The name of a file in credentials.secrets_dir holding the registry's token. It is
    used during the run only: the build reads it from its environment, and nothing on the
    host keeps it."""


class TenantSources(StrictModel):
    """The tenant's own sources, which replace the platform's where given. They are held to
    the same layers: the platform's deny list, then the project's overlay."""

    npm_registry: TenantRegistry | SkipJsonSchema[None] = None
    """Where code-server comes from (the vscode runtime), instead of the platform's registry
    (the site's `sources.npm_registry`)."""
