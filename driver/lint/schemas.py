"""What a manifest's JSON Schemas must be: valid Draft 2020-12, every string that reaches a
host anchored and bounded, config values typed and closed, defaults valid under their schema."""

import json
import re
from collections.abc import Iterator
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator

from driver.documents import Document, LinePath
from driver.findings import Finding
from driver.schema_check import compile_pattern, validator_for

DRAFT_2020_12 = Draft202012Validator.META_SCHEMA["$id"]


# Formats whose checked values cannot carry whitespace, quotes or control characters.
SAFE_FORMATS = frozenset({"uuid", "ipv4", "ipv6", "date", "date-time", "time", "duration"})


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


def meta_findings(doc: Document, schema: dict[str, Any], base: LinePath) -> list[Finding]:
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


def string_safety(
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


def open_values(doc: Document, schema: dict[str, Any], base: LinePath) -> list[Finding]:
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


def default_findings(doc: Document, schema: dict[str, Any], base: LinePath) -> list[Finding]:
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


def check_schema(
    doc: Document, schema: dict[str, Any], base: LinePath, *, closed: bool = False
) -> list[Finding]:
    """`closed`: every value typed and every object closed (config schemas)."""
    findings = meta_findings(doc, schema, base)
    if findings:
        return findings
    findings = default_findings(doc, schema, base) + string_safety(doc, schema, base)
    return findings + (open_values(doc, schema, base) if closed else [])
