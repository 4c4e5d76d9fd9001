"""Generates the shipped JSON Schemas from the pydantic models.

Run `python -m driver.schemagen` after changing a model; a test fails while the shipped
files differ from what the models generate.
"""

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from driver.events import Event, Result
from driver.models.manifest import CatalogEntry
from driver.models.request import OperationRequest
from driver.task import TaskRequest

SCHEMA_DIR = Path(__file__).parent / "schemas"
SHIPPED: dict[str, tuple[type[BaseModel], str]] = {
    "catalog-entry.schema.json": (CatalogEntry, "Catalog entry (app manifest)"),
    "operation-request.schema.json": (OperationRequest, "Driver operation request"),
    "task-request.schema.json": (TaskRequest, "Driver task request"),
    "operation-result.schema.json": (Result, "Driver operation result"),
    "event.schema.json": (Event, "Driver event (one line of run's JSON-lines output)"),
}
# What the driver answers with: published as it writes them (computed fields included).
OUTPUTS = frozenset({"operation-result.schema.json", "event.schema.json"})


def _tidy(node: Any) -> Any:
    """Optional fields default to None in Python, but null is not a valid value on the wire;
    a description taken from a docstring is one paragraph, not its source lines."""
    if isinstance(node, dict):
        return {
            key: " ".join(value.split())
            if key == "description" and isinstance(value, str)
            else _tidy(value)
            for key, value in node.items()
            if not (key == "default" and value is None)
        }
    if isinstance(node, list):
        return [_tidy(item) for item in node]
    return node


def generate(model: type[BaseModel], title: str, filename: str) -> dict[str, Any]:
    mode = "serialization" if filename in OUTPUTS else "validation"
    body = _tidy(model.model_json_schema(mode=mode))
    body["title"] = title
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:slurm-app-bundle:{filename.removesuffix('.schema.json')}:v1",
        **body,
    }


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main() -> int:
    for filename, (model, title) in SHIPPED.items():
        (SCHEMA_DIR / filename).write_text(render(generate(model, title, filename)))
        print(f"wrote {SCHEMA_DIR / filename}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
