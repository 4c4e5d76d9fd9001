"""`slurm-app-driver validate-request`: is an operation request safe to act on?

Layers, each run only when the one before passed, so a finding never stems from an earlier
one: inline-secret scan and the request JSON Schema; the pydantic model; the app manifest's
placement/config/options schemas of the version acted on (`versions`: an upgrade's is the one
it goes to); then the rules no schema can express, one module per concern: tenant boundary,
placement and members (`members`), operation targets (`targets`), linked instances
(`linked`), the address policy every address passes (`addresses`), credential files
(`credentials`). `check_request` is the one entry point.
"""

from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from driver.apps import adapter_for
from driver.catalog import load_entry
from driver.documents import Document
from driver.findings import Finding, bounded
from driver.models.manifest import Version
from driver.models.request import OperationRequest
from driver.request_check import addresses, linked, members, sources, targets
from driver.request_check.credentials import check_files, inline_secrets, request_secret_refs
from driver.request_check.rules import Rules
from driver.request_check.versions import checked_version
from driver.schema_check import schema_findings, shipped_schema
from driver.site import load_site

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass
class RequestCheck:
    """The outcome: the findings and, when valid, the typed request and its manifest."""

    findings: list[Finding] = field(default_factory=list)
    request: OperationRequest | None = None
    version: Version | None = None
    # how many findings there were, of which `findings` lists the first MAX_FINDINGS
    findings_total: int = 0

    @property
    def valid(self) -> bool:
        return not self.findings and self.request is not None


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
    result = _checked_request(doc, files)
    result.findings_total = len(result.findings)
    result.findings = bounded(result.findings)
    return result


def _checked_request(doc: Document, files: bool) -> RequestCheck:
    result = RequestCheck()
    result.findings = [
        doc.finding("inline-secret", path, message) for path, message in inline_secrets(doc.data)
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
    version, result.findings = checked_version(doc, loaded.entry, request)
    if version is None:
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

    rules = Rules(doc, request, version)
    members.tenant_boundary(rules)
    addresses.allocation_names(rules)
    addresses.config_addresses(rules)
    members.members(rules, members.placement(rules))
    targets.target(rules)
    # an app's rules read its linked instances' configs, trusting their schemas' shapes
    if linked.linked_instances(rules):
        for violation in adapter_for(loaded.entry.slug).rules(request, version):
            rules.add(violation.code, violation.path, violation.message)
    sources.source_policy(rules, load_site())
    if not request.credentials.secrets_dir:
        for path, _name in request_secret_refs(request):
            rules.add(
                "secret-file",
                path,
                "names a secret file but credentials.secrets_dir is not set",
            )
    if files:
        rules.findings += addresses.check_names(doc, request)
        rules.findings += check_files(doc, request)
    result.findings = rules.findings
    if not result.findings:
        result.request, result.version = request, version
    return result
