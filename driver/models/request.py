"""The operation request the platform's app controller sends, one per member operation.

`driver/schemas/operation-request.schema.json` is generated from these models. Secrets are
never carried inline: `credentials` holds file paths only, and the instance config refers to
secrets by name (resolved inside `credentials.secrets_dir`).
"""

import secrets
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from driver.models.common import (
    MAX_TARGETS,
    AbsolutePath,
    AppVersion,
    ComponentKey,
    Hostname,
    Identifier,
    NetworkAddress,
    OperationType,
    PosixName,
    Slug,
    SshHostKey,
    StrictModel,
    TraceParent,
    traceparent_ids_valid,
)
from driver.models.sources import SourcePolicy, TenantRegistry, TenantSources


class MemberStatus(StrEnum):
    """A member's lifecycle status, as the platform records it and the result reports it."""

    PENDING = "pending"
    PROVISIONING = "provisioning"
    READY = "ready"
    DRAINING = "draining"
    DRAINED = "drained"
    STOPPED = "stopped"
    FAILED = "failed"
    REMOVING = "removing"
    REMOVED = "removed"


class Member(StrictModel):
    """One member of the instance: an allocation serving one of the app's components."""

    member_id: Identifier
    """The platform's id of the member."""
    component_key: ComponentKey
    """The manifest component the member serves (controller, worker, portal)."""
    allocation_id: UUID
    """The allocation (host) the member runs on; listed in `allocations`."""
    status: MemberStatus
    """The member's status as the platform recorded it before this operation."""


class Instance(StrictModel):
    """The app instance the operation acts on."""

    id: UUID
    """The instance's id: names its lock, its credentials folder and its Slurm records."""
    app_slug: Slug
    """The catalog entry (app) the instance runs."""
    version: AppVersion
    """The catalog version the instance is at now (an upgrade names its target in
    operation.options.to_version)."""
    name: Identifier | SkipJsonSchema[None] = None
    """The instance's display name on the platform; not used on the hosts."""
    config: dict[str, Any] = Field(default_factory=dict)
    """The instance's settings, validated against the version's config_schema."""
    placement_intent: dict[str, Any]
    """Which allocations serve which component, validated against the version's
    placement_schema."""


class LinkedInstance(StrictModel):
    """An instance this one attaches to (the Slurm cluster an OOD portal serves), or one
    attached to it that the operation carries along (a cluster's portals at its
    replace_controller), checked like the instance itself: its project, its app, its config
    and its members."""

    id: UUID
    """The linked instance's id."""
    project_id: Identifier
    """Its project: must be the request's."""
    app_slug: Slug
    """Its catalog entry."""
    version: AppVersion
    """Its catalog version."""
    config: dict[str, Any] = Field(default_factory=dict)
    """Its settings, validated against its own version's config_schema."""
    members: list[Member]
    """Its members; their allocations are listed in the request's `allocations`."""
    placement_intent: dict[str, Any] = Field(default_factory=dict)
    """Its placement. Needed for an instance attached to the request's own (a portal a
    cluster's `replace_controller` moves to the new controller), whose placement names the
    request's instance."""


class OperationTargetRef(StrictModel):
    """An allocation the operation acts on."""

    allocation_id: UUID
    """The allocation's id; listed in `allocations`."""


class Operation(StrictModel):
    """The member operation to run: one playbook run."""

    id: Identifier
    """The platform's id of this operation; every event and host journal entry carries it."""
    type: OperationType
    """One of the version's operations (deploy, add_worker, ...)."""
    target: OperationTargetRef | SkipJsonSchema[None] = None
    """The allocation the operation acts on, for an operation with a target."""
    targets: (
        Annotated[list[OperationTargetRef], Field(min_length=1, max_length=MAX_TARGETS)]
        | SkipJsonSchema[None]
    ) = None
    """The allocations an operation whose manifest entry allows several (max_targets) acts on
    in one run, instead of target: a scale-out joins them all."""
    replacement: OperationTargetRef | SkipJsonSchema[None] = None
    """The new allocation that takes the target member's place, for an operation whose
    manifest entry has replacement: true (replace_worker, replace_controller)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The operation's options, validated against its options_schema."""

    @property
    def target_ids(self) -> list[UUID]:
        """The allocations the operation acts on, however the request named them."""
        if self.targets is not None:
            return [t.allocation_id for t in self.targets]
        return [self.target.allocation_id] if self.target is not None else []


class Allocation(StrictModel):
    """A host the platform allocated to the project."""

    id: UUID
    """The allocation's id."""
    project_id: Identifier
    """The project the allocation belongs to: must be the request's (tenant boundary)."""
    hostname: Hostname
    """The host's name; Slurm's node name for a worker."""
    address: NetworkAddress
    """The address (IP or DNS name) the driver connects to and the members reach it at."""
    ssh_user: PosixName = "root"
    """The account the driver logs in with (root, or one with passwordless sudo)."""
    ssh_port: Annotated[int, Field(ge=1, le=65535)] = 22
    """The host's SSH port."""
    cpus: Annotated[int, Field(ge=1, le=100000)] | SkipJsonSchema[None] = None
    """CPUs the platform allocated; Slurm's node definition uses what the host reports."""
    memory_mb: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = None
    """Memory the platform allocated, in MiB."""
    gpus: Annotated[int, Field(ge=0, le=64)] = 0
    """GPUs the platform allocated; a worker with GPUs gets gres/gpu and the DCGM exporter."""
    ssh_host_keys: list[SshHostKey] = Field(min_length=1, max_length=8)
    """The public host keys the allocation's sshd presents (as in /etc/ssh/ssh_host_*_key.pub,
    without comment). The driver connects only to a host that proves one of them: whatever
    else answers at the address gets nothing."""


class Credentials(StrictModel):
    """Files on the driver's host, inside the instance's credentials folder: never values."""

    ssh_private_key_file: AbsolutePath
    """The private key the driver connects with (mode 600 or 400, the driver's user's)."""
    secrets_dir: AbsolutePath | SkipJsonSchema[None] = None
    """The folder holding the secrets the config names by reference (OIDC client secret,
    database password, ...)."""
    munge_key_file: AbsolutePath | SkipJsonSchema[None] = None
    """The cluster's munge key, when the platform keeps it; otherwise the controller makes
    one."""


# A cluster of 10,000 workers plus its controller, portal and removed members' history; the
# bound keeps a request's size (and so validation time and memory) known in advance.
MAX_ALLOCATIONS = 20000


class OperationRequest(StrictModel):
    """One member operation the platform's app controller asks the driver to run."""

    api_version: Literal["v1"]
    """The contract's version."""
    correlation_id: Identifier
    """The platform's trace id; every event, audit line and host journal entry carries it."""
    org_id: Identifier
    """The organisation the project belongs to."""
    project_id: Identifier
    """The project every allocation must belong to."""
    instance: Instance
    """The instance the operation acts on."""
    linked_instances: list[LinkedInstance] = Field(default_factory=list, max_length=16)
    """Instances this one attaches to (the cluster a portal serves)."""
    members: list[Member] = Field(max_length=MAX_ALLOCATIONS)
    """Every member of the instance, with its status before this operation."""
    operation: Operation
    """The operation to run."""
    allocations: list[Allocation] = Field(max_length=MAX_ALLOCATIONS)
    """Every allocation the placement, members, targets or linked instances name."""
    credentials: Credentials
    """Where the SSH key and the secrets are on the driver's host."""
    source_policy: SourcePolicy | SkipJsonSchema[None] = None
    """The project's overlay on the platform's sources: the sources the project allows. Each
    source the operation installs from must match one of its rules; it narrows the platform's
    sources and never broadens them past the platform's deny list. Absent: the platform's
    sources, less its deny list."""
    tenant_sources: TenantSources | SkipJsonSchema[None] = None
    """The tenant's own sources (a private registry and its credential), used instead of the
    platform's; the platform's deny list and the project's overlay hold them too."""
    traceparent: TraceParent | SkipJsonSchema[None] = None
    """The platform's W3C trace context (`00-<trace id>-<parent id>-<flags>`): every event, the
    result and every host journal entry of the run carry its trace id. Without it the driver
    starts a trace of its own."""

    @field_validator("traceparent")
    @classmethod
    def _ids_not_zero(cls, value: str | None) -> str | None:
        if value is not None and not traceparent_ids_valid(value):
            raise ValueError("a trace id or parent id of zeros only is invalid (W3C trace context)")
        return value

    @property
    def tenant_npm_registry(self) -> TenantRegistry | None:
        """The tenant's own npm registry, where the request names one."""
        return self.tenant_sources.npm_registry if self.tenant_sources else None

    @cached_property
    def trace_id(self) -> str:
        """The run's trace id: the traceparent's, else a new one (128 random bits, as hex)."""
        return self.traceparent.split("-")[1] if self.traceparent else secrets.token_hex(16)

    def allocation(self, allocation_id: UUID) -> Allocation | None:
        return self._allocations_by_id.get(allocation_id)

    @cached_property
    def _allocations_by_id(self) -> dict[UUID, Allocation]:
        """One pass, however many allocations a request carries and references."""
        return {a.id: a for a in self.allocations}
