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
    """The component's key; members name it in component_key."""
    description: DisplayText
    """What the component does, for the platform's UI."""
    min_count: Annotated[int, Field(ge=0)] = 0
    """The fewest members the component may have in a valid instance."""
    max_count: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = None
    """The most members the component may have; unbounded when absent."""
    inventory_groups: list[InventoryGroup] = Field(
        default_factory=list, description="Ansible groups a member of this component joins."
    )


class PlacementBinding(StrictModel):
    """Declares that a placement field holds allocation ids for one component."""

    field: FieldName
    """The placement_intent field that holds the allocation id(s)."""
    component_key: ComponentKey
    """The component those allocations serve."""
    multiple: bool = False
    """The field holds a list of allocation ids rather than one."""


class InstanceReference(StrictModel):
    """Declares that a placement field names another app instance (a companion's parent)."""

    field: FieldName
    """The placement_intent field that holds the other instance's id."""
    app_slug: Slug
    """The app that instance must run."""


class OperationTarget(StrEnum):
    NONE = "none"
    NEW_ALLOCATION = "new_allocation"
    MEMBER = "member"


class Operation(StrictModel):
    type: OperationType
    """The operation's name, as requests give it in operation.type."""
    description: DisplayText
    """What the operation does, for the platform's UI."""
    playbook: RelativeFile
    """The playbook the driver runs, relative to the bundle's root."""
    target: OperationTarget = OperationTarget.NONE
    """What operation.target names: nothing, a new allocation to join, or a member."""
    target_component_key: ComponentKey | SkipJsonSchema[None] = None
    """The component the target serves or will serve."""
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
    """The operation changes nothing on any host; a change it reports is a bundle defect
    (read_only_violated)."""
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
    """How the platform reaches the endpoint: a port on a member's allocation."""
    component_key: ComponentKey
    """The component whose member serves the endpoint."""
    port: Port
    """The port on that member's allocation."""
    path: UrlPath = "/"
    """The URL path of the endpoint."""
    protocol: Protocol = Protocol.HTTPS
    """http or https."""


class AuthStrategy(StrEnum):
    OIDC_PROXY = "oidc_proxy"
    PLATFORM_TOKEN = "platform_token"
    NONE = "none"


class Auth(StrictModel):
    strategy: AuthStrategy
    """How users are authenticated in front of the endpoint."""


class Embedding(StrictModel):
    allowed: bool
    """Whether the platform may show the endpoint in an iframe."""
    sandbox: (
        Annotated[str, Field(pattern=r"^[a-z-]+( [a-z-]+)*$", max_length=512)]
        | SkipJsonSchema[None]
    ) = None
    """The iframe's sandbox tokens, space-separated."""


class Tab(StrictModel):
    key: ComponentKey
    """The tab's key, unique in the version."""
    label: DisplayText
    """The tab's label in the platform's UI."""
    endpoint: Endpoint
    """Where the tab's content is served."""
    auth: Auth
    """How the tab's users are authenticated."""
    embedding: Embedding = Embedding(allowed=False)
    """Whether and how the tab is embedded."""


class Ui(StrictModel):
    """Either one endpoint for the whole instance, or named tabs, or both."""

    endpoint: Endpoint | SkipJsonSchema[None] = None
    """The instance's one endpoint, when it has one."""
    auth: Auth | SkipJsonSchema[None] = None
    """How users of that endpoint are authenticated."""
    embedding: Embedding | SkipJsonSchema[None] = None
    """Whether and how that endpoint is embedded."""
    tabs: list[Tab] = Field(default_factory=list)
    """Named tabs, each with its own endpoint (native tabs call tasks)."""


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
    """The task's name, as task requests give it in task.name."""
    type: TaskType
    description: DisplayText
    """What the task answers or does, for the platform's UI."""
    component_key: ComponentKey
    """The component on whose member's host the command runs."""
    command: AbsolutePath
    """The absolute path of the task's command on that host."""
    audited: bool = Field(
        default=False, description="Mutating: each call writes an audit line it also returns."
    )
    input_schema: JsonSchemaObject
    output_schema: JsonSchemaObject


class Version(StrictModel):
    version: AppVersion
    """The version's number (MAJOR.MINOR or MAJOR.MINOR.PATCH)."""
    release_notes: LongText | SkipJsonSchema[None] = None
    """What changed in this version, for the platform's UI."""
    upgrade_from: list[AppVersion] = Field(
        default_factory=list,
        description="The versions an instance can be upgraded from to this one (the upgrade "
        "operation), and so the ones a rollback from this version returns to. This version's "
        "config_schema accepts their instances' configs.",
    )
    components: Annotated[list[Component], Field(min_length=1)]
    """The logical roles members take."""
    placement_schema: JsonSchemaObject
    config_schema: JsonSchemaObject
    placement_bindings: list[PlacementBinding] = Field(default_factory=list)
    """Which placement fields hold which component's allocations."""
    instance_references: list[InstanceReference] = Field(default_factory=list)
    """Which placement fields name another instance (a companion's parent)."""
    operations: Annotated[list[Operation], Field(min_length=1)]
    """The member operations the driver runs for this version."""
    ui: Ui
    """How users reach the instance."""
    tasks: list[Task] = Field(default_factory=list)
    """Typed tasks the platform's node agent runs (native tabs, billing)."""

    def operation(self, operation_type: str) -> Operation | None:
        return next((op for op in self.operations if op.type == operation_type), None)

    def component(self, key: str) -> Component | None:
        return next((c for c in self.components if c.key == key), None)


class Capability(StrEnum):
    GPU = "gpu"


class Exporter(StrictModel):
    name: ComponentKey
    """The exporter's name; Prometheus's job name."""
    port: Port
    """The port it listens on, on each host it runs on."""
    path: UrlPath = "/metrics"
    """The metrics path."""
    component_keys: Annotated[list[ComponentKey], Field(min_length=1)]
    """The components whose members run it."""
    requires: list[Capability] = Field(
        default_factory=list,
        description="Host capabilities the exporter needs; 'gpu' = only on hosts with GPUs.",
    )


class DashboardSource(StrEnum):
    BUNDLED = "bundled"


class Dashboard(StrictModel):
    source: DashboardSource
    """Where the dashboard comes from: the bundle itself."""
    path: RelativeFile
    """The dashboard's JSON file, relative to the bundle's root."""


class Monitoring(StrictModel):
    exporters: list[Exporter] = Field(default_factory=list)
    """The Prometheus exporters the bundle installs and scrapes."""
    grafana_dashboards: list[Dashboard] = Field(default_factory=list)
    """The dashboards Grafana is provisioned with."""


class CatalogEntry(StrictModel):
    slug: Slug
    """The app's identifier in the catalog; requests give it as instance.app_slug."""
    display_name: DisplayText
    """The app's name in the platform's UI."""
    description: LongText | SkipJsonSchema[None] = None
    """What the app is, for the platform's UI."""
    runtime_backend: RuntimeBackend
    """What the app's members run on."""
    versions: Annotated[list[Version], Field(min_length=1)]
    """The app's versions, each with its own contract."""
    monitoring: Monitoring | SkipJsonSchema[None] = None
    """The monitoring every version's instances get."""

    def version(self, version: str) -> Version | None:
        return next((v for v in self.versions if v.version == version), None)

    def reading(self, version: str) -> Version | None:
        """The catalog version that reads an instance at `version`: that version, or the one
        it can be upgraded to (a linked cluster still on an earlier release)."""
        return self.version(version) or next(
            (v for v in self.versions if version in v.upgrade_from), None
        )
