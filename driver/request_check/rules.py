"""The state every semantic rule shares: the request that passed its schemas, its manifest
version and the findings so far."""

from collections import Counter
from typing import Any
from uuid import UUID

from driver.documents import Document, LinePath
from driver.findings import Finding
from driver.models.manifest import Version
from driver.models.request import OperationRequest


class Rules:
    """Semantic rules over a request that passed every schema: each module of this package
    adds what its rules find."""

    def __init__(self, doc: Document, request: OperationRequest, version: Version) -> None:
        self.doc, self.request, self.version = doc, request, version
        self.findings: list[Finding] = []
        self.allocation_ids: set[UUID] = {a.id for a in request.allocations}

    def add(self, code: str, path: LinePath, message: str) -> None:
        self.findings.append(self.doc.finding(code, path, message))

    def duplicates(
        self, values: list[Any], base: LinePath, field_name: str, compared: str = ""
    ) -> None:
        for value, count in Counter(values).items():
            if count > 1:
                index = len(values) - 1 - values[::-1].index(value)
                self.add(
                    "duplicate-id",
                    (*base, index, field_name),
                    f"{field_name} {value} appears {count} times{compared}",
                )
