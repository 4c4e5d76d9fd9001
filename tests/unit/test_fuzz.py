"""lint and validate-request never crash: any input yields findings or a clean pass."""

import json
from pathlib import Path

import yaml
from conftest import EXAMPLES, MANIFESTS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from driver.documents import DocumentError, load_json, load_yaml
from driver.findings import Finding
from driver.lint import lint_document
from driver.request_check import check_request

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=25,
)
BASE_MANIFEST = yaml.safe_load((MANIFESTS / "slurm-reference" / "manifest.yaml").read_text())
BASE_REQUESTS = [json.loads(p.read_text()) for p in sorted(EXAMPLES.glob("*/*.json"))]
# libyaml's emitter: the pure-Python one took longer to write a manifest than lint to read it
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, (*prefix, index))


def _replace(node, path, value):
    if not path:
        return value
    head, *rest = path
    copy = list(node) if isinstance(node, list) else dict(node)
    copy[head] = _replace(node[head], rest, value)
    return copy


@st.composite
def mutated(draw, base):
    """A valid document with one subtree swapped for arbitrary data: reaches deep layers."""
    paths = list(_paths(base))
    path = draw(st.sampled_from(paths))
    return _replace(base, path, draw(json_values))


def _lint_text(text: str, folder: Path | None = None) -> list[Finding]:
    try:
        doc = load_yaml(text, "m.yaml")
    except DocumentError as exc:
        return [exc.finding]
    doc.folder = folder
    return lint_document(doc)


def _validate_text(text: str) -> list[Finding]:
    try:
        return check_request(load_json(text, "r.json")).findings
    except DocumentError as exc:
        return [exc.finding]


@SETTINGS
@given(st.text(max_size=300))
def test_lint_arbitrary_text(text):
    assert all(isinstance(f, Finding) for f in _lint_text(text))


@SETTINGS
@given(json_values)
def test_lint_arbitrary_yaml_document(data):
    assert all(isinstance(f, Finding) for f in _lint_text(yaml.dump(data, Dumper=YAML_DUMPER)))


@SETTINGS
@given(mutated(BASE_MANIFEST))
def test_lint_mutated_manifest(data):
    findings = _lint_text(yaml.dump(data, Dumper=YAML_DUMPER), MANIFESTS / "slurm-reference")
    assert all(f.path.startswith("$") for f in findings)


@SETTINGS
@given(st.text(max_size=300))
def test_validate_arbitrary_text(text):
    assert all(isinstance(f, Finding) for f in _validate_text(text))


@SETTINGS
@given(json_values)
def test_validate_arbitrary_json(data):
    findings = _validate_text(json.dumps(data))
    assert findings, "arbitrary data is never a valid request"


@SETTINGS
@given(st.sampled_from(BASE_REQUESTS).flatmap(mutated))
def test_validate_mutated_request(data):
    for finding in _validate_text(json.dumps(data)):
        assert finding.path.startswith("$")
        assert finding.message
