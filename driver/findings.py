"""Findings: the one error shape shared by `lint` and `validate-request` (and later `run`).

A finding names the file, the line where it is known, a JSON path into the document, a
stable code and a message that says what was expected. Messages never quote the offending
value: a request may carry a secret in the wrong field, and findings are printed and logged.
"""

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, computed_field
from rich.console import Console
from rich.markup import escape

PathPart = str | int


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


# code -> hint. Schema findings use `schema.<keyword>` (catalog entry / request contract),
# `placement.<keyword>`, `config.<keyword>`, `options.<keyword>` (the manifest's own schemas).
HINTS: dict[str, str] = {
    "schema": "the document breaks its contract; `slurm-app-driver schema catalog-entry`, "
    "`schema operation-request` or `schema task-request` prints it",
    "input": "task.input must satisfy the app's input_schema for that task",
    "placement": "instance.placement_intent must satisfy the version's placement_schema",
    "config": "the config must satisfy the app version's config_schema",
    "options": "operation.options must satisfy the operation's options_schema",
    "usage": "see --help",
    "yaml-syntax": "fix the YAML syntax at the line shown",
    "json-syntax": "fix the JSON syntax at the line shown",
    "not-found": "check the path",
    "request-too-large": "a request is JSON of at most 16 MiB (20,000 allocations fit in 9)",
    "model": "the document passed the JSON Schema but not the driver's model; report this",
    "invalid-subschema": "placement/config/options schemas must be valid Draft 2020-12 schemas",
    "default-invalid": "a default must satisfy the schema it is declared in",
    "unsafe-string": "bound every string with maxLength and an anchored pattern (^...$), "
    "an enum/const, or a checked format such as uuid",
    "open-schema": "type every config value and close every config object "
    "(additionalProperties: false): config values are handed to the roles",
    "duplicate-version": "each version string may appear once",
    "duplicate-key": "keys in this list must be unique",
    "slug-mismatch": "the manifest's slug must equal the name of the folder it lives in",
    "unknown-component": "use a component key declared in this version's `components`",
    "invalid-sandbox-token": "use iframe sandbox keywords only (allow-forms, allow-scripts, ...)",
    "sandbox-without-embedding": "a sandbox only applies when embedding.allowed is true",
    "dashboard-missing": "bundled dashboard paths are relative to the manifest's folder",
    "dashboard-invalid": "a bundled dashboard is Grafana JSON with uid, title and panels",
    "unknown-dashboard": "UI paths /d/<uid> must name the uid of a bundled dashboard",
    "duplicate-port": "two exporters cannot listen on one port",
    "binding-field-unknown": "bound placement fields must be declared in placement_schema "
    "as uuid strings (or arrays of them when multiple)",
    "missing-operation": "every version needs deploy, status and decommission operations",
    "target-component-required": "operations whose target is new_allocation or member must "
    "name target_component_key",
    "max-targets-invalid": "max_targets above 1 is for new_allocation operations (a join of "
    "several allocations in one run)",
    "replacement-invalid": "replacement: true is for operations whose target is a member (the "
    "new allocation takes that member's place)",
    "touches-invalid": "touches names component keys, 'placement', 'target' (operations "
    "with a target only) or 'replacement' (operations with replacement: true only)",
    "ui-incomplete": "give the UI an endpoint with auth, or at least one tab",
    "unknown-app": "the catalog has no manifest with this slug",
    "unknown-version": "the manifest has no such version",
    "upgrade-path": "an upgrade goes to a version whose upgrade_from lists the instance's; "
    "a rollback back to one of those",
    "unknown-operation": "the version's operations list the supported types",
    "inline-secret": "pass secrets as files: credentials.*_file, or a *_ref name resolved "
    "inside credentials.secrets_dir",
    "tenant-boundary": "every allocation and linked instance must belong to the instance's project",
    "unknown-allocation": "every referenced allocation must be listed in `allocations`",
    "allocation-reused": "an allocation may back one member per instance "
    "(the controller's also backs the worker in same_node placement)",
    "duplicate-id": "ids must be unique (a user's gid defaults to its uid)",
    "reserved-name": "choose a name no system account, bundle daemon, Slurm keyword (DEFAULT) "
    "or Ansible name (all, localhost, ungrouped) uses",
    "reserved-id": "uid/gid 1000 is a cloud image's first login user: pick another id or set "
    "claim_id_1000: true",
    "reserved-address": "give the allocation's routable address, not loopback, link-local, "
    "unspecified or multicast",
    "member-mismatch": "members must agree with the placement intent",
    "target-missing": "this operation needs operation.target.allocation_id (operation.targets "
    "where the manifest's max_targets is above 1)",
    "target-unexpected": "this operation takes no target, or not that many (the manifest's "
    "max_targets), or not in this spelling: target for one allocation, targets where "
    "max_targets is above 1, never both",
    "target-invalid": "the target does not fit this operation",
    "linked-instance-missing": "pass the referenced instance in `linked_instances`",
    "linked-instance-unexpected": (
        "pass only the instances the placement intent references (and, in a cluster's "
        "replace_controller, the portals attached to it)"
    ),
    "config-inconsistent": "the config's values contradict each other",
    "app-runtime-missing": "offer only interactive apps whose runtime the linked cluster's "
    "workers have (its interactive_runtimes)",
    "secret-file": "the referenced secret file must exist, be a regular file and not be "
    "readable by group or others",
    "source-denied": "the platform's deny list (its site settings) refuses the source, "
    "whatever the project allows: choose another source in the site settings, or leave out "
    "what needs it",
    "source-not-allowed": "each source the operation installs from must match a rule of the "
    "request's source_policy.allow",
    "source-unpinned": "an artifact is taken only by its sha256: the site settings' "
    "bootstrap_sha256 (a vendor's repository) or sha256 (an archive)",
    "more-findings": "fix the findings listed and validate again: the rest follow",
}


class Finding(BaseModel):
    """One thing wrong with a document."""

    model_config = ConfigDict(frozen=True, use_attribute_docstrings=True)

    code: str
    """A stable code (docs/platform-contract.md lists each)."""
    path: str
    """A JSON path into the document ($.operation.target)."""
    message: str
    """What was expected; never the rejected value."""
    file: str | None = None
    """The file, where the document came from one."""
    line: int | None = None
    """The line, where it is known."""
    severity: Severity = Severity.ERROR
    """error, or warning (lint only)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def hint(self) -> str | None:
        """How to fix it, where the code has a hint."""
        return HINTS.get(self.code) or HINTS.get(self.code.split(".", 1)[0])


def json_path(parts: Sequence[PathPart]) -> str:
    """Render a path like `$.versions[0].ui['odd key']`."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isidentifier():
            out += f".{part}"
        else:
            out += "[" + json.dumps(part) + "]"
    return out


def render_json(findings: Iterable[Finding], **extra: object) -> str:
    items = [f.model_dump(mode="json") for f in findings]
    return json.dumps({**extra, "findings": items, "count": len(items)}, indent=2)


def render_human(findings: Sequence[Finding], console: Console) -> None:
    for f in findings:
        where = f.file or "<input>"
        if f.line is not None:
            where += f":{f.line}"
        colour = "red" if f.severity is Severity.ERROR else "yellow"
        console.print(
            f"{escape(where)}: [{colour}]{f.severity}[/{colour}] "
            f"[bold]{escape(f.code)}[/bold] {escape(f.path)}: {escape(f.message)}",
            highlight=False,
            soft_wrap=True,
        )
        if f.hint:
            console.print(
                f"    hint: {escape(f.hint)}", style="dim", highlight=False, soft_wrap=True
            )


# An answer lists at most this many findings, then one that counts the rest by code: a request
# with 10,000 broken allocations stays a readable answer.
MAX_FINDINGS = 100


def bounded(findings: list[Finding], limit: int = MAX_FINDINGS) -> list[Finding]:
    """The first `limit` findings, then a `more-findings` one that counts the others."""
    if len(findings) <= limit:
        return findings
    rest = Counter(finding.code for finding in findings[limit:])
    by_code = ", ".join(f"{code}: {count}" for code, count in sorted(rest.items()))
    left_out = Finding(
        code="more-findings",
        path="$",
        message=f"{len(findings)} findings in all: the other {len(findings) - limit} are not "
        f"listed ({by_code})",
        file=findings[0].file,
    )
    return [*findings[:limit], left_out]
