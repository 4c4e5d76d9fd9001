"""`slurm-app-driver validate-request`: is an operation request safe to act on?

Layers, each run only when the one before passed, so a finding never stems from an earlier
one: inline-secret scan and the request JSON Schema; the pydantic model; the app manifest's
placement/config/options schemas; then the rules no schema can express (tenant boundary,
allocation references, members vs placement, operation targets).
"""

import os
import re
import stat
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

from pydantic import BaseModel, ValidationError

from driver.addresses import (
    RESOLVES_RESERVED,
    address_problem,
    canonical_address,
    resolves_reserved,
)
from driver.apps import adapter_for
from driver.catalog import instance_credentials_dir, load_entry
from driver.documents import Document, LinePath
from driver.findings import Finding
from driver.models.manifest import Operation as OperationSpec
from driver.models.manifest import OperationTarget, Version
from driver.models.request import LinkedInstance, Member, MemberStatus, OperationRequest
from driver.schema_check import schema_findings, shipped_schema

# Key names that announce a secret; allowed only as references (paths or names).
_SECRET_KEY = re.compile(
    r"(secret|password|passwd|passphrase|private_?key|token|munge_?key|"
    r"api_?key)",
    re.IGNORECASE,
)
_REFERENCE_SUFFIXES = ("_file", "_ref", "_dir", "_id", "_ids")
_PEM_MARKER = "-----BEGIN"
ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass
class RequestCheck:
    """The outcome: the findings and, when valid, the typed request and its manifest."""

    findings: list[Finding] = field(default_factory=list)
    request: OperationRequest | None = None
    version: Version | None = None

    @property
    def valid(self) -> bool:
        return not self.findings and self.request is not None


@lru_cache(maxsize=1024)
def _names_a_secret(key: str) -> bool:
    """Cached: a 10,000-worker request repeats the same few keys 130,000 times."""
    return bool(_SECRET_KEY.search(key)) and not key.endswith(_REFERENCE_SUFFIXES)


def _inline_secrets(data: Any, path: LinePath = ()) -> Iterator[tuple[LinePath, str]]:
    if isinstance(data, dict):
        for key, value in data.items():
            key_path = (*path, key)
            if isinstance(key, str) and _names_a_secret(key) and value not in (None, "", {}, []):
                yield key_path, f"{key!r} looks like an inline secret"
            else:
                yield from _inline_secrets(value, key_path)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from _inline_secrets(item, (*path, index))
    elif isinstance(data, str) and _PEM_MARKER in data:
        yield path, "value contains a PEM key or certificate block"


def _secret_refs(config: Any, path: LinePath) -> Iterator[tuple[LinePath, str]]:
    if isinstance(config, dict):
        for key, value in config.items():
            if key.endswith("secret_ref") and isinstance(value, str):
                yield (*path, key), value
            else:
                yield from _secret_refs(value, (*path, key))


# A secret reference names a file directly inside secrets_dir: no path, no hidden file.
SECRET_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


# Where a request's credential files must lie, as findings say it.
_FOLDER_RULE = (
    "the instance's credentials folder <credentials root>/<project_id>/<instance.id> "
    "(SLURM_APP_CREDENTIALS_ROOT)"
)


def private_file(
    doc: Document,
    path: LinePath,
    file: Path,
    what: str,
    inside: Path,
    inside_name: str = _FOLDER_RULE,
) -> list[Finding]:
    """`file` must resolve (symlinks followed) to a regular file inside `inside`, owned by the
    driver's user, readable by it alone (0600 or 0400): the role copies it to hosts where the
    customer is root, so nothing else the driver can read may be named here."""
    try:
        real = file.resolve(strict=True)
        info = real.stat()
    except (OSError, RuntimeError):
        return [doc.finding("secret-file", path, f"{what} does not exist or cannot be read")]
    if not real.is_relative_to(inside.resolve()):
        return [doc.finding("secret-file", path, f"{what} resolves outside {inside_name}")]
    if not stat.S_ISREG(info.st_mode):
        return [doc.finding("secret-file", path, f"{what} is not a regular file")]
    if info.st_uid != os.geteuid():
        return [doc.finding("secret-file", path, f"{what} is not owned by the driver's user")]
    if info.st_mode & 0o777 not in (0o600, 0o400):
        mode = f"{info.st_mode & 0o777:o}"
        return [doc.finding("secret-file", path, f"{what} has mode {mode}; expected 600 or 400")]
    return []


def _bound_allocations(
    version: Version, placement: dict[str, Any]
) -> Iterator[tuple[LinePath, str, UUID]]:
    """(path, component_key, allocation id) for every allocation the placement binds."""
    for binding in version.placement_bindings:
        value = placement.get(binding.field)
        base: LinePath = ("instance", "placement_intent", binding.field)
        values = value if binding.multiple else [value]
        for index, raw in enumerate(values or []):
            if raw is None:
                continue
            path = (*base, index) if binding.multiple else base
            yield path, binding.component_key, UUID(raw)


# Host names become inventory names and Slurm NodeNames: none may be an Ansible pattern or
# group, or a Slurm keyword (`NodeName=DEFAULT` sets defaults for every later node).
RESERVED_HOSTNAMES = frozenset({"default", "all", "ungrouped", "localhost"})


class _Rules:
    """Semantic rules over a request that passed every schema."""

    def __init__(self, doc: Document, request: OperationRequest, version: Version) -> None:
        self.doc, self.request, self.version = doc, request, version
        self.findings: list[Finding] = []
        self.allocation_ids = {a.id for a in request.allocations}
        # An app's rules read its linked instances' configs, trusting their schema's shapes
        self.linked_configs_valid = True

    def add(self, code: str, path: LinePath, message: str) -> None:
        self.findings.append(self.doc.finding(code, path, message))

    def duplicates(
        self, values: list[Any], base: LinePath, field_name: str, compared: str = ""
    ) -> None:
        for value, count in Counter(values).items():
            if count > 1:
                index = len(values) - 1 - values[::-1].index(value)
                self.add(
                    "duplicate-id",
                    (*base, index, field_name),
                    f"{field_name} {value} appears {count} times{compared}",
                )

    def tenant_boundary(self) -> None:
        for index, allocation in enumerate(self.request.allocations):
            if allocation.project_id != self.request.project_id:
                self.add(
                    "tenant-boundary",
                    ("allocations", index, "project_id"),
                    f"allocation {allocation.id} belongs to project "
                    f"{allocation.project_id!r}, the instance to {self.request.project_id!r}",
                )
        self.duplicates([a.id for a in self.request.allocations], ("allocations",), "id")
        # Hostnames become inventory names and Slurm NodeNames: they must be unique too, and
        # without case, as DNS and the hosts' resolvers compare them.
        self.duplicates(
            [a.hostname.lower() for a in self.request.allocations],
            ("allocations",),
            "hostname",
            " (host names are compared without case)",
        )
        self.duplicates([m.member_id for m in self.request.members], ("members",), "member_id")
        # One host, one allocation: a second allocation at the controller's address (or with
        # its host key) would run a worker's teardown on the controller.
        self.duplicates(
            [canonical_address(a.address) for a in self.request.allocations],
            ("allocations",),
            "address",
        )
        owner: dict[str, int] = {}
        for index, allocation in enumerate(self.request.allocations):
            for k_index, key in enumerate(dict.fromkeys(allocation.ssh_host_keys)):
                first = owner.setdefault(key, index)
                if first != index:
                    self.add(
                        "duplicate-id",
                        ("allocations", index, "ssh_host_keys", k_index),
                        f"the host key is also allocations[{first}]'s: one host, one allocation",
                    )

    def allocation_names(self) -> None:
        """No reserved host name, no address that points back at a machine itself."""
        for index, allocation in enumerate(self.request.allocations):
            if allocation.hostname.lower() in RESERVED_HOSTNAMES:
                self.add(
                    "reserved-name",
                    ("allocations", index, "hostname"),
                    "expected a host name that is neither a Slurm keyword (DEFAULT) nor an "
                    f"Ansible name ({', '.join(sorted(RESERVED_HOSTNAMES - {'default'}))})",
                )
            problem = address_problem(allocation.address)
            if problem is not None:
                self.add("reserved-address", ("allocations", index, "address"), problem)

    def config_addresses(self) -> None:
        """The hosts the app's config makes its hosts contact, under the same policy."""
        adapter = adapter_for(self.request.instance.app_slug)
        for path, host in adapter.config_hosts(
            self.request.instance.config, ("instance", "config")
        ):
            problem = address_problem(host)
            if problem is not None:
                self.add("reserved-address", path, f"{host}: {problem}")

    def placement(self) -> dict[UUID, str]:
        bound: dict[UUID, str] = {}
        for path, component, allocation_id in _bound_allocations(
            self.version, self.request.instance.placement_intent
        ):
            if allocation_id not in self.allocation_ids:
                self.add(
                    "unknown-allocation",
                    path,
                    f"allocation {allocation_id} is not in the request's allocations",
                )
            if allocation_id in bound:
                self.add(
                    "allocation-reused",
                    path,
                    f"allocation {allocation_id} is already placed as {bound[allocation_id]}",
                )
            bound.setdefault(allocation_id, component)
        return bound

    def members(self, bound: dict[UUID, str]) -> None:
        live = [m for m in self.request.members if m.status is not MemberStatus.REMOVED]
        seen: set[tuple[str, UUID]] = set()
        for index, member in enumerate(self.request.members):
            base: LinePath = ("members", index)
            if self.version.component(member.component_key) is None:
                known = ", ".join(c.key for c in self.version.components)
                self.add(
                    "unknown-component",
                    (*base, "component_key"),
                    f"no component {member.component_key!r} (known: {known})",
                )
                continue
            if member.allocation_id not in self.allocation_ids:
                self.add(
                    "unknown-allocation",
                    (*base, "allocation_id"),
                    f"allocation {member.allocation_id} is not in the request's allocations",
                )
            self.second_member(member, seen, base)
            placed_as = bound.get(member.allocation_id)
            single = next(
                (
                    b
                    for b in self.version.placement_bindings
                    if b.component_key == member.component_key and not b.multiple
                ),
                None,
            )
            if single is not None and placed_as != member.component_key:
                self.add(
                    "member-mismatch",
                    (*base, "allocation_id"),
                    f"the placement puts the {member.component_key} on "
                    f"{self.request.instance.placement_intent.get(single.field)}",
                )
        self.component_counts(self.version, live, ("members",))

    def second_member(self, member: Member, seen: set[tuple[str, UUID]], base: LinePath) -> None:
        """One member of a component per allocation (a same_node controller and worker share
        theirs, as two components)."""
        pair = (member.component_key, member.allocation_id)
        if pair in seen:
            self.add(
                "allocation-reused",
                (*base, "allocation_id"),
                f"a second {member.component_key} member on allocation {member.allocation_id}",
            )
        seen.add(pair)

    def component_counts(self, version: Version, live: list[Member], path: LinePath) -> None:
        for c_index, component in enumerate(version.components):
            count = sum(1 for m in live if m.component_key == component.key)
            if count < component.min_count:
                self.add(
                    "member-mismatch",
                    path,
                    f"expected at least {component.min_count} {component.key} member(s), "
                    f"got {count}",
                )
            if component.max_count is not None and count > component.max_count:
                self.add(
                    "member-mismatch",
                    path,
                    f"expected at most {component.max_count} {component.key} member(s), "
                    f"got {count} (see components[{c_index}])",
                )

    def target(self) -> None:
        operation = self.request.operation
        spec = self.version.operation(operation.type)
        assert spec is not None  # checked by the schema layer
        self._replacement(spec)
        if operation.target is not None and operation.targets is not None:
            self.add(
                "target-unexpected",
                ("operation", "targets"),
                "give either target or targets, not both",
            )
            return
        named = operation.target or operation.targets
        if spec.target is OperationTarget.NONE:
            if named is not None:
                field = "target" if operation.target is not None else "targets"
                self.add(
                    "target-unexpected",
                    ("operation", field),
                    f"{operation.type} acts on the whole instance",
                )
            return
        if named is None:
            self.add(
                "target-missing",
                ("operation", "target"),
                f"{operation.type} needs the allocation it acts on",
            )
            return
        if operation.targets is None:
            self._one_target(
                spec, ("operation", "target", "allocation_id"), operation.target_ids[0]
            )
            return
        if len(operation.targets) > spec.max_targets:
            self.add(
                "target-unexpected",
                ("operation", "targets"),
                f"{operation.type} acts on at most {spec.max_targets} allocation(s) per "
                f"request, got {len(operation.targets)}",
            )
            return
        seen: set[UUID] = set()
        for index, allocation_id in enumerate(operation.target_ids):
            path: LinePath = ("operation", "targets", index, "allocation_id")
            if allocation_id in seen:
                self.add("duplicate-key", path, f"allocation {allocation_id} is named twice")
                continue
            seen.add(allocation_id)
            self._one_target(spec, path, allocation_id)

    def _replacement(self, spec: OperationSpec) -> None:
        """The new allocation that takes a target member's place: named where the operation
        takes one, not already backing another component, never the target itself."""
        operation = self.request.operation
        if not spec.replacement:
            if operation.replacement is not None:
                self.add(
                    "target-unexpected",
                    ("operation", "replacement"),
                    f"{operation.type} takes no replacement",
                )
            return
        if operation.replacement is None:
            self.add(
                "target-missing",
                ("operation", "replacement"),
                f"{operation.type} needs the new allocation that takes the target's place",
            )
            return
        path: LinePath = ("operation", "replacement", "allocation_id")
        allocation_id = operation.replacement.allocation_id
        if allocation_id in operation.target_ids:
            self.add("target-invalid", path, "the replacement is the target itself")
            return
        joining = spec.model_copy(update={"target": OperationTarget.NEW_ALLOCATION})
        self._one_target(joining, path, allocation_id)

    def _one_target(self, spec: OperationSpec, path: LinePath, allocation_id: UUID) -> None:
        if allocation_id not in self.allocation_ids:
            self.add(
                "unknown-allocation",
                path,
                f"allocation {allocation_id} is not in the request's allocations",
            )
            return
        on_target = {
            m.component_key for m in self.request.members if m.allocation_id == allocation_id
        }
        wanted = spec.target_component_key or ""
        if spec.target is OperationTarget.MEMBER and wanted not in on_target:
            self.add(
                "target-invalid",
                path,
                f"no {wanted} member runs on allocation {allocation_id}",
            )
        if spec.target is OperationTarget.NEW_ALLOCATION and on_target and wanted not in on_target:
            self.add(
                "target-invalid",
                path,
                f"allocation {allocation_id} already backs {', '.join(sorted(on_target))}",
            )

    def linked_instances(self) -> None:
        """Each linked instance is checked like the instance itself: referenced by the
        placement, of the project, its app and version known, its config valid under its own
        schema and rules, its members of known components in the counts its manifest allows,
        on allocations of this request (so of this project)."""
        request = self.request
        referenced: set[UUID] = set()
        for reference in self.version.instance_references:
            raw = request.instance.placement_intent.get(reference.field)
            if raw is None:
                continue
            referenced.add(UUID(raw))
            match = next((i for i in request.linked_instances if i.id == UUID(raw)), None)
            if match is None or match.app_slug != reference.app_slug:
                self.add(
                    "linked-instance-missing",
                    ("instance", "placement_intent", reference.field),
                    f"no {reference.app_slug} instance {raw} in linked_instances",
                )
        self.duplicates([i.id for i in request.linked_instances], ("linked_instances",), "id")
        for index, linked in enumerate(request.linked_instances):
            base: LinePath = ("linked_instances", index)
            if linked.id not in referenced:
                self.add(
                    "linked-instance-unexpected",
                    (*base, "id"),
                    "expected only instances the placement intent references",
                )
            if linked.project_id != request.project_id:
                self.add(
                    "tenant-boundary",
                    (*base, "project_id"),
                    f"linked instance {linked.id} belongs to project {linked.project_id!r}, "
                    f"the instance to {request.project_id!r}",
                )
            if linked.id == request.instance.id:
                self.add(
                    "linked-instance-unexpected",
                    (*base, "id"),
                    "expected another instance than the request's own",
                )
            self.linked_instance(linked, base)

    def linked_instance(self, linked: LinkedInstance, base: LinePath) -> None:
        loaded = load_entry(linked.app_slug)
        if loaded is None:
            self.add("unknown-app", (*base, "app_slug"), f"no catalog entry {linked.app_slug!r}")
            return
        version = loaded.entry.version(linked.version)
        if version is None:
            self.add(
                "unknown-version",
                (*base, "version"),
                f"{linked.app_slug} has no version {linked.version}",
            )
            return
        config_findings = schema_findings(
            self.doc, version.config_schema, linked.config, (*base, "config"), "config"
        )
        self.findings += config_findings
        self.linked_configs_valid &= not config_findings
        if not config_findings:
            for violation in adapter_for(linked.app_slug).config_rules(
                linked.config, (*base, "config")
            ):
                self.add(violation.code, violation.path, violation.message)
        live = []
        seen: set[tuple[str, UUID]] = set()
        for m_index, member in enumerate(linked.members):
            path: LinePath = (*base, "members", m_index)
            if version.component(member.component_key) is None:
                self.add(
                    "unknown-component",
                    (*path, "component_key"),
                    f"{linked.app_slug} has no component {member.component_key!r}",
                )
            if member.allocation_id not in self.allocation_ids:
                self.add(
                    "unknown-allocation",
                    (*path, "allocation_id"),
                    f"allocation {member.allocation_id} is not in the request's allocations",
                )
            if member.status is not MemberStatus.REMOVED:
                live.append(member)
                self.second_member(member, seen, path)
        self.duplicates([m.member_id for m in linked.members], (*base, "members"), "member_id")
        self.component_counts(version, live, (*base, "members"))


def check_names(doc: Document, request: OperationRequest) -> list[Finding]:
    """DNS names among the addresses a run contacts (allocations, the config's URLs and mail
    relays) must not resolve to loopback, link-local (cloud metadata), unspecified or
    multicast addresses; run before acting. A name that does not resolve is left to the run
    (host_unreachable, or the service's own error)."""
    adapter = adapter_for(request.instance.app_slug)
    hosts: list[tuple[LinePath, str]] = [
        (("allocations", index, "address"), allocation.address)
        for index, allocation in enumerate(request.allocations)
    ]
    hosts += list(adapter.config_hosts(request.instance.config, ("instance", "config")))
    return [
        doc.finding("reserved-address", path, RESOLVES_RESERVED)
        for path, host in hosts
        if resolves_reserved(host)
    ]


def check_files(doc: Document, request: OperationRequest) -> list[Finding]:
    """Secret files exist, are private and lie inside the instance's own credentials folder
    (`<root>/<project_id>/<instance_id>/`); run before acting, optional for dry checks.
    Messages never name a secret reference's value."""
    creds = request.credentials
    folder = instance_credentials_dir(request.project_id, request.instance.id)
    ssh_key = Path(creds.ssh_private_key_file)
    findings = private_file(
        doc, ("credentials", "ssh_private_key_file"), ssh_key, "the SSH private key", folder
    )
    if creds.munge_key_file:
        findings += private_file(
            doc,
            ("credentials", "munge_key_file"),
            Path(creds.munge_key_file),
            "the munge key",
            folder,
        ) or _not_the_ssh_key(
            doc, ("credentials", "munge_key_file"), Path(creds.munge_key_file), ssh_key
        )
    if not creds.secrets_dir:
        return findings
    secrets_dir = Path(creds.secrets_dir)
    if not secrets_dir.resolve().is_relative_to(folder.resolve()) or not secrets_dir.is_dir():
        return [
            *findings,
            doc.finding(
                "secret-file",
                ("credentials", "secrets_dir"),
                f"secrets_dir must be a folder inside {_FOLDER_RULE}",
            ),
        ]
    if _same_file(secrets_dir, ssh_key.parent):
        return [
            *findings,
            doc.finding(
                "secret-file",
                ("credentials", "secrets_dir"),
                "secrets_dir holds the SSH private key the driver connects with; expected a "
                "folder of the secrets the config names, apart from the driver's own files",
            ),
        ]
    for path, name in _secret_refs(request.instance.config, ("instance", "config")):
        if not SECRET_REF.fullmatch(name):
            findings.append(
                doc.finding(
                    "secret-file",
                    path,
                    "expected the bare name of a file in secrets_dir (letters, digits, . _ -)",
                )
            )
            continue
        findings += private_file(
            doc,
            path,
            secrets_dir / name,
            "the secret file this field names",
            secrets_dir,
            "secrets_dir",
        ) or _not_the_ssh_key(doc, path, secrets_dir / name, ssh_key)
    return findings


def _same_file(one: Path, other: Path) -> bool:
    try:
        return one.samefile(other)
    except OSError:
        return False


def _not_the_ssh_key(doc: Document, path: LinePath, file: Path, ssh_key: Path) -> list[Finding]:
    """A secret reference names a secret, never the key the driver connects with (a hard link
    to it included): the roles copy secrets to hosts the customer is root on."""
    if not _same_file(file, ssh_key):
        return []
    return [
        doc.finding(
            "secret-file",
            path,
            "names the SSH private key the driver connects with; expected a secret of the app's",
        )
    ]


def contract_checked(
    doc: Document, contract: str, model: type[ModelT]
) -> tuple[ModelT | None, list[Finding]]:
    """A request against its shipped contract, then the driver's model of it: the typed
    request, or the findings of the first layer that refused it."""
    findings = schema_findings(doc, shipped_schema(contract), doc.data, (), "schema")
    if findings:
        return None, findings
    try:
        return model.model_validate(doc.data), []
    except ValidationError as exc:
        return None, [doc.finding("model", tuple(e["loc"]), e["msg"]) for e in exc.errors()]


def check_request(doc: Document, *, files: bool = False) -> RequestCheck:
    result = RequestCheck()
    result.findings = [
        doc.finding("inline-secret", path, message) for path, message in _inline_secrets(doc.data)
    ]
    if result.findings:
        # Reported alone: the schema layer would flag the same keys again, less precisely.
        return result
    request, result.findings = contract_checked(
        doc, "operation-request.schema.json", OperationRequest
    )
    if request is None:
        return result

    loaded = load_entry(request.instance.app_slug)
    if loaded is None:
        result.findings.append(
            doc.finding(
                "unknown-app",
                ("instance", "app_slug"),
                f"no catalog entry {request.instance.app_slug!r}",
            )
        )
        return result
    version = loaded.entry.version(request.instance.version)
    if version is None:
        known = ", ".join(v.version for v in loaded.entry.versions)
        result.findings.append(
            doc.finding(
                "unknown-version",
                ("instance", "version"),
                f"{loaded.entry.slug} has versions {known}",
            )
        )
        return result
    findings = schema_findings(
        doc,
        version.placement_schema,
        request.instance.placement_intent,
        ("instance", "placement_intent"),
        "placement",
    )
    findings += schema_findings(
        doc, version.config_schema, request.instance.config, ("instance", "config"), "config"
    )
    spec = version.operation(request.operation.type)
    if spec is None:
        known = ", ".join(op.type for op in version.operations)
        findings.append(
            doc.finding(
                "unknown-operation",
                ("operation", "type"),
                f"{loaded.entry.slug} {version.version} supports: {known}",
            )
        )
    else:
        findings += schema_findings(
            doc, spec.options_schema, request.operation.options, ("operation", "options"), "options"
        )
    if findings:
        result.findings = findings
        return result

    rules = _Rules(doc, request, version)
    rules.tenant_boundary()
    rules.allocation_names()
    rules.config_addresses()
    bound = rules.placement()
    rules.members(bound)
    rules.target()
    rules.linked_instances()
    if rules.linked_configs_valid:
        for violation in adapter_for(loaded.entry.slug).rules(request, version):
            rules.add(violation.code, violation.path, violation.message)
    if not request.credentials.secrets_dir:
        for path, _name in _secret_refs(request.instance.config, ("instance", "config")):
            rules.add(
                "secret-file",
                path,
                "names a secret file but credentials.secrets_dir is not set",
            )
    if files:
        rules.findings += check_names(doc, request)
        rules.findings += check_files(doc, request)
    result.findings = rules.findings
    if not result.findings:
        result.request, result.version = request, version
    return result
