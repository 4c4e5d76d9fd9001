"""Which catalog version a request is checked against, and the paths between versions.

Every operation but one acts on the instance's own version. An upgrade is checked against the
version it goes to (operation.options.to_version): its config schema, its operations and its
playbooks are the ones that run, and that version must list the instance's in upgrade_from.
A rollback goes back along the same edge: to one of the instance's version's upgrade_from.
Whether the instance's hosts really are where the request says (and have the backup a
rollback restores) is the playbooks' check, made before any host changes.
"""

from driver.documents import Document
from driver.findings import Finding
from driver.models.manifest import CatalogEntry, Version
from driver.models.request import OperationRequest

UPGRADE = "upgrade"
ROLLBACK = "rollback"


def _listed(versions: list[str]) -> str:
    return ", ".join(versions) if versions else "none"


def checked_version(
    doc: Document, entry: CatalogEntry, request: OperationRequest
) -> tuple[Version | None, list[Finding]]:
    """The version the request is checked against, or the finding that says why none is."""
    current = request.instance.version
    options = request.operation.options
    if request.operation.type == UPGRADE:
        target = options.get("to_version")
        reachable = [v.version for v in entry.versions if current in v.upgrade_from]
        version = entry.version(target) if isinstance(target, str) else None
        if version is None:
            return None, [
                doc.finding(
                    "unknown-version",
                    ("operation", "options", "to_version"),
                    f"expected a version of {entry.slug} that {current} upgrades to: "
                    f"{_listed(reachable)}",
                )
            ]
        if current not in version.upgrade_from:
            already = f"the instance is at {current} already; " if current == target else ""
            return None, [
                doc.finding(
                    "upgrade-path",
                    ("instance", "version"),
                    f"{already}{entry.slug} {target} is reached from "
                    f"{_listed(version.upgrade_from)}; from {current}: {_listed(reachable)}",
                )
            ]
        return version, []
    version = entry.version(current)
    if version is None:
        return None, [
            doc.finding(
                "unknown-version",
                ("instance", "version"),
                f"{entry.slug} has versions {_listed([v.version for v in entry.versions])}",
            )
        ]
    target = options.get("to_version")
    if request.operation.type == ROLLBACK and target not in version.upgrade_from:
        return None, [
            doc.finding(
                "upgrade-path",
                ("operation", "options", "to_version"),
                f"expected a version {entry.slug} {current} rolls back to: "
                f"{_listed(version.upgrade_from)}",
            )
        ]
    return version, []
