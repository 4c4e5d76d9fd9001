"""The monitoring section: bundled Grafana dashboards that parse and query, exporters on known
components with ports of their own."""

import json
import re
from typing import Any

from driver.documents import Document, LinePath
from driver.findings import Finding
from driver.lint.common import duplicates
from driver.models.manifest import CatalogEntry

DASHBOARD_UID = re.compile(r"^[A-Za-z0-9_-]{1,40}$")


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


def check_dashboards(doc: Document, entry: CatalogEntry) -> tuple[list[Finding], set[str]]:
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


def check_monitoring(doc: Document, entry: CatalogEntry) -> list[Finding]:
    if entry.monitoring is None:
        return []
    base: LinePath = ("monitoring", "exporters")
    exporters = entry.monitoring.exporters
    findings = duplicates(doc, (e.name for e in exporters), base, "name")
    findings += duplicates(doc, (e.port for e in exporters), base, "port", "duplicate-port")
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
