"""Generates the shipped JSON Schemas from the pydantic models.

Run `python -m driver.schemagen` after changing a model; a test fails while the shipped
files differ from what the models generate.
"""

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from driver.models.manifest import CatalogEntry
from driver.models.request import OperationRequest
from driver.task import TaskRequest

SCHEMA_DIR = Path(__file__).parent / "schemas"
SHIPPED: dict[str, tuple[type[BaseModel], str]] = {
    "catalog-entry.schema.json": (CatalogEntry, "Catalog entry (app manifest)"),
    "operation-request.schema.json": (OperationRequest, "Driver operation request"),
    "task-request.schema.json": (TaskRequest, "Driver task request"),
}


def _drop_null_defaults(node: Any) -> Any:
    """Optional fields default to None in Python, but null is not a valid value on the wire."""
    if isinstance(node, dict):
        return {
            key: _drop_null_defaults(value)
            for key, value in node.items()
            if not (key == "default" and value is None)
        }
    if isinstance(node, list):
        return [_drop_null_defaults(item) for item in node]
    return node


def generate(model: type[BaseModel], title: str, filename: str) -> dict[str, Any]:
    body = _drop_null_defaults(model.model_json_schema(mode="validation"))
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
