#!/usr/bin/python3
"""Ansible module: Prometheus's history from a controller backup put back into its storage."""

from __future__ import annotations

DOCUMENTATION = r"""
module: monitoring_tsdb_restore
short_description: Put a backup's Prometheus blocks and write-ahead log into Prometheus's storage
description:
  - replace_controller's step for Prometheus's history. O(archive) is the backup's
    C(metrics.tar), which slurm_controller's backup command writes. It holds Prometheus's
    persisted blocks (one folder per block, named by its ULID) and its write-ahead log
    (C(wal/)), from which Prometheus rebuilds the last hours as after a crash.
  - Prometheus must be stopped. Each member is checked before anything is written (only
    folders and regular files, each name a block's or the log's, no C(..) and no link); an
    archive that breaks the rule fails naming the member and changes nothing.
  - The members are written into a fresh folder beside O(data_dir), given to O(owner), then
    moved in. A block already there stays as it is; the log replaces the one there (what a
    Prometheus started before the restore wrote) and its memory-mapped head chunks, which the
    log replaces.
  - O(marker) then names O(archive); a run that finds it naming the same archive changes
    nothing, so that what Prometheus scraped since is never overwritten by a run sent again.
  - Supports check mode (checks the archive, writes nothing).
options:
  archive:
    description: The backup's metrics.tar.
    type: path
    required: true
  data_dir:
    description: Prometheus's storage (C(--storage.tsdb.path)).
    type: path
    required: true
  owner:
    description: The user Prometheus runs as; the files are given to it and its group.
    type: str
    required: true
  marker:
    description: The file that records which archive was put back.
    type: path
    required: true
"""

EXAMPLES = r"""
- name: Put back the backup's Prometheus history
  monitoring_tsdb_restore:
    archive: /var/lib/slurm-app-restore/20261201T030000Z/metrics.tar
    data_dir: /var/lib/prometheus/metrics2
    owner: prometheus
    marker: /var/lib/slurm-app/restored-metrics
"""

RETURN = r"""
blocks:
  description: The blocks the archive holds.
  type: int
  returned: always
wal_segments:
  description: The files of the write-ahead log it holds.
  type: int
  returned: always
"""

import contextlib  # noqa: E402
import os  # noqa: E402
import pwd  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import tarfile  # noqa: E402
from pathlib import Path, PurePosixPath  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

# A persisted block's folder (its ULID) or the write-ahead log; below them Prometheus's own
# names (meta.json, index, tombstones, chunks/000001, 00000012, checkpoint.00000011/00000000).
BLOCK = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
WAL = "wal"
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$")
MAX_DEPTH = 3
CHUNK = 1 << 20
STAGING = ".slurm-app-restore"


class Refused(Exception):
    """A member the archive must not hold; the message names it."""


def check_member(member: tarfile.TarInfo) -> PurePosixPath:
    """The member's path, once it is a block's or the log's folder or regular file."""
    path = PurePosixPath(member.name)
    parts = path.parts
    if (
        not parts
        or len(parts) > MAX_DEPTH
        or path.is_absolute()
        or not all(NAME.match(part) for part in parts)
        or not (BLOCK.match(parts[0]) or parts[0] == WAL)
    ):
        raise Refused(f"metrics.tar: {member.name!r} is not a Prometheus block's or log's path")
    if not (member.isdir() or member.isreg()):
        raise Refused(f"metrics.tar: {member.name!r} is neither a folder nor a regular file")
    return path


def contents(members: list[tuple[PurePosixPath, tarfile.TarInfo]]) -> tuple[list[str], int]:
    """The blocks' names and the log's file count."""
    blocks = sorted({path.parts[0] for path, _ in members if BLOCK.match(path.parts[0])})
    segments = sum(1 for path, member in members if path.parts[0] == WAL and member.isreg())
    return blocks, segments


def unpack(
    tar: tarfile.TarFile,
    members: list[tuple[PurePosixPath, tarfile.TarInfo]],
    staging: Path,
    uid: int,
    gid: int,
) -> None:
    """Every (checked) member written below `staging`, made new, and given uid:gid."""
    staging.mkdir(0o755)
    for path, member in members:
        target = staging.joinpath(*path.parts)
        if member.isdir():
            target.mkdir(0o755, exist_ok=True)
            continue
        target.parent.mkdir(0o755, parents=True, exist_ok=True)
        source = tar.extractfile(member)
        assert source is not None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with source, os.fdopen(os.open(target, flags, 0o644), "wb") as sink:
            shutil.copyfileobj(source, sink, CHUNK)
    for root, folders, files in os.walk(staging):
        for name in [".", *folders, *files]:
            os.lchown(Path(root, name), uid, gid)


def move_in(staging: Path, data_dir: Path, blocks: list[str]) -> None:
    """The blocks not there yet, and the log in place of the one there."""
    for block in blocks:
        if not (data_dir / block).exists():
            (staging / block).rename(data_dir / block)
    if (staging / WAL).is_dir():
        for stale in (WAL, "chunks_head"):
            shutil.rmtree(data_dir / stale, ignore_errors=True)
        (staging / WAL).rename(data_dir / WAL)
    shutil.rmtree(staging)


def restore(
    archive: str, data_dir: Path, uid: int, gid: int, marker: Path, check: bool
) -> dict[str, Any]:
    """The archive's blocks and log put in place unless the marker names it already; what
    changed. Raises Refused (changing nothing) for a member the archive must not hold."""
    with contextlib.suppress(FileNotFoundError):
        if marker.read_text(encoding="utf-8").strip() == archive:
            return {"changed": False, "blocks": 0, "wal_segments": 0}
    with tarfile.open(archive, mode="r:") as tar:
        members = [(check_member(member), member) for member in tar.getmembers()]
        blocks, segments = contents(members)
        if check:
            return {"changed": True, "blocks": len(blocks), "wal_segments": segments}
        # Prometheus makes its storage as it first starts, which comes after this
        if not data_dir.is_dir():
            data_dir.mkdir(0o755, parents=True)
            os.chown(data_dir, uid, gid)
        staging = data_dir / STAGING
        # what a run killed in the middle left
        shutil.rmtree(staging, ignore_errors=True)
        unpack(tar, members, staging, uid, gid)
    move_in(staging, data_dir, blocks)
    written = marker.with_name(f"{marker.name}.new")
    written.write_text(archive + "\n", encoding="utf-8")
    written.replace(marker)
    return {"changed": True, "blocks": len(blocks), "wal_segments": segments}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "archive": {"type": "path", "required": True},
            "data_dir": {"type": "path", "required": True},
            "owner": {"type": "str", "required": True},
            "marker": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        user = pwd.getpwnam(params["owner"])
        done = restore(
            params["archive"],
            Path(params["data_dir"]),
            user.pw_uid,
            user.pw_gid,
            Path(params["marker"]),
            module.check_mode,
        )
    except (Refused, tarfile.TarError, KeyError, OSError) as exc:
        module.fail_json(msg=f"[backup_corrupt] {exc}")
    module.exit_json(**done)


if __name__ == "__main__":
    main()
