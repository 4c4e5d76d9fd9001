"""The backup format's rules on the control side: which of a cluster's backups to restore and
whether it is whole (slurm_backup_verify), and whether a controller's answer to `backup run` is
the format's and what the control plane files of it (slurm_backup_receive). One place for the
format's names (files/slurm_app_backup.py writes it on the controller, standalone)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any

try:
    import jsonschema
except ImportError:  # pragma: no cover - the driver's installation has it
    jsonschema = None

# A backup's name: the UTC second it began, so that names sort by age.
BACKUP_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z$")
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
# The manifest's fields, in the order the backup command writes them.
MANIFEST_FIELDS = (
    "format",
    "backup_id",
    "instance_id",
    "cluster_name",
    "slurm_version",
    "bundle_version",
    "created_at",
    "state_from",
    "accounting",
    "metrics",
    "files",
)
# The format's files (files/slurm_app_backup.py's take()); accounting.sql.gz only with
# accounting, metrics.tar only with Prometheus's history (the manifest's metrics).
FILES = ("state.tar.gz", "accounting.sql.gz", "munge.key", "records.tar.gz", "metrics.tar")
OPTIONAL_FILES = {"accounting.sql.gz": "accounting", "metrics.tar": "metrics"}
INSTANT = "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"
CHUNK = 1 << 20
# What slurm_app_backup.py prints is about 1.5 KiB (its pruned list, 18 bytes a backup, aside).
MAX_ANSWER = 1 << 20


class Refused(Exception):
    """A backup that must not be restored, or an answer or fetched file that is not admitted;
    the message starts with the error code."""


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _own_folder(path: Path) -> None:
    status = os.lstat(path)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o077:
        raise Refused(f"[backup_corrupt] folder {path.name}: must be its owner's alone, not a link")


def choose(folder: Path, trusted: Path, backup_id: str) -> Path:
    """The named backup's folder, or the newest complete one's."""
    if folder != trusted and trusted not in folder.parents:
        raise Refused("[backup_missing] the backups folder is not below its trusted folder")
    if not folder.is_dir():
        raise Refused("[backup_missing] no backup of this instance")
    for step in [folder, *folder.parents]:
        if step == trusted:
            break
        _own_folder(step)
    if backup_id:
        if not BACKUP_ID.match(backup_id) or not (folder / backup_id).is_dir():
            raise Refused(f"[backup_missing] no backup {backup_id}")
        return folder / backup_id
    backups = sorted(path.name for path in folder.iterdir() if BACKUP_ID.match(path.name))
    if not backups:
        raise Refused("[backup_missing] no backup of this instance")
    return folder / backups[-1]


def verify(chosen: Path, instance_id: str, cluster_name: str) -> dict[str, Any]:
    """The chosen backup's manifest, once its identity and every file's checksum hold."""
    _own_folder(chosen)
    try:
        if not stat.S_ISREG(os.lstat(chosen / MANIFEST).st_mode):
            raise Refused(f"[backup_corrupt] backup {chosen.name}: {MANIFEST}: not a regular file")
        manifest = json.loads((chosen / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Refused(
            f"[backup_corrupt] backup {chosen.name}: {MANIFEST}: not readable as JSON"
        ) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise Refused(
            f"[backup_corrupt] backup {chosen.name}: {MANIFEST}: not a format {MANIFEST_FORMAT} "
            "manifest"
        )
    for field, expected in (("instance_id", instance_id), ("cluster_name", cluster_name)):
        if manifest.get(field) != expected:
            raise Refused(
                f"[backup_mismatch] backup {chosen.name} is of {field} {manifest.get(field)!r}, "
                f"this cluster's is {expected!r}"
            )
    if manifest.get("backup_id") != chosen.name:
        raise Refused(
            f"[backup_corrupt] backup {chosen.name}: its manifest names "
            f"{manifest.get('backup_id')!r}"
        )
    listed = manifest.get("files")
    if not isinstance(listed, list) or not listed:
        raise Refused(f"[backup_corrupt] backup {chosen.name}: {MANIFEST}: lists no file")
    for entry in listed:
        name = str(entry.get("name", "")) if isinstance(entry, dict) else ""
        if not name or "/" in name or name.startswith("."):
            raise Refused(
                f"[backup_corrupt] backup {chosen.name}: {MANIFEST}: a file named {name!r}"
            )
        path = chosen / name
        try:
            status = os.lstat(path)
        except FileNotFoundError as exc:
            raise Refused(
                f"[backup_corrupt] backup {chosen.name}: {name}: listed in the manifest, missing"
            ) from exc
        if not stat.S_ISREG(status.st_mode):
            raise Refused(f"[backup_corrupt] backup {chosen.name}: {name}: not a regular file")
        if status.st_size != entry.get("bytes"):
            raise Refused(
                f"[backup_corrupt] backup {chosen.name}: {name}: {status.st_size} bytes, the "
                f"manifest says {entry.get('bytes')}"
            )
        if sha256(path) != entry.get("sha256"):
            raise Refused(
                f"[backup_corrupt] backup {chosen.name}: {name}: its sha256 is not the manifest's"
            )
    return manifest


def answer_schema(expected: dict[str, str], max_bytes: int) -> dict[str, Any]:
    """The one answer admitted: what slurm_app_backup.py prints for the control plane's id."""
    backup_id = {"const": expected["backup_id"]}
    return {
        "type": "object",
        "additionalProperties": False,
        "required": [
            "backup_id",
            "destination",
            "path",
            "manifest",
            "scheduler_paused_s",
            "pruned",
        ],
        "properties": {
            "backup_id": backup_id,
            "destination": {"const": expected["destination"]},
            "path": {"const": expected["path"]},
            "scheduler_paused_s": {"type": "number", "minimum": 0, "maximum": 86400},
            "pruned": {
                "type": "array",
                "maxItems": 1000,
                "items": {"type": "string", "pattern": BACKUP_ID.pattern},
            },
            "manifest": {
                "type": "object",
                "additionalProperties": False,
                "required": list(MANIFEST_FIELDS),
                "properties": {
                    "format": {"const": 1},
                    "backup_id": backup_id,
                    "instance_id": {"const": expected["instance_id"]},
                    "cluster_name": {"const": expected["cluster_name"]},
                    "slurm_version": {
                        "type": "string",
                        "pattern": "^([0-9]{1,3}[.][0-9]{1,3}[.][0-9]{1,3}|unknown)$",
                    },
                    "bundle_version": {
                        "type": "string",
                        "pattern": "^([0-9]{1,3}([.][0-9]{1,3}){1,2}|unknown)$",
                    },
                    "created_at": {"type": "string", "pattern": INSTANT},
                    "state_from": {"type": "string", "pattern": INSTANT},
                    "accounting": {"type": "boolean"},
                    "metrics": {
                        "type": ["object", "null"],
                        "additionalProperties": False,
                        "required": ["blocks", "wal_segments", "oldest_sample"],
                        "properties": {
                            "blocks": {"type": "integer", "minimum": 0, "maximum": 100000},
                            "wal_segments": {"type": "integer", "minimum": 0, "maximum": 100000},
                            "oldest_sample": {
                                "anyOf": [{"type": "null"}, {"type": "string", "pattern": INSTANT}]
                            },
                        },
                    },
                    "files": {
                        "type": "array",
                        "minItems": len(FILES) - len(OPTIONAL_FILES),
                        "maxItems": len(FILES),
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["name", "bytes", "sha256"],
                            "properties": {
                                "name": {"enum": list(FILES)},
                                "bytes": {"type": "integer", "minimum": 0, "maximum": max_bytes},
                                "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                            },
                            # munge's keys are 1 KiB by default (mungekey), 1 MiB at most
                            "if": {"properties": {"name": {"const": "munge.key"}}},
                            "then": {"properties": {"bytes": {"maximum": 1024**2}}},
                        },
                    },
                },
            },
        },
    }


def _field(path: Any) -> str:
    """A JSON path the way the result names fields: manifest.files[2].name."""
    named = ""
    for part in path:
        named += f"[{part}]" if isinstance(part, int) else f".{part}" if named else str(part)
    return named or "(the answer)"


def _tree_bytes(folder: Path) -> int:
    """The bytes of the regular files below folder, no link followed."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                info = os.lstat(Path(root) / name)
                total += info.st_size if stat.S_ISREG(info.st_mode) else 0
    return total


def _backups(folder: Path) -> list[str]:
    if not folder.is_dir():
        return []
    return sorted(path.name for path in folder.iterdir() if BACKUP_ID.match(path.name))


def admit(
    answer: str,
    expected: dict[str, str],
    folder: str,
    keep: int,
    max_count: int,
    max_bytes: int,
) -> dict[str, Any]:
    """The admitted answer, and the receiving folder made for its files."""
    if jsonschema is None:
        raise Refused("[backup_refused] jsonschema is not installed beside Ansible")
    if not BACKUP_ID.match(expected.get("backup_id", "")):
        raise Refused(
            f"[backup_refused] the control plane's backup id {expected.get('backup_id')!r}"
        )
    if len(answer) > MAX_ANSWER:
        raise Refused(f"[backup_refused] (the answer): longer than {MAX_ANSWER} characters")
    try:
        parsed = json.loads(answer)
    except ValueError as exc:
        raise Refused("[backup_refused] (the answer): not one JSON document") from exc
    validator = jsonschema.Draft202012Validator(answer_schema(expected, max_bytes))
    error = jsonschema.exceptions.best_match(validator.iter_errors(parsed))
    if error is not None:
        raise Refused(f"[backup_refused] {_field(error.absolute_path)}: {_expected(error)}")
    manifest = parsed["manifest"]
    names = [entry["name"] for entry in manifest["files"]]
    if len(set(names)) != len(names):
        raise Refused("[backup_refused] manifest.files: a file name is listed twice")
    wanted = [
        name for name in FILES if name not in OPTIONAL_FILES or manifest[OPTIONAL_FILES[name]]
    ]
    if sorted(names) != sorted(wanted):
        raise Refused(f"[backup_refused] manifest.files: must list exactly {', '.join(wanted)}")
    result: dict[str, Any] = {"answer": parsed, "manifest": manifest}
    if not folder:
        return result
    base = Path(folder)
    # the backups that stay beside the new one once it is filed (settle prunes the rest)
    room = max(min(keep, max_count), 1) - 1
    kept = _backups(base)[-room:] if room else []
    used = sum(_tree_bytes(base / name) for name in kept)
    claimed = sum(entry["bytes"] for entry in manifest["files"])
    if used + claimed > max_bytes:
        raise Refused(
            f"[backup_refused] manifest.files: {claimed} bytes claimed; this instance's share of "
            f"the backups folder is {max_bytes} bytes and the {len(kept)} backup(s) kept beside "
            f"it hold {used}"
        )
    receiving = _make_receiving(base, expected["backup_id"])
    result["receiving"] = str(receiving)
    return result


def _expected(error: Any) -> str:
    """What the grammar expected at the field, without echoing the host's value."""
    keyword, rule = error.validator, error.validator_value
    if keyword == "const":
        return f"must be {rule!r}"
    if keyword == "enum":
        return f"must be one of {', '.join(map(str, rule))}"
    if keyword == "pattern":
        return f"must match {rule}"
    if keyword in ("maximum", "minimum", "maxItems", "minItems"):
        return f"{keyword} {rule}"
    if keyword == "additionalProperties":
        return "holds a field the backup format does not have"
    if keyword == "required":
        return f"lacks a field (required: {', '.join(rule)})"
    if keyword == "type":
        return f"must be of type {rule}"
    return f"fails {keyword}"


def _make_receiving(base: Path, backup_id: str) -> Path:
    """<base>/<id>.partial, 0700, made new; stale .partial folders of earlier runs removed."""
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(base)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise Refused("[backup_refused] the instance's backups folder is not a folder of its own")
    base.chmod(0o700)
    for stale in base.glob("*.partial"):
        shutil.rmtree(stale)
    if (base / backup_id).exists():
        raise Refused(f"[backup_refused] backup_id: {backup_id} was received already")
    receiving = base / f"{backup_id}.partial"
    receiving.mkdir(mode=0o700)
    return receiving


def settle(folder: str, manifest: dict[str, Any], keep: int, max_count: int) -> list[str]:
    """Prove the fetched files the admitted ones, write the manifest, file the backup, prune."""
    base = Path(folder)
    backup_id = manifest["backup_id"]
    if not BACKUP_ID.match(backup_id):
        raise Refused("[backup_refused] manifest.backup_id: not a backup id")
    receiving = base / f"{backup_id}.partial"
    try:
        listed = {entry["name"]: entry for entry in manifest["files"]}
        present = sorted(path.name for path in receiving.iterdir())
        if present != sorted(listed):
            raise Refused(
                f"[backup_refused] manifest.files: fetched {present}, admitted {sorted(listed)}"
            )
        for index, entry in enumerate(manifest["files"]):
            path = receiving / entry["name"]
            info = os.lstat(path)
            if not stat.S_ISREG(info.st_mode):
                raise Refused(f"[backup_refused] manifest.files[{index}].name: not a regular file")
            if info.st_size != entry["bytes"]:
                raise Refused(
                    f"[backup_refused] manifest.files[{index}].bytes: {entry['name']} arrived with "
                    f"{info.st_size} bytes"
                )
            if sha256(path) != entry["sha256"]:
                raise Refused(
                    f"[backup_refused] manifest.files[{index}].sha256: {entry['name']} arrived "
                    "with another checksum"
                )
            path.chmod(0o600)
        descriptor = os.open(receiving / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as written:
            written.write(json.dumps(manifest, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(receiving, ignore_errors=True)
        raise
    receiving.rename(base / backup_id)
    backups = _backups(base)
    doomed = backups[: max(len(backups) - max(min(keep, max_count), 1), 0)]
    for name in doomed:
        shutil.rmtree(base / name)
    return doomed
