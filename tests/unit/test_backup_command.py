"""The controller's backup command (roles/slurm_controller/files/slurm_app_backup.py) on real
files, as root: where it writes and what it refuses, the manifest against the files, what the
retention removes and what `status` says. Its run against real daemons (slurmctld stopped and
started, mariadb-dump) is the lab's: tests/e2e/test_open_ondemand.py and test_slurm_22_05.py."""

import hashlib
import json
import os
import tarfile
from pathlib import Path

import pytest

from driver.role_code import controller_rules, role_code

backup = role_code("slurm_controller", "files", "slurm_app_backup")

NOBODY = 65534


def _config(tmp_path: Path, **overrides) -> dict:
    state = tmp_path / "state"
    state.mkdir()
    (state / "job_state").write_bytes(b"jobs")
    (state / "node_state").write_bytes(b"nodes")
    key = tmp_path / "munge.key"
    key.write_bytes(os.urandom(1024))
    records = tmp_path / "records"
    records.mkdir()
    (records / "converged").write_text("{}")
    mount = tmp_path / "mount"
    mount.mkdir()
    mount.chmod(0o1777)
    return {
        "instance_id": "5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01",
        "cluster_name": "demo",
        "bundle_version": "0.1.0",
        "state_save_location": str(state),
        "accounting": False,
        "database": "slurm_acct_db",
        "munge_key": str(key),
        "records": [str(records), str(tmp_path / "absent")],
        "mount_root": str(mount),
        "mount_folder": "slurm-app-backups/5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01",
        "staging_root": str(tmp_path),
        "staging_folder": "staging",
        "keep": 2,
        "interval_s": None,
        "status_file": str(tmp_path / "backup-status.json"),
        "timer_unit": str(tmp_path / "slurm-app-backup.timer"),
        **overrides,
    }


def test_a_backup_holds_its_files_as_its_manifest_lists_them(tmp_path):
    config = _config(tmp_path)
    taken = backup.run(config, "mount")
    folder = Path(taken["path"])
    assert folder.parent == tmp_path / "mount" / config["mount_folder"]
    assert taken["destination"] == "platform_mount"
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest == taken["manifest"]
    assert manifest["instance_id"] == config["instance_id"]
    assert manifest["cluster_name"] == "demo"
    assert [entry["name"] for entry in manifest["files"]] == [
        "state.tar.gz",
        "munge.key",
        "records.tar.gz",
    ]
    for entry in manifest["files"]:
        content = (folder / entry["name"]).read_bytes()
        assert entry["bytes"] == len(content)
        assert entry["sha256"] == hashlib.sha256(content).hexdigest()
    assert (folder / "munge.key").read_bytes() == Path(config["munge_key"]).read_bytes()
    assert (folder / "munge.key").stat().st_mode & 0o777 == 0o400
    with tarfile.open(folder / "state.tar.gz") as tar:
        names = tar.getnames()
    assert config["state_save_location"].lstrip("/") + "/job_state" in names
    # every folder from the mount down is root's alone
    for path in (folder, folder.parent, folder.parent.parent):
        assert path.stat().st_uid == 0 and path.stat().st_mode & 0o777 == 0o700
    # the key's bytes appear in no output of the command
    assert Path(config["munge_key"]).read_bytes().hex() not in json.dumps(taken)
    recorded = json.loads(Path(config["status_file"]).read_text())
    assert recorded["last_success"]["backup_id"] == taken["backup_id"]


# Two persisted blocks as Prometheus writes them (ULID folders, meta.json last), one it is
# still writing, one it is compacting, and its write-ahead log and head chunks.
BLOCKS = {"01JDX8T2V9A3C0000000000000": 1764547200000, "01JDXFNT19A3C0000000000000": 1764554400000}


def _prometheus_storage(tmp_path: Path) -> Path:
    storage = tmp_path / "metrics2"
    for block, start in BLOCKS.items():
        (storage / block / "chunks").mkdir(parents=True)
        (storage / block / "chunks" / "000001").write_bytes(os.urandom(4096))
        (storage / block / "index").write_bytes(os.urandom(512))
        (storage / block / "tombstones").write_bytes(b"\x00" * 9)
        meta = {"ulid": block, "minTime": start, "maxTime": start + 7_200_000, "version": 1}
        (storage / block / "meta.json").write_text(json.dumps(meta))
    (storage / "01JDXPHJ99A3C0000000000000" / "chunks").mkdir(parents=True)
    (storage / "01JDXPHJ99A3C0000000000000.tmp-for-creation").mkdir()
    (storage / "wal" / "checkpoint.00000003").mkdir(parents=True)
    (storage / "wal" / "checkpoint.00000003" / "00000000").write_bytes(os.urandom(256))
    for segment in ("00000004", "00000005"):
        (storage / "wal" / segment).write_bytes(os.urandom(1024))
    (storage / "chunks_head").mkdir()
    (storage / "chunks_head" / "000001").write_bytes(os.urandom(128))
    (storage / "lock").write_text("")
    (storage / "queries.active").write_text("")
    return storage


def test_prometheus_history_is_its_blocks_and_log_at_one_moment(tmp_path):
    storage = _prometheus_storage(tmp_path)
    config = _config(tmp_path, metrics_dir=str(storage))
    taken = backup.run(config, "mount", "20261101T000000Z")
    manifest = taken["manifest"]
    assert manifest["metrics"] == {
        "blocks": 2,
        "wal_segments": 3,
        "oldest_sample": "2025-12-01T00:00:00Z",
    }
    assert [entry["name"] for entry in manifest["files"]][-1] == "metrics.tar"
    with tarfile.open(Path(taken["path"]) / "metrics.tar") as tar:
        files = {member.name: tar.extractfile(member).read() for member in tar if member.isfile()}
    # the blocks and the log, byte for byte; not the block being written, the folders
    # Prometheus is making or removing, its head chunks (the log rebuilds them) or its lock
    on_disk = {
        str(path.relative_to(storage)): path.read_bytes()
        for path in storage.rglob("*")
        if path.is_file() and path.relative_to(storage).parts[0] in [*BLOCKS, "wal"]
    }
    assert files == on_disk
    # the upgrade's backup leaves it out
    without = backup.run(config, "mount", "20261102T000000Z", metrics=False)
    assert without["manifest"]["metrics"] is None
    assert "metrics.tar" not in [entry["name"] for entry in without["manifest"]["files"]]
    # and a controller without Prometheus has none
    (tmp_path / "other").mkdir()
    elsewhere = _config(tmp_path / "other", metrics_dir=None)
    assert backup.run(elsewhere, "mount")["manifest"]["metrics"] is None


def test_a_block_prometheus_cuts_during_the_copy_makes_it_start_again(tmp_path, monkeypatch):
    storage = _prometheus_storage(tmp_path)
    config = _config(tmp_path, metrics_dir=str(storage))
    layouts = []
    read_layout = backup._tsdb_layout

    def cut_after_the_first_copy(data_dir):
        layouts.append(read_layout(data_dir))
        if len(layouts) == 2:
            # the head's oldest hours cut into a block, and the log checkpointed past them
            cut = storage / "01JDXPHJ99A3C0000000000000"
            meta = {"ulid": cut.name, "minTime": 1764561600000, "maxTime": 1764568800000}
            (cut / "meta.json").write_text(json.dumps(meta))
            (storage / "wal" / "checkpoint.00000003" / "00000000").unlink()
            (storage / "wal" / "checkpoint.00000003").rmdir()
            (storage / "wal" / "00000004").unlink()
            (storage / "wal" / "checkpoint.00000004").mkdir()
            (storage / "wal" / "checkpoint.00000004" / "00000000").write_bytes(b"kept")
        return read_layout(data_dir)

    monkeypatch.setattr(backup, "_tsdb_layout", cut_after_the_first_copy)
    taken = backup.run(config, "mount")
    assert len(layouts) == 4  # copied twice, each between two reads of the layout
    assert taken["manifest"]["metrics"]["blocks"] == 3
    with tarfile.open(Path(taken["path"]) / "metrics.tar") as tar:
        names = set(tar.getnames())
    assert "01JDXPHJ99A3C0000000000000/meta.json" in names
    assert "wal/checkpoint.00000004/00000000" in names and "wal/00000004" not in names


def test_a_storage_that_changes_under_every_copy_fails_the_backup(tmp_path, monkeypatch):
    storage = _prometheus_storage(tmp_path)
    config = _config(tmp_path, metrics_dir=str(storage))
    moments = iter(range(100))
    monkeypatch.setattr(backup, "_tsdb_layout", lambda data_dir: ([str(next(moments))], []))
    with pytest.raises(backup.BackupError, match="changed under each of 5 copies"):
        backup.run(config, "mount")
    # nothing half-written holds the mount's space
    assert list((tmp_path / "mount" / config["mount_folder"]).iterdir()) == []
    assert json.loads(Path(config["status_file"]).read_text())["last_attempt"]["ok"] is False


def test_a_link_planted_on_the_mount_is_never_followed(tmp_path):
    config = _config(tmp_path)
    target = tmp_path / "elsewhere"
    target.mkdir()
    (tmp_path / "mount" / "slurm-app-backups").symlink_to(target)
    with pytest.raises(backup.BackupError, match="a link is never followed"):
        backup.run(config, "mount")
    assert list(target.iterdir()) == []
    recorded = json.loads(Path(config["status_file"]).read_text())
    assert recorded["last_attempt"]["ok"] is False
    assert "slurm-app-backups" in recorded["last_attempt"]["reason"]
    assert "last_success" not in recorded


@pytest.mark.parametrize(("owner", "mode"), [(NOBODY, 0o700), (0, 0o755), (0, 0o770)])
def test_a_folder_on_the_way_that_is_not_roots_alone_is_refused(tmp_path, owner, mode):
    config = _config(tmp_path)
    planted = tmp_path / "mount" / "slurm-app-backups"
    planted.mkdir()
    os.chown(planted, owner, owner)
    planted.chmod(mode)
    with pytest.raises(backup.BackupError, match="must be root's and 0700"):
        backup.run(config, "mount")
    assert list(planted.iterdir()) == []


def test_a_cluster_without_a_mount_refuses_the_mount_and_stages_instead(tmp_path):
    config = _config(tmp_path, mount_root=None)
    with pytest.raises(backup.BackupError, match="no platform mount"):
        backup.run(config, "mount")
    left_behind = tmp_path / "staging" / "20261101T000000Z"
    left_behind.mkdir(parents=True, mode=0o700)
    (tmp_path / "staging").chmod(0o700)
    (left_behind / "munge.key").write_bytes(b"an unfetched copy")
    staged = backup.run(config, "staging")
    assert staged["destination"] == "staging"
    assert Path(staged["path"]).parent == tmp_path / "staging"
    # a staged copy a failed run never fetched is gone; the control plane keeps its own
    assert [p.name for p in (tmp_path / "staging").iterdir()] == [staged["backup_id"]]
    assert staged["pruned"] == []


def test_the_newest_backups_are_kept_and_half_written_ones_removed(tmp_path):
    base = tmp_path / "base"
    base.mkdir(mode=0o700)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("x")
    names = ["20261101T000000Z", "20261102T000000Z", "20261103T000000Z"]
    for name in names:
        (base / name).mkdir()
    (base / "20261101T000000Z" / "link").symlink_to(outside)
    (base / "20261104T000000Z.partial").mkdir()
    (base / "not-a-backup").mkdir()
    fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    try:
        pruned = backup.prune(fd, 2)
    finally:
        os.close(fd)
    assert pruned == ["20261101T000000Z", "20261104T000000Z.partial"]
    assert sorted(p.name for p in base.iterdir()) == [*names[1:], "not-a-backup"]
    assert (outside / "precious").read_text() == "x"


def test_retention_keeps_keep_backups_across_runs(tmp_path, monkeypatch):
    config = _config(tmp_path, keep=2)
    stamps = iter(["20261101T000000Z", "20261102T000000Z", "20261103T000000Z"])

    class Clock:
        @staticmethod
        def now(tz=None):
            class Stamp:
                def strftime(self, form):
                    return next(stamps) if form == "%Y%m%dT%H%M%SZ" else "2026-11-01T00:00:00Z"

            return Stamp()

    monkeypatch.setattr(backup.datetime, "datetime", Clock)
    taken = [backup.run(config, "mount") for _ in range(3)]
    assert taken[2]["pruned"] == ["20261101T000000Z"]
    folder = tmp_path / "mount" / config["mount_folder"]
    assert sorted(p.name for p in folder.iterdir()) == ["20261102T000000Z", "20261103T000000Z"]


def test_status_is_overdue_after_two_intervals_without_a_success(tmp_path):
    config = _config(tmp_path, interval_s=3600)
    timer = Path(config["timer_unit"])
    timer.write_text("[Timer]\n")
    now = timer.stat().st_mtime
    assert backup.status(config, now + 3600)["overdue"] is False
    assert backup.status(config, now + 7201)["overdue"] is True
    Path(config["status_file"]).write_text(
        json.dumps(
            {
                "last_attempt": {"at": "2026-12-01T10:00:00Z", "ok": False, "reason": "x"},
                "last_success": {"at": "2026-12-01T09:00:00Z", "ok": True, "backup_id": "b"},
            }
        )
    )
    nine = 1796115600.0  # 2026-12-01T09:00:00Z
    fresh = backup.status(config, nine + 3600)
    assert fresh["last_success"]["age_s"] == 3600
    assert fresh["last_attempt"]["ok"] is False
    assert fresh["overdue"] is False
    assert backup.status(config, nine + 7201)["overdue"] is True
    # unscheduled backups are never overdue
    assert backup.status({**config, "interval_s": None}, nine + 10**6)["overdue"] is False


# replace_controller's check of a backup (slurm_backup_verify's rules, in
# module_utils/slurm_backup.py), on backups the command above wrote.
verify_module = controller_rules("slurm_backup")
INSTANCE = "5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01"


def _written(tmp_path: Path, count: int = 1) -> tuple[Path, Path, list[str]]:
    """(mount, the instance's backups folder, backup ids oldest first)."""
    config = _config(tmp_path)
    ids = []
    for index in range(count):
        taken = backup.take(
            config,
            backup.open_folder(config["mount_root"], config["mount_folder"]),
            f"2026110{index + 1}T000000Z",
        )
        ids.append(taken["backup_id"])
    return Path(config["mount_root"]), Path(config["mount_root"]) / config["mount_folder"], ids


def _check(mount: Path, folder: Path, backup_id: str = "", cluster: str = "demo") -> dict:
    chosen = verify_module.choose(folder, mount, backup_id)
    return {"path": chosen, "manifest": verify_module.verify(chosen, INSTANCE, cluster)}


def test_the_newest_complete_backup_is_chosen_or_the_one_named(tmp_path):
    mount, folder, ids = _written(tmp_path, 2)
    (folder / "20261109T000000Z.partial").mkdir(mode=0o700)
    newest = _check(mount, folder)
    assert newest["path"].name == ids[-1] and newest["manifest"]["backup_id"] == ids[-1]
    assert _check(mount, folder, ids[0])["path"].name == ids[0]
    with pytest.raises(verify_module.Refused, match=r"^\[backup_missing\] no backup 20261108"):
        _check(mount, folder, "20261108T000000Z")
    with pytest.raises(verify_module.Refused, match=r"^\[backup_missing\] no backup of this"):
        _check(mount, mount / "slurm-app-backups" / "another-instance")


def test_another_instances_or_clusters_backup_is_a_mismatch_naming_both(tmp_path):
    mount, folder, _ = _written(tmp_path)
    with pytest.raises(verify_module.Refused) as refused:
        _check(mount, folder, cluster="other")
    assert str(refused.value).startswith("[backup_mismatch]")
    assert "cluster_name 'demo', this cluster's is 'other'" in str(refused.value)
    with pytest.raises(verify_module.Refused, match=r"^\[backup_mismatch\] .*instance_id"):
        verify_module.verify(verify_module.choose(folder, mount, ""), "other-instance", "demo")


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda f: (f / "munge.key").write_bytes(os.urandom(1024)), "sha256 is not the manifest"),
        (lambda f: (f / "state.tar.gz").unlink(), "listed in the manifest, missing"),
        (lambda f: (f / "records.tar.gz").write_bytes(b"short"), "bytes, the manifest says"),
        (lambda f: (f / "manifest.json").write_text("{"), "not readable as JSON"),
    ],
)
def test_a_backup_that_is_not_as_its_manifest_says_is_corrupt(tmp_path, damage, says):
    mount, folder, ids = _written(tmp_path)
    damage(folder / ids[0])
    with pytest.raises(verify_module.Refused, match=r"^\[backup_corrupt\] ") as refused:
        _check(mount, folder)
    assert says in str(refused.value)
    # named by backup and file: a control plane's own folder never reaches the result
    assert str(tmp_path) not in str(refused.value)
    assert str(refused.value).startswith(f"[backup_corrupt] backup {ids[0]}: ")


def test_a_backup_planted_through_a_link_or_an_open_folder_is_refused(tmp_path):
    mount, folder, ids = _written(tmp_path)
    planted = tmp_path / "planted"
    (folder / ids[0]).rename(planted)
    (folder / "20261109T000000Z").symlink_to(planted)
    with pytest.raises(verify_module.Refused, match="not a link"):
        _check(mount, folder)
    (folder / "20261109T000000Z").unlink()
    planted.rename(folder / ids[0])
    folder.chmod(0o755)
    with pytest.raises(verify_module.Refused, match=rf"^\[backup_corrupt\] folder {folder.name}: "):
        _check(mount, folder)
