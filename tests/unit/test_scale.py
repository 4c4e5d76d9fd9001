"""Requests of a 10,000-worker cluster: valid ones pass, and findings still carry their lines
(the line map is computed only when there is a finding)."""

import json

from bench.requests import add_worker_request, one_host_key_request
from driver import documents
from driver.documents import DocumentError, load_json
from driver.findings import MAX_FINDINGS
from driver.operation import Exit, Refusal, load_checked, refused_run
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


def test_locating_any_number_of_findings_reads_each_part_of_the_document_once(monkeypatch):
    """Issue 50 (5): 10,000 findings in one array each rescanned the array from its start
    (8 min 51 s to refuse). Each object's and array's children are now read once, however many
    findings point into it."""
    scanned: list[int] = []
    for reader in ("_members", "_items"):
        original = getattr(documents, reader)

        def counting(text, offset, original=original):
            scanned.append(offset)
            return original(text, offset)

        monkeypatch.setattr(documents, reader, counting)
    text = json.dumps(one_host_key_request(2000), indent=2)
    result = check_request(load_json(text, "big.json"))
    assert result.findings_total == 2000  # every allocation's key but the first's
    assert len(scanned) == len(set(scanned)), "a part of the document was read twice"
    # the first findings, each on its own line: the key of allocations[i] for i = 1, 2, ...
    key_lines = _lines_of(text, '"ssh-ed25519 ')
    assert [f.line for f in result.findings[:MAX_FINDINGS]] == key_lines[1 : MAX_FINDINGS + 1]


def test_an_answer_lists_the_first_findings_then_counts_the_rest():
    result = check_request(load_json(json.dumps(one_host_key_request(2000), indent=2), "big.json"))
    assert len(result.findings) == MAX_FINDINGS + 1
    assert {f.code for f in result.findings[:MAX_FINDINGS]} == {"duplicate-id"}
    last = result.findings[-1]
    assert (last.code, last.path) == ("more-findings", "$")
    assert (
        last.message == "2000 findings in all: the other 1900 are not listed (duplicate-id: 1900)"
    )


def test_the_refused_runs_result_counts_every_finding_and_lists_the_first(tmp_path, capsys):
    path = tmp_path / "request.json"
    path.write_text(json.dumps(one_host_key_request(2000), indent=2))
    refusal = load_checked(str(path), files=False)
    assert isinstance(refusal, Refusal)
    assert refused_run(refusal, "json", None, None) == Exit.INVALID
    result = json.loads(capsys.readouterr().out.splitlines()[-1])["result"]
    assert result["error"]["message"] == (
        "the request is invalid: 2000 finding(s); nothing was changed on any host"
    )
    assert len(result["error"]["findings"]) == MAX_FINDINGS + 1
