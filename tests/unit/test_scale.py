"""Requests of a 10,000-worker cluster: valid ones pass, and findings still carry their lines
(the line map is computed only when there is a finding)."""

import json

from bench.requests import add_worker_request
from driver.documents import DocumentError, load_json
from driver.request_check import check_request


def _lines_of(text: str, needle: str) -> list[int]:
    return [number for number, line in enumerate(text.splitlines(), 1) if needle in line]


def test_a_finding_deep_in_a_large_request_names_its_line():
    data = add_worker_request(10000)
    data["allocations"][9001]["address"] = "not an address"
    text = json.dumps(data, indent=2)
    result = check_request(load_json(text, "big.json"))
    assert [(f.code, f.path) for f in result.findings] == [
        ("schema.pattern", "$.allocations[9001].address")
    ]
    (finding,) = result.findings
    assert [finding.line] == _lines_of(text, '"not an address"')


def test_a_duplicate_key_in_a_large_request_is_refused_with_its_line():
    text = json.dumps(add_worker_request(10000), indent=2)
    marker = '"hostname": "node-09000",'
    assert text.count(marker) == 1
    text = text.replace(marker, marker + '\n      "hostname": "node-x",')
    try:
        load_json(text, "big.json")
    except DocumentError as exc:
        finding = exc.finding
    else:
        raise AssertionError("a duplicate key was accepted")
    assert finding.code == "duplicate-key"
    assert finding.line == _lines_of(text, '"hostname": "node-x"')[0]


def test_more_workers_than_the_component_allows_are_refused():
    result = check_request(load_json(json.dumps(add_worker_request(10001))))
    assert [(f.code, f.path) for f in result.findings] == [("member-mismatch", "$.members")]
    assert "at most 10000 worker" in result.findings[0].message
