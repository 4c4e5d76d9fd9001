"""`slurm-app-driver lint`: the catalog-entry schema plus the checks a schema cannot express,
one module per part of a manifest (schemas, versions, ui, monitoring)."""

import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from driver.catalog import MANIFEST_NAMES, manifest_file
from driver.documents import Document, DocumentError, load_path
from driver.findings import Finding
from driver.lint.common import duplicates
from driver.lint.monitoring import check_dashboards, check_monitoring
from driver.lint.versions import check_version
from driver.models.manifest import CatalogEntry
from driver.schema_check import schema_findings, shipped_schema


class UsageError(Exception):
    """Bad command-line input (exit 2), as opposed to findings in a manifest (exit 1)."""


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
    findings += duplicates(
        doc, (v.version for v in entry.versions), ("versions",), "version", "duplicate-version"
    )
    dashboard_findings, uids = check_dashboards(doc, entry)
    findings += dashboard_findings
    for index, version in enumerate(entry.versions):
        findings += check_version(
            doc, version, ("versions", index), uids if entry.monitoring is not None else None
        )
    findings += check_monitoring(doc, entry)
    return findings


def resolve_manifests(paths: Iterable[Path]) -> list[Path]:
    """Manifest files for the given paths: manifests, folders of them, or files beside one.
    Each once, however it was named (a pre-commit hook gives a manifest by a relative path and
    its changed dashboard's by an absolute one), and as it was first named."""
    found: dict[Path, Path] = {}
    for path in paths:
        if not path.exists():
            raise UsageError(f"{path}: no such file or directory")
        if path.is_dir():
            below = sorted(p for n in MANIFEST_NAMES for p in path.rglob(n))
            if not below:
                raise UsageError(f"{path}: no {MANIFEST_NAMES[0]} below this folder")
            named = below
        elif path.name in MANIFEST_NAMES:
            named = [path]
        else:
            owner = next((m for d in path.resolve().parents if (m := manifest_file(d))), None)
            if owner is None:
                raise UsageError(f"{path}: not a manifest and not inside a manifest's folder")
            # named as the file beside it was: relative where that was
            named = [owner if path.is_absolute() else Path(os.path.relpath(owner))]
        for manifest in named:
            found.setdefault(manifest.resolve(), manifest)
    return list(found.values())


def lint_paths(paths: Iterable[Path]) -> list[Finding]:
    findings: list[Finding] = []
    for manifest in resolve_manifests(paths):
        try:
            findings += lint_document(load_path(manifest))
        except DocumentError as exc:
            findings.append(exc.finding)
    return findings
