"""One version of a catalog entry: its components, schemas, operations, typed tasks,
placement bindings and UI."""

from typing import Any

from driver.documents import Document, LinePath
from driver.findings import Finding
from driver.lint.common import duplicates
from driver.lint.schemas import (
    check_schema,
    default_findings,
    meta_findings,
    open_values,
    string_safety,
)
from driver.lint.ui import check_ui
from driver.models.manifest import TOUCH_KEYWORDS, Version

REQUIRED_OPERATIONS = ("deploy", "status", "decommission")


def _binding_shape_ok(prop: Any, multiple: bool) -> bool:
    if not isinstance(prop, dict):
        return False
    if multiple:
        return prop.get("type") == "array" and _binding_shape_ok(prop.get("items"), False)
    return prop.get("type") == "string" and prop.get("format") == "uuid"


def check_tasks(doc: Document, version: Version, base: LinePath) -> list[Finding]:
    """Typed tasks: valid schemas, a closed input (a task's input is untrusted: every field
    typed, nothing unknown let through), a known component, names unique."""
    findings = duplicates(doc, (t.name for t in version.tasks), (*base, "tasks"), "name")
    for index, task in enumerate(version.tasks):
        task_base = (*base, "tasks", index)
        # the input is untrusted: typed, closed, bounded; the output is what the command
        # answers, rendered nowhere: only a valid schema
        input_base = (*task_base, "input_schema")
        findings += meta_findings(doc, task.input_schema, input_base) or (
            default_findings(doc, task.input_schema, input_base)
            + string_safety(doc, task.input_schema, input_base, data_ok=True)
            + open_values(doc, task.input_schema, input_base)
        )
        findings += meta_findings(doc, task.output_schema, (*task_base, "output_schema"))
        if version.component(task.component_key) is None:
            findings.append(
                doc.finding(
                    "unknown-component",
                    (*task_base, "component_key"),
                    f"no component {task.component_key!r}",
                )
            )
    return findings


def check_version(
    doc: Document, version: Version, base: LinePath, dashboard_uids: set[str] | None
) -> list[Finding]:
    """`dashboard_uids`: the bundled dashboards' uids (None: the entry bundles no monitoring)."""
    findings: list[Finding] = []
    findings += duplicates(doc, (c.key for c in version.components), (*base, "components"), "key")
    findings += duplicates(doc, (o.type for o in version.operations), (*base, "operations"), "type")
    findings += check_schema(doc, version.placement_schema, (*base, "placement_schema"))
    findings += check_schema(doc, version.config_schema, (*base, "config_schema"), closed=True)
    types = {op.type for op in version.operations}
    for required in REQUIRED_OPERATIONS:
        if required not in types:
            findings.append(
                doc.finding(
                    "missing-operation", (*base, "operations"), f"no {required!r} operation"
                )
            )
    findings += check_operations(doc, version, base)
    findings += check_tasks(doc, version, base)
    findings += check_bindings(doc, version, base)
    findings += check_ui(doc, version, (*base, "ui"), dashboard_uids)
    return findings


def check_operations(doc: Document, version: Version, base: LinePath) -> list[Finding]:
    """Each operation: valid options, a target component where it targets, touches that name
    what it acts on."""
    findings: list[Finding] = []
    for index, op in enumerate(version.operations):
        op_base = (*base, "operations", index)
        findings += check_schema(doc, op.options_schema, (*op_base, "options_schema"))
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
    return findings


def check_bindings(doc: Document, version: Version, base: LinePath) -> list[Finding]:
    """Placement bindings and instance references name uuid fields of the placement schema."""
    findings: list[Finding] = []
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
    return findings
