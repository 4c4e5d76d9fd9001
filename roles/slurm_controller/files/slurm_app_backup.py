#!/usr/bin/python3
"""The controller's backup: slurmctld's saved state, the accounting database, the munge key,
the bundle's records and Prometheus's history, with a manifest of sizes and sha256, in one
folder.

`backup run --to mount|staging [--id ID]` takes one (the backup operation; the timer's service runs
`--to mount`); `backup status` prints the last one's age and outcome for the status report.
What it knows of the cluster comes from /etc/slurm-app/backup.json (slurm_controller's
_backup.yml). Its output is one JSON document on stdout; exit 1 with {"error": ...} on failure.

Consistency: slurmctld is stopped for the copy of its state and the database's dump, and
started again at once (running jobs do not notice: slurmd and slurmstepd keep them, and what
they report meanwhile is retried). On shutdown slurmctld writes every state file, the
accounting messages slurmdbd has not acknowledged included, so the state and the dump describe
one moment and nothing is counted twice or lost between them. The dump is one
REPEATABLE READ transaction (--single-transaction) over InnoDB tables.

The destination is reached without following any link: every folder from the trusted root
(the platform's mount, or /var/lib) down is opened with O_NOFOLLOW and must be root's and
0700, so a cluster user who can write the mount cannot redirect a backup holding the munge key.
A backup is written as `<id>.partial` and renamed to `<id>` when complete.

Prometheus's history (metrics.tar): its persisted blocks, never changed once written, and its
write-ahead log, from which Prometheus rebuilds its head (the last hours) as after a crash; no
admin API, which would let any user of the host (the portal's login host) delete series. A
block cut while the copy runs makes it start again: the blocks and the log are of one moment.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import gzip
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

# The bundle's Slurm readers, installed beside this command (slurm_controller's _tasks.yml).
from slurm_readers.versions import slurm_version

CONFIG = "/etc/slurm-app/backup.json"
LOCK = "/run/slurm-app-backup.lock"
# A backup's name: the UTC second it began, so that names sort by age.
BACKUP_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z$")
# A persisted block's folder: its ULID (Crockford's base32); Prometheus's own temporary ones
# end in .tmp-for-creation or .tmp-for-deletion and are never taken.
TSDB_BLOCK = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
TSDB_WAL = "wal"
TSDB_TRIES = 5
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
CHUNK = 1 << 20


class BackupError(Exception):
    """A backup that could not be taken; the message says why (no secret in it)."""


class _Hashing:
    """A write-only file that counts and hashes what passes through it."""

    def __init__(self, sink: IO[bytes]) -> None:
        self.sink = sink
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.sink.write(data)

    def flush(self) -> None:
        self.sink.flush()


def open_folder(root: str, relative: str) -> int:
    """A descriptor of root/relative, each missing folder made by root (0700). No link below
    root is followed, and each folder below it must be root's and 0700."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    walked = PurePosixPath(root)
    try:
        for part in PurePosixPath(relative).parts:
            walked /= part
            if part in ("/", ".", ".."):
                raise BackupError(f"{walked}: not a folder name")
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o700, dir_fd=fd)
            try:
                child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise BackupError(f"{walked}: not a folder (a link is never followed)") from exc
            os.close(fd)
            fd = child
            info = os.fstat(fd)
            if info.st_uid != 0 or stat.S_IMODE(info.st_mode) & 0o077:
                raise BackupError(f"{walked}: must be root's and 0700")
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextlib.contextmanager
def new_file(folder: int, name: str, mode: int = 0o600) -> Iterator[_Hashing]:
    """A file made (never an existing one, never through a link) in the open folder."""
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=folder)
    with os.fdopen(fd, "wb") as sink:
        hashing = _Hashing(sink)
        yield hashing
        sink.flush()
        os.fsync(sink.fileno())


def _entry(name: str, written: _Hashing) -> dict[str, Any]:
    return {"name": name, "bytes": written.size, "sha256": written.sha256.hexdigest()}


def _tar(folder: int, name: str, paths: list[str]) -> dict[str, Any]:
    with new_file(folder, name) as written:
        with tarfile.open(fileobj=written, mode="w:gz") as tar:  # type: ignore[call-overload]
            for path in paths:
                if os.path.lexists(path):
                    tar.add(path, arcname=path.lstrip("/"))
        return _entry(name, written)


def _tsdb_layout(data_dir: str) -> tuple[list[str], list[str]]:
    """The persisted blocks (those whose meta.json is written) and the log's checkpoints: what
    changes when Prometheus cuts or compacts a block."""
    blocks, checkpoints = [], []
    with os.scandir(data_dir) as entries:
        for entry in entries:
            if TSDB_BLOCK.match(entry.name) and Path(entry.path, "meta.json").is_file():
                blocks.append(entry.name)
    with contextlib.suppress(FileNotFoundError), os.scandir(f"{data_dir}/{TSDB_WAL}") as entries:
        checkpoints = [entry.name for entry in entries if entry.name.startswith("checkpoint.")]
    return sorted(blocks), sorted(checkpoints)


def _oldest_sample(data_dir: str, blocks: list[str]) -> str | None:
    """The start of the oldest block (its meta.json's minTime): how far back history goes."""
    starts = []
    for block in blocks:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            meta = json.loads(Path(data_dir, block, "meta.json").read_text(encoding="utf-8"))
            starts.append(int(meta["minTime"]))
    if not starts:
        return None
    oldest = datetime.datetime.fromtimestamp(min(starts) / 1000, datetime.UTC)
    return oldest.strftime("%Y-%m-%dT%H:%M:%SZ")


def _tsdb(folder: int, name: str, data_dir: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Prometheus's blocks and write-ahead log in an uncompressed tar (their chunks are
    compressed already), with what the manifest says of them."""
    for _ in range(TSDB_TRIES):
        layout = _tsdb_layout(data_dir)
        blocks = layout[0]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=folder)
        try:
            with (
                new_file(folder, name) as written,
                tarfile.open(fileobj=written, mode="w|") as tar,  # type: ignore[call-overload]
            ):
                for block in blocks:
                    tar.add(f"{data_dir}/{block}", arcname=block)
                wal = Path(data_dir, TSDB_WAL)
                if wal.is_dir():
                    tar.add(wal, arcname=TSDB_WAL)
                logged = [m for m in tar.getmembers() if m.name.startswith(f"{TSDB_WAL}/")]
        except FileNotFoundError:
            # a block, or a log segment, Prometheus removed under the copy
            continue
        if _tsdb_layout(data_dir) == layout:
            metrics = {
                "blocks": len(blocks),
                "wal_segments": sum(member.isfile() for member in logged),
                "oldest_sample": _oldest_sample(data_dir, blocks),
            }
            return _entry(name, written), metrics
    raise BackupError(
        f"Prometheus's blocks in {data_dir} changed under each of {TSDB_TRIES} copies"
    )


def _dump(folder: int, name: str, database: str) -> dict[str, Any]:
    command = ["mariadb-dump", "--single-transaction", "--quick", "--routines", "--triggers"]
    with new_file(folder, name) as written:
        with gzip.GzipFile(filename="", fileobj=written, mode="wb") as compressed:  # type: ignore[arg-type]
            dump = subprocess.Popen(
                [*command, "--databases", database],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            assert dump.stdout is not None
            shutil.copyfileobj(dump.stdout, compressed, CHUNK)
            _, errors = dump.communicate()
        if dump.returncode != 0:
            raise BackupError(f"mariadb-dump failed: {errors.decode(errors='replace').strip()}")
        return _entry(name, written)


def _copy(folder: int, name: str, path: str) -> dict[str, Any]:
    with Path(path).open("rb") as source, new_file(folder, name, 0o400) as written:
        shutil.copyfileobj(source, written, CHUNK)
        return _entry(name, written)


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    """A command's outcome; one that cannot be started answers 127, like a shell."""
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False)
    except OSError as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


def _systemctl(*args: str) -> subprocess.CompletedProcess[str]:
    return _run("systemctl", *args)


@contextlib.contextmanager
def slurmctld_stopped() -> Iterator[dict[str, Any]]:
    """slurmctld stopped (it saves its whole state as it stops) and started again, whatever
    happens in between; a slurmctld that was not running is left so."""
    running = _systemctl("is-active", "--quiet", "slurmctld").returncode == 0
    pause: dict[str, Any] = {"was_running": running}
    started = time.monotonic()
    if pause["was_running"]:
        stopped = _systemctl("stop", "slurmctld")
        if stopped.returncode != 0:
            raise BackupError(f"slurmctld did not stop: {stopped.stderr.strip()}")
    pause["state_from"] = _now()
    try:
        yield pause
    finally:
        if pause["was_running"]:
            _systemctl("start", "slurmctld")
        pause["paused_s"] = round(time.monotonic() - started, 3)


def installed_slurm_version() -> str:
    answer = _run("slurmctld", "-V")
    return slurm_version(answer.stdout) if answer.returncode == 0 else "unknown"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def destination(config: dict[str, Any], to: str) -> tuple[str, str]:
    """(trusted root, folder below it) where `to` puts the backups."""
    if to == "mount":
        if not config.get("mount_root"):
            raise BackupError("the cluster has no platform mount (storage.model allocation_local)")
        return config["mount_root"], config["mount_folder"]
    return config["staging_root"], config["staging_folder"]


def take(config: dict[str, Any], base: int, backup_id: str, metrics: bool = True) -> dict[str, Any]:
    """Write one backup into base/<backup_id> and return its manifest; Prometheus's history
    where `metrics` and the configuration names its folder."""
    partial = f"{backup_id}.partial"
    os.mkdir(partial, 0o700, dir_fd=base)
    folder = os.open(partial, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=base)
    try:
        files = []
        with slurmctld_stopped() as pause:
            files.append(_tar(folder, "state.tar.gz", [config["state_save_location"]]))
            if config["accounting"]:
                files.append(_dump(folder, "accounting.sql.gz", config["database"]))
        files.append(_copy(folder, "munge.key", config["munge_key"]))
        files.append(_tar(folder, "records.tar.gz", config["records"]))
        history = None
        if metrics and config.get("metrics_dir") and Path(config["metrics_dir"]).is_dir():
            entry, history = _tsdb(folder, "metrics.tar", config["metrics_dir"])
            files.append(entry)
        manifest = {
            "format": MANIFEST_FORMAT,
            "backup_id": backup_id,
            "instance_id": config["instance_id"],
            "cluster_name": config["cluster_name"],
            "slurm_version": installed_slurm_version(),
            "bundle_version": config["bundle_version"],
            "created_at": _now(),
            "state_from": pause["state_from"],
            "accounting": bool(config["accounting"]),
            "metrics": history,
            "files": files,
        }
        with new_file(folder, MANIFEST, 0o600) as written:
            written.write(json.dumps(manifest, indent=2).encode() + b"\n")
        os.fsync(folder)
    except BaseException:
        # a failed backup does not hold the mount's space (Prometheus's history is gigabytes)
        shutil.rmtree(partial, dir_fd=base, ignore_errors=True)
        raise
    finally:
        os.close(folder)
    os.rename(partial, backup_id, src_dir_fd=base, dst_dir_fd=base)
    os.fsync(base)
    return {**manifest, "scheduler_paused_s": pause["paused_s"]}


def prune(base: int, keep: int) -> list[str]:
    """Remove all but the newest `keep` backups, and any a failed run left half-written."""
    names = os.listdir(base)
    backups = sorted(name for name in names if BACKUP_ID.match(name))
    doomed = backups[: max(len(backups) - keep, 0)]
    doomed += [name for name in names if name.endswith(".partial")]
    for name in doomed:
        shutil.rmtree(name, dir_fd=base)
    return sorted(doomed)


def _record(config: dict[str, Any], outcome: dict[str, Any]) -> None:
    """The last attempt's outcome (and the last success's) in the status file."""
    path = Path(config["status_file"])
    recorded = _recorded(path)
    recorded["last_attempt"] = outcome
    if outcome["ok"]:
        recorded["last_success"] = outcome
    temporary = path.with_name(f"{path.name}.new")
    temporary.write_text(json.dumps(recorded), encoding="utf-8")
    temporary.replace(path)


def _recorded(path: Path) -> dict[str, Any]:
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def run(
    config: dict[str, Any], to: str, backup_id: str | None = None, metrics: bool = True
) -> dict[str, Any]:
    """One backup named `backup_id` (the control plane names the ones it asks for; the timer's
    are named by the second they begin)."""
    backup_id = backup_id or datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        root, folder = destination(config, to)
        base = open_folder(root, folder)
        try:
            if to == "staging":
                # what a run that failed before the control plane fetched it left behind
                prune(base, 0)
            manifest = take(config, base, backup_id, metrics)
            pruned = prune(base, int(config["keep"])) if to == "mount" else []
        finally:
            os.close(base)
    except (BackupError, OSError) as exc:
        reason = str(exc) if isinstance(exc, BackupError) else f"{exc.strerror}: {exc.filename}"
        _record(config, {"at": _now(), "ok": False, "reason": reason, "to": to})
        raise BackupError(reason) from exc
    _record(config, {"at": manifest["created_at"], "ok": True, "backup_id": backup_id, "to": to})
    return {
        "backup_id": backup_id,
        "destination": "platform_mount" if to == "mount" else "staging",
        "path": f"{root}/{folder}/{backup_id}",
        "manifest": {key: value for key, value in manifest.items() if key != "scheduler_paused_s"},
        "scheduler_paused_s": manifest["scheduler_paused_s"],
        "pruned": pruned,
    }


def _age(at: str | None, now: float) -> int | None:
    if not at:
        return None
    moment = datetime.datetime.strptime(at, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC)
    return max(int(now - moment.timestamp()), 0)


def status(config: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    """The last backup's age and the last attempt's outcome; `overdue` when backups are
    scheduled and none succeeded for two intervals (counted from the schedule's start when
    none ever did)."""
    now = time.time() if now is None else now
    recorded = _recorded(Path(config["status_file"]))
    interval = config.get("interval_s")
    success = recorded.get("last_success")
    age = _age(success["at"], now) if success else None
    waited = age
    if waited is None and interval:
        with contextlib.suppress(OSError):
            waited = int(now - Path(config["timer_unit"]).stat().st_mtime)
    return {
        "scheduled": bool(interval),
        "interval_s": interval,
        "keep": config["keep"],
        "last_success": {**success, "age_s": age} if success else None,
        "last_attempt": recorded.get("last_attempt"),
        "overdue": bool(interval) and waited is not None and waited > 2 * interval,
    }


def _backup_id(text: str) -> str:
    if not BACKUP_ID.match(text):
        raise argparse.ArgumentTypeError("a backup id is YYYYMMDDTHHMMSSZ")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="backup", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    take_one = commands.add_parser("run", help="take a backup now")
    take_one.add_argument("--to", choices=["mount", "staging"], default="mount")
    take_one.add_argument("--id", type=_backup_id, help="the backup's name (default: now, UTC)")
    take_one.add_argument(
        "--without-metrics",
        action="store_true",
        help="leave Prometheus's history out (the upgrade's backup: a rollback keeps the history)",
    )
    commands.add_parser("status", help="the last backup's age and the last attempt's outcome")
    parser.add_argument("--config", default=CONFIG)
    args = parser.parse_args(argv)
    config = json.loads(Path(args.config).read_text(encoding="utf-8"))
    if args.command == "status":
        print(json.dumps(status(config)))
        return 0
    os.umask(0o077)
    # one backup at a time: the timer's and the operation's wait for each other
    with Path(LOCK).open("w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            print(json.dumps(run(config, args.to, args.id, not args.without_metrics)))
        except BackupError as exc:
            print(json.dumps({"error": str(exc)}))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
