"""monitoring's monitoring_tsdb_restore module on this machine's filesystem, as root: the
metrics.tar the backup command (slurm_controller's slurm_app_backup.py) writes, put into a new
controller's Prometheus storage, and the archives it refuses without writing anything. The lab
test (test_controller_replacement) queries a real Prometheus on what it put back."""

import io
import os
import tarfile
from pathlib import Path

import pytest

from driver.role_code import role_code
from tests.unit.test_backup_command import BLOCKS, _config, _prometheus_storage, backup

tsdb_restore = role_code("monitoring", "library", "monitoring_tsdb_restore")

PROMETHEUS = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="owners can be given as root only")


def _tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


def _archive(tmp_path: Path) -> tuple[Path, Path]:
    """(the old controller's storage, the metrics.tar its backup holds)."""
    storage = _prometheus_storage(tmp_path)
    taken = backup.run(_config(tmp_path, metrics_dir=str(storage)), "mount")
    return storage, Path(taken["path"]) / "metrics.tar"


def test_the_blocks_and_log_are_put_back_as_prometheus_wrote_them(tmp_path):
    old, archive = _archive(tmp_path)
    new = tmp_path / "new" / "metrics2"
    # what the new controller's Prometheus made, had it started: its own log and head chunks,
    # and a block it shares with the backup
    (new / "wal").mkdir(parents=True)
    (new / "wal" / "00000000").write_bytes(b"its own")
    (new / "chunks_head").mkdir()
    shared = next(iter(BLOCKS))
    (new / shared).mkdir()
    (new / shared / "meta.json").write_text("{}")
    marker = tmp_path / "restored-metrics"
    done = tsdb_restore.restore(str(archive), new, PROMETHEUS, PROMETHEUS, marker, False)
    assert done == {"changed": True, "blocks": 2, "wal_segments": 3}
    kept = {
        name: content
        for name, content in _tree(old).items()
        if name.split("/")[0] in [*BLOCKS, "wal"] and not name.startswith(shared)
    }
    restored = _tree(new)
    assert {name: restored[name] for name in kept} == kept
    # the block it had stays its own; the log is the backup's alone, the head chunks gone
    assert restored[f"{shared}/meta.json"] == b"{}"
    assert "wal/00000000" not in restored and "chunks_head" not in restored
    assert ".slurm-app-restore" not in restored
    for path in [new / "wal", *(new / "wal").rglob("*"), *(new / list(BLOCKS)[1]).rglob("*")]:
        assert (path.stat().st_uid, path.stat().st_gid) == (PROMETHEUS, PROMETHEUS), path
    assert marker.read_text() == f"{archive}\n"
    # sent again (the replacement resumed): what Prometheus scraped since stays
    (new / "wal" / "00000006").write_bytes(b"scraped since")
    again = tsdb_restore.restore(str(archive), new, PROMETHEUS, PROMETHEUS, marker, False)
    assert again["changed"] is False
    assert (new / "wal" / "00000006").read_bytes() == b"scraped since"


def test_storage_prometheus_never_made_is_made_its(tmp_path):
    _, archive = _archive(tmp_path)
    new = tmp_path / "new" / "metrics2"
    marker = tmp_path / "restored-metrics"
    checked = tsdb_restore.restore(str(archive), new, PROMETHEUS, PROMETHEUS, marker, True)
    assert checked == {"changed": True, "blocks": 2, "wal_segments": 3}
    assert not new.exists() and not marker.exists()
    tsdb_restore.restore(str(archive), new, PROMETHEUS, PROMETHEUS, marker, False)
    assert new.stat().st_uid == PROMETHEUS
    assert sorted(path.name for path in new.iterdir()) == [*sorted(BLOCKS), "wal"]


def _hostile(path: Path, member: tarfile.TarInfo, data: bytes = b"") -> Path:
    with tarfile.open(path, "w") as tar:
        good = tarfile.TarInfo("wal/00000001")
        good.size = 4
        tar.addfile(good, io.BytesIO(b"good"))
        member.size = len(data) if member.isreg() else 0
        tar.addfile(member, io.BytesIO(data) if data else None)
    return path


def _member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type = kind
    member.linkname = target
    return member


HOSTILE = {
    "a climbing name": (_member("wal/../../../etc/cron.d/x"), b"* * * * * root id\n"),
    "an absolute name": (_member("/etc/cron.d/x"), b"x"),
    "a name outside the storage's grammar": (_member("etc/passwd"), b"x"),
    "a link": (_member("wal/00000002", tarfile.SYMTYPE, "/etc/shadow"), b""),
    "a hard link": (_member("wal/00000002", tarfile.LNKTYPE, "/etc/shadow"), b""),
    "a device": (_member("wal/00000002", tarfile.CHRTYPE), b""),
    "a folder too deep": (_member("wal/a/b/c/d"), b"x"),
}


@pytest.mark.parametrize(("member", "data"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_member_the_storage_does_not_have_is_refused_with_nothing_written(tmp_path, member, data):
    archive = _hostile(tmp_path / "metrics.tar", member, data)
    new = tmp_path / "new"
    new.mkdir()
    (new / "wal").mkdir()
    (new / "wal" / "00000000").write_bytes(b"its own")
    before = _tree(tmp_path)
    marker = tmp_path / "restored-metrics"
    with pytest.raises(tsdb_restore.Refused, match=r"^metrics\.tar: ") as refused:
        tsdb_restore.restore(str(archive), new, PROMETHEUS, PROMETHEUS, marker, False)
    assert repr(member.name) in str(refused.value)
    assert _tree(tmp_path) == before
