"""The catalog entry (app manifest) contract.

The JSON Schema shipped as `driver/schemas/catalog-entry.schema.json` is generated from these
models (`python -m driver.schemagen`), so the published contract and the driver's reading of
it cannot drift apart.
"""

from enum import StrEnum
from typing import Annotated, Any

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from driver.models.common import (
    MAX_TARGETS,
    AbsolutePath,
    AppVersion,
    ComponentKey,
    DisplayText,
    FieldName,
    LongText,
    OperationType,
    RelativeFile,
    Slug,
    StrictModel,
    UrlPath,
)

Port = Annotated[int, Field(ge=1, le=65535)]
JsonSchemaObject = Annotated[
    dict[str, Any],
    Field(description="A JSON Schema (Draft 2020-12) whose instances are objects."),
]


class RuntimeBackend(StrEnum):
    BARE_METAL = "bare_metal"
    VM = "vm"
    KUBERNETES = "kubernetes"


InventoryGroup = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64)]
# What an operation's `touches` may name besides component keys.
TOUCH_KEYWORDS = ("placement", "target", "replacement")
Touch = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=32)]


class Component(StrictModel):
    """A logical role that members of an instance take (controller, worker, portal)."""

    key: ComponentKey
    description: DisplayText
    min_count: Annotated[int, Field(ge=0)] = 0
    max_count: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = None
    inventory_groups: list[InventoryGroup] = Field(
        default_factory=list, description="Ansible groups a member of this component joins."
    )


class PlacementBinding(StrictModel):
    """Declares that a placement field holds allocation ids for one component."""

    field: FieldName
    component_key: ComponentKey
    multiple: bool = False


class InstanceReference(StrictModel):
    """Declares that a placement field names another app instance (a companion's parent)."""

    field: FieldName
    app_slug: Slug


class OperationTarget(StrEnum):
    NONE = "none"
    NEW_ALLOCATION = "new_allocation"
    MEMBER = "member"


class Operation(StrictModel):
    type: OperationType
    description: DisplayText
    playbook: RelativeFile
    target: OperationTarget = OperationTarget.NONE
    target_component_key: ComponentKey | SkipJsonSchema[None] = None
    max_targets: Annotated[int, Field(ge=1, le=MAX_TARGETS)] = Field(
        default=1,
        description="How many allocations one request may name in operation.targets (a "
        "new_allocation operation that joins several in one run); 1: operation.target only.",
    )
    replacement: bool = Field(
        default=False,
        description="The operation also takes operation.replacement: a new allocation that "
        "takes the target member's place (target: member).",
    )
    read_only: bool = False
    touches: Annotated[list[Touch], Field(min_length=1)] = Field(
        description="Hosts the operation runs on: component keys (their live members), "
        "'placement' (every allocation the placement binds) or 'target'.",
    )
    options_schema: JsonSchemaObject = Field(
        default_factory=lambda: {"type": "object", "additionalProperties": False}
    )


class EndpointType(StrEnum):
    ALLOCATION_PORT = "allocation_port"


class Protocol(StrEnum):
    HTTP = "http"
    HTTPS = "https"


class Endpoint(StrictModel):
    type: EndpointType
    component_key: ComponentKey
    port: Port
    path: UrlPath = "/"
    protocol: Protocol = Protocol.HTTPS


class AuthStrategy(StrEnum):
    OIDC_PROXY = "oidc_proxy"
    PLATFORM_TOKEN = "platform_token"
    NONE = "none"


class Auth(StrictModel):
    strategy: AuthStrategy


class Embedding(StrictModel):
    allowed: bool
    sandbox: (
        Annotated[str, Field(pattern=r"^[a-z-]+( [a-z-]+)*$", max_length=512)]
        | SkipJsonSchema[None]
    ) = None


class Tab(StrictModel):
    key: ComponentKey
    label: DisplayText
    endpoint: Endpoint
    auth: Auth
    embedding: Embedding = Embedding(allowed=False)


class Ui(StrictModel):
    """Either one endpoint for the whole instance, or named tabs, or both."""

    endpoint: Endpoint | SkipJsonSchema[None] = None
    auth: Auth | SkipJsonSchema[None] = None
    embedding: Embedding | SkipJsonSchema[None] = None
    tabs: list[Tab] = Field(default_factory=list)


TaskName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]{0,31}$", max_length=32)]
TaskType = Annotated[
    str,
    Field(
        pattern=r"^app\.[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*$",
        max_length=64,
        description="The node agent's task type, e.g. app.slurm.query.",
    ),
]


class Task(StrictModel):
    """A typed task the platform's node agent runs on one component's host: `command` reads
    {task, correlation_id, user, input} as JSON on stdin and writes one JSON answer
    ({task, correlation_id, status: ok|error, output | error, audit}); its exit code says the
    outcome. The input is validated against input_schema by the platform and by the command."""

    name: TaskName
    type: TaskType
    description: DisplayText
    component_key: ComponentKey
    command: AbsolutePath
    audited: bool = Field(
        default=False, description="Mutating: each call writes an audit line it also returns."
    )
    input_schema: JsonSchemaObject
    output_schema: JsonSchemaObject


class Version(StrictModel):
    version: AppVersion
    release_notes: LongText | SkipJsonSchema[None] = None
    upgrade_from: list[AppVersion] = Field(
        default_factory=list,
        description="The versions an instance can be upgraded from to this one (the upgrade "
        "operation), and so the ones a rollback from this version returns to. This version's "
        "config_schema accepts their instances' configs.",
    )
    components: Annotated[list[Component], Field(min_length=1)]
    placement_schema: JsonSchemaObject
    config_schema: JsonSchemaObject
    placement_bindings: list[PlacementBinding] = Field(default_factory=list)
    instance_references: list[InstanceReference] = Field(default_factory=list)
    operations: Annotated[list[Operation], Field(min_length=1)]
    ui: Ui
    tasks: list[Task] = Field(default_factory=list)

    def operation(self, operation_type: str) -> Operation | None:
        return next((op for op in self.operations if op.type == operation_type), None)

    def component(self, key: str) -> Component | None:
        return next((c for c in self.components if c.key == key), None)


class Capability(StrEnum):
    GPU = "gpu"


class Exporter(StrictModel):
    name: ComponentKey
    port: Port
    path: UrlPath = "/metrics"
    component_keys: Annotated[list[ComponentKey], Field(min_length=1)]
    requires: list[Capability] = Field(
        default_factory=list,
        description="Host capabilities the exporter needs; 'gpu' = only on hosts with GPUs.",
    )


class DashboardSource(StrEnum):
    BUNDLED = "bundled"


class Dashboard(StrictModel):
    source: DashboardSource
    path: RelativeFile


class Monitoring(StrictModel):
    exporters: list[Exporter] = Field(default_factory=list)
    grafana_dashboards: list[Dashboard] = Field(default_factory=list)


class CatalogEntry(StrictModel):
    slug: Slug
    display_name: DisplayText
    description: LongText | SkipJsonSchema[None] = None
    runtime_backend: RuntimeBackend
    versions: Annotated[list[Version], Field(min_length=1)]
    monitoring: Monitoring | SkipJsonSchema[None] = None

    def version(self, version: str) -> Version | None:
        return next((v for v in self.versions if v.version == version), None)

    def reading(self, version: str) -> Version | None:
        """The catalog version that reads an instance at `version`: that version, or the one
        it can be upgraded to (a linked cluster still on an earlier release)."""
        return self.version(version) or next(
            (v for v in self.versions if version in v.upgrade_from), None
        )
