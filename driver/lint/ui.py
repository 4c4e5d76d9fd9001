"""A version's UI: an endpoint or tabs, each on a known component, a Grafana path on a bundled
dashboard, iframe sandbox keywords that exist."""

import re
from collections import Counter
from typing import Any

from driver.documents import Document, LinePath
from driver.findings import Finding, Severity
from driver.lint.common import duplicates
from driver.models.manifest import Endpoint, Version

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


def check_endpoint(
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


def check_embedding(doc: Document, embedding: Any, base: LinePath) -> list[Finding]:
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


def check_ui(
    doc: Document, version: Version, ui_base: LinePath, dashboard_uids: set[str] | None
) -> list[Finding]:
    """An endpoint (with its auth) or tabs, each on a known component and dashboard."""
    findings: list[Finding] = []
    ui = version.ui
    if ui.endpoint is None and not ui.tabs:
        findings.append(doc.finding("ui-incomplete", ui_base, "no endpoint and no tabs"))
    if ui.endpoint is not None:
        if ui.auth is None:
            findings.append(
                doc.finding(
                    "ui-incomplete", (*ui_base, "auth"), "an endpoint needs an auth strategy"
                )
            )
        findings += check_endpoint(
            doc, version, ui.endpoint, (*ui_base, "endpoint"), dashboard_uids
        )
    findings += check_embedding(doc, ui.embedding, (*ui_base, "embedding"))
    findings += duplicates(doc, (t.key for t in ui.tabs), (*ui_base, "tabs"), "key")
    for index, tab in enumerate(ui.tabs):
        tab_base = (*ui_base, "tabs", index)
        findings += check_endpoint(
            doc, version, tab.endpoint, (*tab_base, "endpoint"), dashboard_uids
        )
        findings += check_embedding(doc, tab.embedding, (*tab_base, "embedding"))
    return findings
