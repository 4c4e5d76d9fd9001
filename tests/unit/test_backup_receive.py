"""slurm_controller's slurm_backup_receive (its rules, module_utils/slurm_backup.py) on this
machine: the control plane's judgement of a controller's backup answer (issue 65, 1). The
customer is root on the controller, so the answer's id, names, sizes and counts are theirs:
each hostile one is refused naming its field, with nothing written; the lab test
(test_lab_deploy) sends the same answers through the driver."""

import copy
import hashlib
import json
import os
from pathlib import Path

import pytest

from driver.role_code import controller_rules

# slurm_backup_receive's rules (the module is their Ansible wrapper)
receive = controller_rules("slurm_backup")

BACKUP_ID = "20261203T120000Z"
INSTANCE = "5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01"
STAGED = f"/var/lib/slurm-app-backup/{BACKUP_ID}"
EXPECTED = {
    "backup_id": BACKUP_ID,
    "destination": "staging",
    "path": STAGED,
    "instance_id": INSTANCE,
    "cluster_name": "demo",
}
CONTENT = {
    "state.tar.gz": b"state" * 100,
    "accounting.sql.gz": b"dump" * 100,
    "munge.key": os.urandom(1024),
    "records.tar.gz": b"records" * 10,
}
GIB = 1024**3


def _answer(**changes) -> dict:
    answer = {
        "backup_id": BACKUP_ID,
        "destination": "staging",
        "path": STAGED,
        "manifest": {
            "format": 1,
            "backup_id": BACKUP_ID,
            "instance_id": INSTANCE,
            "cluster_name": "demo",
            "slurm_version": "24.11.5",
            "bundle_version": "1.1",
            "created_at": "2026-12-03T12:00:05Z",
            "state_from": "2026-12-03T12:00:01Z",
            "accounting": True,
            "metrics": None,
            "files": [
                {"name": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                for name, data in CONTENT.items()
            ],
        },
        "scheduler_paused_s": 1.2,
        "pruned": [],
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = answer
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[int(last) if last.isdigit() else last] = value
    return answer


def _admit(folder: Path, answer, keep: int = 7, max_count: int = 10, max_bytes: int = 20 * GIB):
    text = answer if isinstance(answer, str) else json.dumps(answer)
    return receive.admit(text, dict(EXPECTED), str(folder), keep, max_count, max_bytes)


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


HOSTILE = {
    "an id that climbs": ({"backup_id": "../.."}, "backup_id"),
    "another instance's id": ({"backup_id": "20200101T000000Z"}, "backup_id"),
    "an absolute path": ({"path": "/etc/slurm-app-driver"}, "path"),
    "a climbing path": ({"path": f"{STAGED}/../../.."}, "path"),
    "a climbing name": ({"manifest__files__0__name": "../munge.key"}, "manifest.files[0].name"),
    "a name with a slash": ({"manifest__files__1__name": "a/b"}, "manifest.files[1].name"),
    "a NUL in a name": ({"manifest__files__2__name": "munge.key\x00x"}, "manifest.files[2].name"),
    "a 10 GiB munge key": ({"manifest__files__2__bytes": 10 * GIB}, "manifest.files[2].bytes"),
    "a size past the share": ({"manifest__files__0__bytes": 30 * GIB}, "manifest.files[0].bytes"),
    "10,000 files": (
        {"manifest__files": [{"name": f"f{i}", "bytes": 1} for i in range(10_000)]},
        "manifest.files",
    ),
    "a 2 MiB answer": ({"manifest__bundle_version": "1" * (2 << 20)}, "(the answer)"),
    "1,000 files": (
        {"manifest__files": [{"name": f"f{i}", "bytes": 1} for i in range(1000)]},
        "manifest.files",
    ),
    "a field the format has not": ({"manifest__extra": "x"}, "manifest"),
    "another instance": ({"manifest__instance_id": "other"}, "manifest.instance_id"),
    "a templated version": (
        {"manifest__slurm_version": "{{ lookup('pipe', 'id') }}"},
        "manifest.slurm_version",
    ),
    "a negative size": ({"manifest__files__3__bytes": -1}, "manifest.files[3].bytes"),
    "a checksum not in hex": ({"manifest__files__3__sha256": "z" * 64}, "manifest.files[3].sha256"),
    "a pruned path": ({"pruned": ["../../site.yaml"]}, "pruned[0]"),
    "a templated history start": (
        {"manifest__metrics": {"blocks": 1, "wal_segments": 1, "oldest_sample": "{{ x }}"}},
        "manifest.metrics.oldest_sample",
    ),
    "a history of a million blocks": (
        {"manifest__metrics": {"blocks": 10**6, "wal_segments": 1, "oldest_sample": None}},
        "manifest.metrics.blocks",
    ),
}


@pytest.mark.parametrize("changes, field", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_answer_is_refused_at_its_field_with_nothing_written(tmp_path, changes, field):
    folder = tmp_path / "backups" / INSTANCE
    before = _tree(tmp_path)
    with pytest.raises(receive.Refused) as refused:
        _admit(folder, _answer(**changes))
    assert str(refused.value).startswith(f"[backup_refused] {field}:"), refused.value
    assert "lookup" not in str(refused.value) and "\x00" not in str(refused.value)
    assert _tree(tmp_path) == before


@pytest.mark.parametrize(
    "text", ["", "not json", "[1]", '{"backup_id": "20261203T120000Z"}\n{"x": 1}'], ids=repr
)
def test_an_answer_that_is_not_one_object_is_refused(tmp_path, text):
    with pytest.raises(receive.Refused, match=r"^\[backup_refused\] "):
        _admit(tmp_path / INSTANCE, text)
    assert not (tmp_path / INSTANCE).exists()


def test_the_files_are_exactly_the_formats_no_more_no_fewer_no_twice(tmp_path):
    answer = _answer()
    files = answer["manifest"]["files"]
    for listed in ([*files[:3], copy.deepcopy(files[0])], files[:3], files[1:]):
        answer["manifest"]["files"] = listed
        with pytest.raises(receive.Refused, match=r"manifest\.files"):
            _admit(tmp_path / INSTANCE, answer)
    # without accounting there is no dump, and one would be refused
    without = _answer(manifest__accounting=False)
    without["manifest"]["files"] = [f for f in files if f["name"] != "accounting.sql.gz"]
    assert _admit(tmp_path / INSTANCE, without)["manifest"]["accounting"] is False
    # Prometheus's history: metrics.tar exactly where the manifest says it holds one
    history = {"name": "metrics.tar", "bytes": 10240, "sha256": "0" * 64}
    with_history = _answer(manifest__files=[*files, history])
    with pytest.raises(receive.Refused, match=r"manifest\.files: must list exactly"):
        _admit(tmp_path / INSTANCE, with_history)
    held = {"blocks": 3, "wal_segments": 2, "oldest_sample": "2026-12-01T02:00:00Z"}
    with_history["manifest"]["metrics"] = held
    assert _admit(tmp_path / INSTANCE, with_history)["manifest"]["metrics"] == held
    with pytest.raises(receive.Refused, match=r"manifest\.files: must list exactly"):
        _admit(tmp_path / INSTANCE, _answer(manifest__metrics=held))


def _received(folder: Path, answer: dict, content: dict[str, bytes] = CONTENT) -> Path:
    receiving = Path(_admit(folder, answer)["receiving"])
    assert receiving == folder / f"{answer['backup_id']}.partial"
    assert receiving.stat().st_mode & 0o777 == 0o700
    for name, data in content.items():
        (receiving / name).write_bytes(data)
    return receiving


def test_an_admitted_backup_is_filed_under_the_control_planes_names(tmp_path):
    folder = tmp_path / INSTANCE
    answer = _answer()
    _received(folder, answer)
    assert receive.settle(str(folder), answer["manifest"], 7, 10) == []
    filed = folder / BACKUP_ID
    assert sorted(path.name for path in folder.iterdir()) == [BACKUP_ID]
    assert json.loads((filed / "manifest.json").read_text()) == answer["manifest"]
    for name, data in CONTENT.items():
        assert (filed / name).read_bytes() == data
        assert (filed / name).stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    "damage, field",
    [
        ({"munge.key": b"x" * 1024}, "manifest.files[2].sha256"),
        ({"state.tar.gz": b"state" * 100 + b"more"}, "manifest.files[0].bytes"),
        ({"extra": b"x"}, "manifest.files"),
    ],
    ids=["another key", "more bytes than claimed", "a file not admitted"],
)
def test_fetched_files_that_are_not_the_admitted_ones_are_removed(tmp_path, damage, field):
    folder = tmp_path / INSTANCE
    answer = _answer()
    _received(folder, answer, {**CONTENT, **damage})
    with pytest.raises(receive.Refused) as refused:
        receive.settle(str(folder), answer["manifest"], 7, 10)
    assert str(refused.value).startswith(f"[backup_refused] {field}"), refused.value
    assert not any(folder.iterdir())


def _backup_ids(count: int) -> list[str]:
    """Ids of backups older than BACKUP_ID."""
    return [f"2026110{day}T000000Z" for day in range(1, count + 1)]


def test_the_instances_share_bounds_the_count_whatever_keep_says(tmp_path):
    folder = tmp_path / INSTANCE
    for backup_id in _backup_ids(5):
        (folder / backup_id).mkdir(parents=True)
    answer = _answer()
    _received(folder, answer)
    pruned = receive.settle(str(folder), answer["manifest"], keep=100, max_count=3)
    assert pruned == _backup_ids(5)[:3]
    assert sorted(path.name for path in folder.iterdir()) == [*_backup_ids(5)[3:], BACKUP_ID]


def test_the_instances_share_bounds_the_bytes_kept_beside_the_new_one(tmp_path):
    folder = tmp_path / INSTANCE
    for backup_id in _backup_ids(3):
        (folder / backup_id).mkdir(parents=True)
        (folder / backup_id / "state.tar.gz").write_bytes(b"x" * 1000)
    claimed = sum(len(data) for data in CONTENT.values())
    before = _tree(tmp_path)
    # keep 3: the 2 newest stay beside the new one, 2000 bytes
    with pytest.raises(
        receive.Refused, match=r"manifest\.files: .* 2 backup\(s\) kept .* hold 2000"
    ):
        receive.admit(json.dumps(_answer()), dict(EXPECTED), str(folder), 3, 10, claimed + 1999)
    assert _tree(tmp_path) == before
    admitted = receive.admit(
        json.dumps(_answer()), dict(EXPECTED), str(folder), 3, 10, claimed + 2000
    )
    assert admitted["receiving"]


def test_a_backup_on_the_mount_is_judged_and_nothing_is_made_here(tmp_path):
    expected = {**EXPECTED, "destination": "platform_mount", "path": f"/workspace/x/{BACKUP_ID}"}
    answer = _answer(
        destination="platform_mount", path=expected["path"], pruned=["20261101T000000Z"]
    )
    admitted = receive.admit(json.dumps(answer), expected, "", 7, 10, 20 * GIB)
    assert admitted["answer"] == answer and "receiving" not in admitted
    with pytest.raises(receive.Refused, match=r"^\[backup_refused\] path:"):
        receive.admit(json.dumps(_answer(destination="platform_mount")), expected, "", 7, 10, GIB)
