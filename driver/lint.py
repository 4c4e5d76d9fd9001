"""`slurm-app-driver lint`: the catalog-entry schema plus the checks a schema cannot express."""

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from driver.catalog import MANIFEST_NAMES, manifest_file
from driver.documents import Document, DocumentError, LinePath, load_path
from driver.findings import Finding, Severity
from driver.models.manifest import TOUCH_KEYWORDS, CatalogEntry, Endpoint, Version
from driver.schema_check import compile_pattern, schema_findings, shipped_schema, validator_for

REQUIRED_OPERATIONS = ("deploy", "status", "decommission")
DRAFT_2020_12 = Draft202012Validator.META_SCHEMA["$id"]
# https://html.spec.whatwg.org/multipage/iframe-embed-object.html#attr-iframe-sandbox
SANDBOX_TOKENS = frozenset(
    {
        "allow-downloads",
        "allow-forms",
        "allow-modals",
        "allow-orientation-lock",
        "allow-pointer-lock",
        "allow-popups",
        "allow-popups-to-escape-sandbox",
        "allow-presentation",
        "allow-same-origin",
        "allow-scripts",
        "allow-storage-access-by-user-activation",
        "allow-top-navigation",
        "allow-top-navigation-by-user-activation",
        "allow-top-navigation-to-custom-protocols",
    }
)
# Formats whose checked values cannot carry whitespace, quotes or control characters.
SAFE_FORMATS = frozenset({"uuid", "ipv4", "ipv6", "date", "date-time", "time", "duration"})
DASHBOARD_UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUBSCHEMA_SINGLE = (
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)


class UsageError(Exception):
    """Bad command-line input (exit 2), as opposed to findings in a manifest (exit 1)."""


def subschemas(
    schema: Any, path: LinePath = (), only: frozenset[str] | None = None
) -> Iterator[tuple[LinePath, dict[str, Any]]]:
    """Every schema object inside `schema`, with its path relative to it (`only`: follow just
    these keywords)."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in _SUBSCHEMA_MAPS:
        if only is None or key in only:
            for name, sub in (schema.get(key) or {}).items():
                yield from subschemas(sub, (*path, key, name), only)
    for key in _SUBSCHEMA_LISTS:
        if only is None or key in only:
            for index, sub in enumerate(schema.get(key) or []):
                yield from subschemas(sub, (*path, key, index), only)
    for key in _SUBSCHEMA_SINGLE:
        if only is None or key in only:
            yield from subschemas(schema.get(key), (*path, key), only)


def _surely_valid_schema(schema: dict[str, Any]) -> bool:
    """jsonschema-rs checks a schema against Draft 2020-12 about 50 times faster than
    python-jsonschema (whose $dynamicRef resolution is most of a manifest's lint); what it
    doubts, python-jsonschema explains. Only where the schema names no other draft."""
    if not isinstance(schema, dict) or schema.get("$schema", DRAFT_2020_12) != DRAFT_2020_12:
        return False
    try:
        return bool(jsonschema_rs.meta.is_valid(schema))
    except (ValueError, jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError):
        return False


def _meta_findings(doc: Document, schema: dict[str, Any], base: LinePath) -> list[Finding]:
    findings = (
        []
        if _surely_valid_schema(schema)
        else [
            doc.finding(
                "invalid-subschema",
                (*base, *error.absolute_path),
                f"not a valid Draft 2020-12 schema: {error.message[:200]}",
            )
            for error in Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(schema)
        ]
    )
    if findings:
        return findings
    if schema.get("type") != "object":
        findings.append(
            doc.finding(
                "invalid-subschema", (*base, "type"), "expected a schema whose type is object"
            )
        )
    for path, sub in subschemas(schema):
        pattern = sub.get("pattern")
        if isinstance(pattern, str):
            try:
                compile_pattern(pattern)
            except re.error as exc:
                findings.append(
                    doc.finding(
                        "invalid-subschema",
                        (*base, *path, "pattern"),
                        f"pattern is not a valid regex: {exc}",
                    )
                )
    return findings


# What a pattern must refuse, whatever the field: template delimiters (the value is rendered
# into files and handed to Ansible) and line breaks or NUL (it lands in slurm.conf lines).
_PATTERN_PROBES = ("{{ lookup('pipe', 'id') }}", "{% raw %}", "a\nb", "a\u0000b")
# Positions whose subschema describes a value (not a condition or a partial constraint).
_VALUE_POSITIONS = frozenset(
    {"properties", "patternProperties", "items", "prefixItems", "additionalProperties", "$defs"}
)


def _admits_anything(pattern: str) -> bool:
    compiled = compile_pattern(pattern)
    return any(compiled.search(probe) for probe in _PATTERN_PROBES)


def _is_string_schema(sub: dict[str, Any]) -> bool:
    kind = sub.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def _string_safety(
    doc: Document, schema: dict[str, Any], base: LinePath, data_ok: bool = False
) -> list[Finding]:
    """`data_ok` (task inputs): a string that declares contentMediaType and maxLength is data
    the task passes on as a whole (a batch script on sbatch's stdin), never templated."""
    findings = []
    for path, sub in subschemas(schema):
        if not _is_string_schema(sub) or "enum" in sub or "const" in sub:
            continue
        if data_ok and "contentMediaType" in sub and "maxLength" in sub:
            continue
        if sub.get("format") in SAFE_FORMATS:
            continue
        pattern = sub.get("pattern")
        if not (isinstance(pattern, str) and pattern.startswith("^") and pattern.endswith("$")):
            findings.append(
                doc.finding(
                    "unsafe-string", (*base, *path), "string without an anchored pattern (^...$)"
                )
            )
        elif "maxLength" not in sub:
            findings.append(
                doc.finding("unsafe-string", (*base, *path), "string without maxLength")
            )
        elif _admits_anything(pattern):
            findings.append(
                doc.finding(
                    "unsafe-string",
                    (*base, *path, "pattern"),
                    "pattern admits template delimiters, line breaks or NUL (an unbounded .*?)",
                )
            )
    return findings


def _open_values(doc: Document, schema: dict[str, Any], base: LinePath) -> list[Finding]:
    """Config values reach the roles: every one typed, every object closed."""
    findings = []
    # if/then/not/allOf branches are partial constraints, not values: not followed
    for path, sub in subschemas(schema, only=_VALUE_POSITIONS):
        if "type" not in sub and not any(k in sub for k in ("enum", "const", "$ref")):
            findings.append(doc.finding("open-schema", (*base, *path), "a value without a type"))
        elif sub.get("type") == "object" and sub.get("additionalProperties") is not False:
            findings.append(
                doc.finding(
                    "open-schema",
                    (*base, *path),
                    "an object that admits undeclared keys (set additionalProperties: false)",
                )
            )
    return findings


def _default_findings(doc: Document, schema: dict[str, Any], base: LinePath) -> list[Finding]:
    root = validator_for(schema)
    findings = []
    for path, sub in subschemas(schema):
        if "default" not in sub:
            continue
        errors = list(root.evolve(schema=sub).iter_errors(sub["default"]))
        if errors:
            where = json.dumps(list(errors[0].absolute_path)) if errors[0].absolute_path else ""
            findings.append(
                doc.finding(
                    "default-invalid",
                    (*base, *path, "default"),
                    f"default does not satisfy its own schema {where}: {errors[0].message[:200]}",
                )
            )
    return findings


def _check_schema(
    doc: Document, schema: dict[str, Any], base: LinePath, *, closed: bool = False
) -> list[Finding]:
    """`closed`: every value typed and every object closed (config schemas)."""
    findings = _meta_findings(doc, schema, base)
    if findings:
        return findings
    findings = _default_findings(doc, schema, base) + _string_safety(doc, schema, base)
    return findings + (_open_values(doc, schema, base) if closed else [])


def _duplicates(
    doc: Document, values: Iterable[Any], base: LinePath, field: str, code: str = "duplicate-key"
) -> list[Finding]:
    findings = []
    seen: set[Any] = set()
    for index, value in enumerate(values):
        if value in seen:
            findings.append(
                doc.finding(
                    code, (*base, index, field), f"{field} {value!r} appears more than once"
                )
            )
        seen.add(value)
    return findings


def _binding_shape_ok(prop: Any, multiple: bool) -> bool:
    if not isinstance(prop, dict):
        return False
    if multiple:
        return prop.get("type") == "array" and _binding_shape_ok(prop.get("items"), False)
    return prop.get("type") == "string" and prop.get("format") == "uuid"


def _check_endpoint(
    doc: Document,
    version: Version,
    endpoint: Endpoint,
    base: LinePath,
    dashboard_uids: set[str] | None,
) -> list[Finding]:
    findings = []
    if version.component(endpoint.component_key) is None:
        findings.append(
            doc.finding(
                "unknown-component",
                (*base, "component_key"),
                f"no component {endpoint.component_key!r} in this version",
            )
        )
    match = re.fullmatch(r"/d/([^/]+)(/.*)?", endpoint.path)
    if match and dashboard_uids is not None and match.group(1) not in dashboard_uids:
        findings.append(
            doc.finding(
                "unknown-dashboard",
                (*base, "path"),
                f"no bundled dashboard has uid {match.group(1)!r} "
                f"(bundled: {', '.join(sorted(dashboard_uids)) or 'none'})",
            )
        )
    return findings


def _check_embedding(doc: Document, embedding: Any, base: LinePath) -> list[Finding]:
    if embedding is None or embedding.sandbox is None:
        return []
    findings = []
    tokens = embedding.sandbox.split(" ")
    for token in tokens:
        if token not in SANDBOX_TOKENS:
            findings.append(
                doc.finding(
                    "invalid-sandbox-token",
                    (*base, "sandbox"),
                    f"{token!r} is not an iframe sandbox keyword",
                )
            )
    for token, count in Counter(tokens).items():
        if count > 1:
            findings.append(
                doc.finding(
                    "invalid-sandbox-token",
                    (*base, "sandbox"),
                    f"{token!r} is listed {count} times",
                )
            )
    if not embedding.allowed:
        findings.append(
            doc.finding(
                "sandbox-without-embedding",
                (*base, "sandbox"),
                "sandbox is set but embedding is not allowed",
            ).model_copy(update={"severity": Severity.WARNING})
        )
    return findings


def _check_tasks(doc: Document, version: Version, base: LinePath) -> list[Finding]:
    """Typed tasks: valid schemas, a closed input (a task's input is untrusted: every field
    typed, nothing unknown let through), a known component, names unique."""
    findings = _duplicates(doc, (t.name for t in version.tasks), (*base, "tasks"), "name")
    for index, task in enumerate(version.tasks):
        task_base = (*base, "tasks", index)
        # the input is untrusted: typed, closed, bounded; the output is what the command
        # answers, rendered nowhere: only a valid schema
        input_base = (*task_base, "input_schema")
        findings += _meta_findings(doc, task.input_schema, input_base) or (
            _default_findings(doc, task.input_schema, input_base)
            + _string_safety(doc, task.input_schema, input_base, data_ok=True)
            + _open_values(doc, task.input_schema, input_base)
        )
        findings += _meta_findings(doc, task.output_schema, (*task_base, "output_schema"))
        if version.component(task.component_key) is None:
            findings.append(
                doc.finding(
                    "unknown-component",
                    (*task_base, "component_key"),
                    f"no component {task.component_key!r}",
                )
            )
    return findings


def _check_version(
    doc: Document, version: Version, base: LinePath, dashboard_uids: set[str] | None
) -> list[Finding]:
    findings: list[Finding] = []
    findings += _duplicates(doc, (c.key for c in version.components), (*base, "components"), "key")
    findings += _duplicates(
        doc, (o.type for o in version.operations), (*base, "operations"), "type"
    )
    findings += _check_schema(doc, version.placement_schema, (*base, "placement_schema"))
    findings += _check_schema(doc, version.config_schema, (*base, "config_schema"), closed=True)
    types = {op.type for op in version.operations}
    for required in REQUIRED_OPERATIONS:
        if required not in types:
            findings.append(
                doc.finding(
                    "missing-operation", (*base, "operations"), f"no {required!r} operation"
                )
            )
    for index, op in enumerate(version.operations):
        op_base = (*base, "operations", index)
        findings += _check_schema(doc, op.options_schema, (*op_base, "options_schema"))
        if op.target != "none" and op.target_component_key is None:
            findings.append(
                doc.finding(
                    "target-component-required",
                    (*op_base, "target_component_key"),
                    f"target {op.target.value!r} needs a component key",
                )
            )
        if op.max_targets > 1 and op.target != "new_allocation":
            findings.append(
                doc.finding(
                    "max-targets-invalid",
                    (*op_base, "max_targets"),
                    f"target {op.target.value!r} acts on one allocation; only new_allocation "
                    "operations take several",
                )
            )
        if op.replacement and op.target != "member":
            findings.append(
                doc.finding(
                    "replacement-invalid",
                    (*op_base, "replacement"),
                    f"target {op.target.value!r}: only an operation on a member can replace it",
                )
            )
        for t_index, touch in enumerate(op.touches):
            if touch == "replacement" and not op.replacement:
                findings.append(
                    doc.finding(
                        "touches-invalid",
                        (*op_base, "touches", t_index),
                        "'replacement' needs an operation with replacement: true",
                    )
                )
            elif touch == "target" and op.target == "none":
                findings.append(
                    doc.finding(
                        "touches-invalid",
                        (*op_base, "touches", t_index),
                        "'target' needs an operation with a target",
                    )
                )
            elif touch not in TOUCH_KEYWORDS and version.component(touch) is None:
                findings.append(
                    doc.finding(
                        "touches-invalid",
                        (*op_base, "touches", t_index),
                        f"{touch!r} is neither a component nor one of {', '.join(TOUCH_KEYWORDS)}",
                    )
                )
        if op.target_component_key and version.component(op.target_component_key) is None:
            findings.append(
                doc.finding(
                    "unknown-component",
                    (*op_base, "target_component_key"),
                    f"no component {op.target_component_key!r}",
                )
            )
    findings += _check_tasks(doc, version, base)
    properties = version.placement_schema.get("properties")
    if not isinstance(properties, dict):  # already reported as invalid-subschema
        properties = {}
    for index, binding in enumerate(version.placement_bindings):
        b_base = (*base, "placement_bindings", index)
        if not _binding_shape_ok(properties.get(binding.field), binding.multiple):
            shape = "an array of uuid strings" if binding.multiple else "a uuid string"
            findings.append(
                doc.finding(
                    "binding-field-unknown",
                    (*b_base, "field"),
                    f"placement_schema must declare {binding.field!r} as {shape}",
                )
            )
        if version.component(binding.component_key) is None:
            findings.append(
                doc.finding(
                    "unknown-component",
                    (*b_base, "component_key"),
                    f"no component {binding.component_key!r}",
                )
            )
    for index, reference in enumerate(version.instance_references):
        if not _binding_shape_ok(properties.get(reference.field), False):
            findings.append(
                doc.finding(
                    "binding-field-unknown",
                    (*base, "instance_references", index, "field"),
                    f"placement_schema must declare {reference.field!r} as a uuid string",
                )
            )
    ui, ui_base = version.ui, (*base, "ui")
    if ui.endpoint is None and not ui.tabs:
        findings.append(doc.finding("ui-incomplete", ui_base, "no endpoint and no tabs"))
    if ui.endpoint is not None:
        if ui.auth is None:
            findings.append(
                doc.finding(
                    "ui-incomplete", (*ui_base, "auth"), "an endpoint needs an auth strategy"
                )
            )
        findings += _check_endpoint(
            doc, version, ui.endpoint, (*ui_base, "endpoint"), dashboard_uids
        )
    findings += _check_embedding(doc, ui.embedding, (*ui_base, "embedding"))
    findings += _duplicates(doc, (t.key for t in ui.tabs), (*ui_base, "tabs"), "key")
    for index, tab in enumerate(ui.tabs):
        tab_base = (*ui_base, "tabs", index)
        findings += _check_endpoint(
            doc, version, tab.endpoint, (*tab_base, "endpoint"), dashboard_uids
        )
        findings += _check_embedding(doc, tab.embedding, (*tab_base, "embedding"))
    return findings


def _dashboard_problem(data: Any) -> str | None:
    if not isinstance(data, dict):
        return "expected a JSON object"
    uid = data.get("uid")
    if not (isinstance(uid, str) and DASHBOARD_UID.fullmatch(uid)):
        return "expected a uid of 1-40 letters, digits, '-' or '_'"
    if not (isinstance(data.get("title"), str) and data["title"].strip()):
        return "expected a non-empty title"
    panels = data.get("panels")
    if not (isinstance(panels, list) and panels):
        return "expected a non-empty panels list"
    for index, panel in enumerate(panels):
        targets = panel.get("targets", []) if isinstance(panel, dict) else None
        if not isinstance(targets, list):
            return f"panel {index}: expected a targets list"
        for target in targets:
            if not (
                isinstance(target, dict)
                and isinstance(target.get("expr"), str)
                and target["expr"].strip()
            ):
                return f"panel {index}: every target needs a PromQL expr"
    return None


def _check_dashboards(doc: Document, entry: CatalogEntry) -> tuple[list[Finding], set[str]]:
    findings: list[Finding] = []
    uids: dict[str, int] = {}
    if entry.monitoring is None or doc.folder is None:
        return findings, set(uids)
    folder = doc.folder.resolve()
    for index, dashboard in enumerate(entry.monitoring.grafana_dashboards):
        base = ("monitoring", "grafana_dashboards", index, "path")
        target = (folder / dashboard.path.lstrip("/")).resolve()
        if not target.is_relative_to(folder):
            findings.append(
                doc.finding("dashboard-missing", base, "path leaves the manifest's folder")
            )
            continue
        if not target.is_file():
            relative = target.relative_to(folder)
            findings.append(
                doc.finding("dashboard-missing", base, f"no file {relative} beside the manifest")
            )
            continue
        try:
            data = json.loads(target.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:
            findings.append(doc.finding("dashboard-invalid", base, f"not JSON: {exc}"))
            continue
        problem = _dashboard_problem(data)
        if problem:
            findings.append(doc.finding("dashboard-invalid", base, problem))
            continue
        if data["uid"] in uids:
            findings.append(
                doc.finding(
                    "duplicate-key",
                    base,
                    f"uid {data['uid']!r} already used by dashboard {uids[data['uid']]}",
                )
            )
        uids.setdefault(data["uid"], index)
    return findings, set(uids)


def _check_monitoring(doc: Document, entry: CatalogEntry) -> list[Finding]:
    if entry.monitoring is None:
        return []
    base: LinePath = ("monitoring", "exporters")
    exporters = entry.monitoring.exporters
    findings = _duplicates(doc, (e.name for e in exporters), base, "name")
    findings += _duplicates(doc, (e.port for e in exporters), base, "port", "duplicate-port")
    for index, exporter in enumerate(exporters):
        for k_index, key in enumerate(exporter.component_keys):
            missing = [v.version for v in entry.versions if v.component(key) is None]
            if missing:
                findings.append(
                    doc.finding(
                        "unknown-component",
                        (*base, index, "component_keys", k_index),
                        f"no component {key!r} in version(s) {', '.join(missing)}",
                    )
                )
    return findings


def lint_document(doc: Document) -> list[Finding]:
    findings = schema_findings(
        doc, shipped_schema("catalog-entry.schema.json"), doc.data, (), "schema"
    )
    if findings:
        return findings
    try:
        entry = CatalogEntry.model_validate(doc.data)
    except ValidationError as exc:
        return [doc.finding("model", tuple(e["loc"]), e["msg"]) for e in exc.errors()]
    if doc.folder is not None and doc.folder.name != entry.slug:
        findings.append(
            doc.finding(
                "slug-mismatch", ("slug",), f"slug {entry.slug!r} but folder {doc.folder.name!r}"
            )
        )
    findings += _duplicates(
        doc, (v.version for v in entry.versions), ("versions",), "version", "duplicate-version"
    )
    dashboard_findings, uids = _check_dashboards(doc, entry)
    findings += dashboard_findings
    for index, version in enumerate(entry.versions):
        findings += _check_version(
            doc, version, ("versions", index), uids if entry.monitoring is not None else None
        )
    findings += _check_monitoring(doc, entry)
    return findings


def resolve_manifests(paths: Iterable[Path]) -> list[Path]:
    """Manifest files for the given paths: manifests, folders of them, or files beside one."""
    found: dict[Path, None] = {}
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory")
        if path.is_dir():
            below = sorted(p for n in MANIFEST_NAMES for p in path.rglob(n))
            if not below:
                raise UsageError(f"{path}: no {MANIFEST_NAMES[0]} below this folder")
            found.update(dict.fromkeys(below))
            continue
        if path.name in MANIFEST_NAMES:
            found[path] = None
            continue
        owner = next((m for d in path.resolve().parents if (m := manifest_file(d))), None)
        if owner is None:
            raise UsageError(f"{path}: not a manifest and not inside a manifest's folder")
        found[owner] = None
    return list(found)


def lint_paths(paths: Iterable[Path]) -> list[Finding]:
    findings: list[Finding] = []
    for manifest in resolve_manifests(paths):
        try:
            findings += lint_document(load_path(manifest))
        except DocumentError as exc:
            findings.append(exc.finding)
    return findings
