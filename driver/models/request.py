"""The operation request the platform's app controller sends, one per member operation.

`driver/schemas/operation-request.schema.json` is generated from these models. Secrets are
never carried inline: `credentials` holds file paths only, and the instance config refers to
secrets by name (resolved inside `credentials.secrets_dir`).
"""

from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field
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
)


class MemberStatus(StrEnum):
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
    member_id: Identifier
    component_key: ComponentKey
    allocation_id: UUID
    status: MemberStatus


class Instance(StrictModel):
    id: UUID
    app_slug: Slug
    version: AppVersion
    name: Identifier | SkipJsonSchema[None] = None
    config: dict[str, Any] = Field(
        default_factory=dict, description="Validated against the version's config_schema."
    )
    placement_intent: dict[str, Any] = Field(
        description="Validated against the version's placement_schema."
    )


class LinkedInstance(StrictModel):
    """An instance this one attaches to (the Slurm cluster an OOD portal serves), checked like
    the instance itself: its project, its app, its config and its members."""

    id: UUID
    project_id: Identifier
    app_slug: Slug
    version: AppVersion
    config: dict[str, Any] = Field(default_factory=dict)
    members: list[Member]


class OperationTargetRef(StrictModel):
    allocation_id: UUID


class Operation(StrictModel):
    id: Identifier
    type: OperationType
    target: OperationTargetRef | SkipJsonSchema[None] = None
    targets: (
        Annotated[list[OperationTargetRef], Field(min_length=1, max_length=MAX_TARGETS)]
        | SkipJsonSchema[None]
    ) = Field(
        default=None,
        description="The allocations an operation whose manifest entry allows several "
        "(max_targets) acts on in one run, instead of target: a scale-out joins them all.",
    )
    replacement: OperationTargetRef | SkipJsonSchema[None] = Field(
        default=None,
        description="The new allocation that takes the target member's place, for an "
        "operation whose manifest entry has replacement: true (replace_worker, "
        "replace_controller).",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="Validated against the operation's options_schema."
    )

    @property
    def target_ids(self) -> list[UUID]:
        """The allocations the operation acts on, however the request named them."""
        if self.targets is not None:
            return [t.allocation_id for t in self.targets]
        return [self.target.allocation_id] if self.target is not None else []


class Allocation(StrictModel):
    id: UUID
    project_id: Identifier
    hostname: Hostname
    address: NetworkAddress
    ssh_user: PosixName = "root"
    ssh_port: Annotated[int, Field(ge=1, le=65535)] = 22
    cpus: Annotated[int, Field(ge=1, le=100000)] | SkipJsonSchema[None] = None
    memory_mb: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = None
    gpus: Annotated[int, Field(ge=0, le=64)] = 0
    ssh_host_keys: list[SshHostKey] = Field(
        min_length=1,
        max_length=8,
        description="The public host keys the allocation's sshd presents (as in "
        "/etc/ssh/ssh_host_*_key.pub, without comment). The driver connects only to a host that "
        "proves one of them: whatever else answers at the address gets nothing.",
    )


class Credentials(StrictModel):
    ssh_private_key_file: AbsolutePath
    secrets_dir: AbsolutePath | SkipJsonSchema[None] = None
    munge_key_file: AbsolutePath | SkipJsonSchema[None] = None


# A cluster of 10,000 workers plus its controller, portal and removed members' history; the
# bound keeps a request's size (and so validation time and memory) known in advance.
MAX_ALLOCATIONS = 20000


class OperationRequest(StrictModel):
    api_version: Literal["v1"]
    correlation_id: Identifier
    org_id: Identifier
    project_id: Identifier
    instance: Instance
    linked_instances: list[LinkedInstance] = Field(default_factory=list, max_length=16)
    members: list[Member] = Field(max_length=MAX_ALLOCATIONS)
    operation: Operation
    allocations: list[Allocation] = Field(max_length=MAX_ALLOCATIONS)
    credentials: Credentials

    def allocation(self, allocation_id: UUID) -> Allocation | None:
        return self._allocations_by_id.get(allocation_id)

    @cached_property
    def _allocations_by_id(self) -> dict[UUID, Allocation]:
        """One pass, however many allocations a request carries and references."""
        return {a.id: a for a in self.allocations}
