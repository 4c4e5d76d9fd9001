"""The shipped JSON Schemas: generated from the models, valid Draft 2020-12, strict."""

import json

import pytest
from jsonschema import Draft202012Validator

from driver.lint.schemas import subschemas
from driver.schema_check import compile_pattern, validator_for
from driver.schemagen import OUTPUTS, SCHEMA_DIR, SHIPPED, generate, render


@pytest.mark.parametrize("filename", list(SHIPPED))
def test_shipped_schema_matches_models(filename):
    model, title = SHIPPED[filename]
    shipped = (SCHEMA_DIR / filename).read_text()
    assert shipped == render(generate(model, title, filename)), (
        "run `python -m driver.schemagen` after changing a model"
    )


@pytest.mark.parametrize("filename", list(SHIPPED))
def test_shipped_schema_is_valid(filename):
    Draft202012Validator.check_schema(json.loads((SCHEMA_DIR / filename).read_text()))


@pytest.mark.parametrize("filename", sorted(set(SHIPPED) - OUTPUTS))
def test_what_the_driver_reads_is_strict(filename):
    """Every input object is closed and every string anchored and bounded; what the driver
    answers with (OUTPUTS) is closed too (test_outcome), its strings free text."""
    schema = json.loads((SCHEMA_DIR / filename).read_text())
    for _, sub in subschemas(schema):
        if sub.get("type") == "object" and "properties" in sub:
            assert sub.get("additionalProperties") is False, sub.get("title")
        if sub.get("type") == "string" and "enum" not in sub and "const" not in sub:
            assert sub.get("format") == "uuid" or (
                sub["pattern"].startswith("^")
                and sub["pattern"].endswith("$")
                and "maxLength" in sub
            ), sub


@pytest.mark.parametrize("filename", list(SHIPPED))
def test_every_field_of_every_shipped_schema_is_described(filename):
    schema = json.loads((SCHEMA_DIR / filename).read_text())
    undescribed = [
        f"{sub.get('title', '?')}.{name}"
        for _, sub in subschemas(schema)
        for name, field in (sub.get("properties") or {}).items()
        if not field.get("description")
    ]
    assert not undescribed, undescribed


@pytest.mark.parametrize(
    ("pattern", "value", "matches"),
    [
        ("^[a-z]+$", "abc", True),
        ("^[a-z]+$", "abc\n", False),
        ("^[a-z$]+$", "a$b", True),
        (r"^a\$$", "a$", True),
        ("^(a|b)$", "b\n", False),
    ],
)
def test_patterns_follow_ecma_end_anchor(pattern, value, matches):
    assert bool(compile_pattern(pattern).search(value)) is matches
    errors = list(validator_for({"type": "string", "pattern": pattern}).iter_errors(value))
    assert (not errors) is matches
