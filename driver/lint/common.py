"""What every manifest check uses."""

from collections.abc import Iterable
from typing import Any

from driver.documents import Document, LinePath
from driver.findings import Finding


def duplicates(
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
