"""Every corpus case fails with exactly the expected (code, JSON path) findings."""

import copy
import json
import shutil
from pathlib import Path

import jsonpatch
import pytest
import yaml
from conftest import EXAMPLES, MANIFESTS, ROOT

from driver.documents import DocumentError, load_json, load_path
from driver.findings import HINTS
from driver.lint import lint_paths
from driver.request_check import check_request

CORPUS = ROOT / "tests" / "corpus"
MANIFEST_CASES = yaml.safe_load((CORPUS / "manifest_cases.yaml").read_text())
REQUEST_CASES = yaml.safe_load((CORPUS / "request_cases.yaml").read_text())
SCHEMA_PREFIXES = ("schema.", "placement.", "config.", "options.")


def _known(code: str) -> bool:
    return code in HINTS or code.startswith(SCHEMA_PREFIXES)


def _expected(case: dict) -> set[tuple[str, str]]:
    return {(e["code"], e["path"]) for e in case["expect"]}


def test_corpus_sizes():
    assert len(MANIFEST_CASES) >= 40
    assert len(REQUEST_CASES) >= 40
    assert len({c["name"] for c in MANIFEST_CASES}) == len(MANIFEST_CASES)
    assert len({c["name"] for c in REQUEST_CASES}) == len(REQUEST_CASES)


def _materialise_manifest(case: dict, tmp_path: Path) -> Path:
    folder = tmp_path / case["base"]
    shutil.copytree(MANIFESTS / case["base"], folder)
    manifest = folder / "manifest.yaml"
    if "text" in case:
        manifest.write_text(case["text"])
    else:
        data = yaml.safe_load(manifest.read_text())
        # a version made of another's parts (YAML anchors) shares their values: each case
        # patches the one version its paths name
        data["versions"] = [copy.deepcopy(version) for version in data["versions"]]
        data = jsonpatch.apply_patch(data, case.get("patch", []))
        manifest.write_text(yaml.safe_dump(data, sort_keys=False))
    for relative, content in case.get("files", {}).items():
        (folder / relative).write_text(content)
    return manifest


@pytest.mark.parametrize("case", MANIFEST_CASES, ids=lambda c: c["name"])
def test_manifest_case(case, tmp_path):
    manifest = _materialise_manifest(case, tmp_path)
    findings = lint_paths([manifest])
    got = {(f.code, f.path) for f in findings}
    assert got == _expected(case), [f.model_dump() for f in findings]
    for finding in findings:
        assert _known(finding.code), finding.code
        assert finding.file == str(manifest)
        assert finding.message


@pytest.mark.parametrize("case", REQUEST_CASES, ids=lambda c: c["name"])
def test_request_case(case, tmp_path, monkeypatch):
    # the platform's site settings the case names (its deny list, its sources), else none:
    # never the machine's own
    site = tmp_path / "site.yaml"
    if "site" in case:
        site.write_text(yaml.safe_dump(case["site"]))
    monkeypatch.setenv("SLURM_APP_SITE", str(site))
    if "text" in case:
        text = case["text"]
    else:
        data = json.loads((EXAMPLES / f"{case['base']}.json").read_text())
        text = json.dumps(jsonpatch.apply_patch(data, case["patch"]), indent=2)
    try:
        findings = check_request(load_json(text, "request.json")).findings
    except DocumentError as exc:
        findings = [exc.finding]
    got = {(f.code, f.path) for f in findings}
    assert got == _expected(case), [f.model_dump() for f in findings]
    assert all(_known(f.code) for f in findings)


def test_findings_carry_lines(tmp_path):
    case = next(c for c in MANIFEST_CASES if c["name"] == "endpoint-port-range")
    manifest = _materialise_manifest(case, tmp_path)
    (finding,) = lint_paths([manifest])
    line = manifest.read_text().splitlines()[finding.line - 1]
    assert "port" in line


def test_request_finding_line_points_at_field():
    text = (EXAMPLES / "slurm-reference" / "status.json").read_text()
    text = text.replace('"ssh_port": 22', '"ssh_port": 0', 1)
    (finding,) = check_request(load_json(text, "r.json")).findings
    assert '"ssh_port": 0' in text.splitlines()[finding.line - 1]


@pytest.mark.parametrize(
    ("text", "path", "line"),
    [
        ('{"b": 1,\n "a": 2,\n "a": 3,\n "b": 4}', "$.a", 3),
        ('{"a": [{"x": 1},\n {"x": 1,\n  "x": 2}]}', "$.a[1].x", 3),
        # the inner object is the first "k"'s value, which the later "k" replaces
        ('{"k": {"z": 1,\n "z": 2},\n "k": 3}', "$.k", 3),
        ('{"k": {"z": 1, "z": 2},\n "k": {"y": 1,\n "y": 2}}', "$.k", 2),
    ],
)
def test_a_repeated_json_key_is_the_first_a_reader_meets_again(text, path, line):
    with pytest.raises(DocumentError) as refused:
        load_json(text, "r.json")
    assert (refused.value.finding.code, refused.value.finding.path) == ("duplicate-key", path)
    assert refused.value.finding.line == line


@pytest.mark.parametrize(
    ("path", "line"),
    [
        (("a", "b", 2, "c"), 4),
        (("a", "b", 1), 3),
        (("a", "missing"), 1),  # a missing key: its object's line
        (("a", "b", 9), 2),  # past the end: the array's line
        (("a", "b", 0, "c"), 2),  # a number has no keys
    ],
)
def test_a_json_node_is_found_by_its_path_in_json_yaml_would_not_read(path, line):
    """A tab before the first brace: valid JSON that libyaml refuses to read."""
    doc = load_json('\t{"a": {\n\t"b": [1,\n 2,\n {"c": "x"}]}}', "r.json")
    assert doc.line_of(path) == line


def test_lint_accepts_file_beside_manifest():
    dashboard = MANIFESTS / "slurm-reference" / "dashboards" / "gpu-detail.json"
    assert lint_paths([dashboard]) == []
    assert load_path(dashboard).data["uid"] == "gpu-detail"
