#!/usr/bin/python3
"""Ansible module: find a backup of the cluster and prove it whole and this cluster's."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_backup_verify
short_description: Find one of a cluster's backups and check its manifest before a restore
description:
  - Looks in I(folder) (the instance's backups, as files/slurm_app_backup.py writes them) for
    the backup named I(backup_id), or the newest complete one; a half-written C(.partial) one
    is never chosen.
  - Checks that its manifest names this instance and cluster, and that every file it lists is
    there, a regular file, of the size and sha256 the manifest says.
  - >-
    A backup that must not be restored is not an error of the module: it returns I(refusal),
    a message that starts with the driver's error code ([backup_mismatch], [backup_corrupt],
    [backup_missing]) and names what differs, for a C(fail) task to report (the driver takes
    a code only from a fail or assert task). Reads only; check mode runs it too.
  - >-
    I(trusted) names the folder the backups' folders must be below: every folder from there
    down must be a folder (not a link) of the user the module runs as (root on a host, the
    driver's user on the control plane), 0700, because a cluster user who can write the platform's
    mount could otherwise plant a backup, and a munge key, of their own.
options:
  folder:
    description: The folder holding the instance's backups (one sub-folder per backup).
    type: path
    required: true
  trusted:
    description: The folder above I(folder); every folder below it must be the module user's, 0700.
    type: path
    required: true
  backup_id:
    description: The backup to restore (its folder's name); empty for the newest.
    type: str
    default: ""
  instance_id:
    description: The instance the backup must be of.
    type: str
    required: true
  cluster_name:
    description: The Slurm cluster name the backup must be of.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Find the newest backup of this cluster on the platform's mount and check it
  slurm_backup_verify:
    folder: /workspace/slurm-app-backups/5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01
    trusted: /workspace
    instance_id: 5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01
    cluster_name: research
  register: found

- name: Refuse a backup that must not be restored
  ansible.builtin.fail:
    msg: "{{ found.refusal }}"
  when: found.refusal | length > 0
"""

RETURN = r"""
refusal:
  description: Why the backup must not be restored, starting with the error code.
  type: str
  returned: when refused
backup_id:
  description: The backup chosen.
  type: str
  returned: success
path:
  description: Its folder.
  type: str
  returned: success
manifest:
  description: Its manifest, as files/slurm_app_backup.py wrote it.
  type: dict
  returned: success
"""

import hashlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import stat  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

BACKUP_ID = re.compile(r"^[0-9]{8}T[0-9]{6}Z$")
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1
CHUNK = 1 << 20


class Refused(Exception):
    """A backup that must not be restored; the message starts with the error code."""


def _own_folder(path: Path) -> None:
    status = os.lstat(path)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o077:
        raise Refused(f"[backup_corrupt] {path}: must be a folder of its owner alone, not a link")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def choose(folder: Path, trusted: Path, backup_id: str) -> Path:
    """The named backup's folder, or the newest complete one's."""
    if folder != trusted and trusted not in folder.parents:
        raise Refused(f"[backup_missing] {folder} is not below {trusted}")
    if not folder.is_dir():
        raise Refused(f"[backup_missing] no backup of this instance in {folder}")
    for step in [folder, *folder.parents]:
        if step == trusted:
            break
        _own_folder(step)
    if backup_id:
        if not BACKUP_ID.match(backup_id) or not (folder / backup_id).is_dir():
            raise Refused(f"[backup_missing] no backup {backup_id} in {folder}")
        return folder / backup_id
    backups = sorted(path.name for path in folder.iterdir() if BACKUP_ID.match(path.name))
    if not backups:
        raise Refused(f"[backup_missing] no backup of this instance in {folder}")
    return folder / backups[-1]


def verify(chosen: Path, instance_id: str, cluster_name: str) -> dict[str, Any]:
    """The chosen backup's manifest, once its identity and every file's checksum hold."""
    _own_folder(chosen)
    try:
        if not stat.S_ISREG(os.lstat(chosen / MANIFEST).st_mode):
            raise Refused(f"[backup_corrupt] {chosen / MANIFEST}: not a regular file")
        manifest = json.loads((chosen / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise Refused(f"[backup_corrupt] {chosen / MANIFEST}: not readable as JSON") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise Refused(
            f"[backup_corrupt] {chosen / MANIFEST}: not a format {MANIFEST_FORMAT} manifest"
        )
    for field, expected in (("instance_id", instance_id), ("cluster_name", cluster_name)):
        if manifest.get(field) != expected:
            raise Refused(
                f"[backup_mismatch] backup {chosen.name} is of {field} {manifest.get(field)!r}, "
                f"this cluster's is {expected!r}"
            )
    if manifest.get("backup_id") != chosen.name:
        raise Refused(
            f"[backup_corrupt] {chosen}: its manifest names {manifest.get('backup_id')!r}"
        )
    listed = manifest.get("files")
    if not isinstance(listed, list) or not listed:
        raise Refused(f"[backup_corrupt] {chosen / MANIFEST}: lists no file")
    for entry in listed:
        name = str(entry.get("name", "")) if isinstance(entry, dict) else ""
        if not name or "/" in name or name.startswith("."):
            raise Refused(f"[backup_corrupt] {chosen / MANIFEST}: a file named {name!r}")
        path = chosen / name
        try:
            status = os.lstat(path)
        except FileNotFoundError as exc:
            raise Refused(f"[backup_corrupt] {path}: listed in the manifest, missing") from exc
        if not stat.S_ISREG(status.st_mode):
            raise Refused(f"[backup_corrupt] {path}: not a regular file")
        if status.st_size != entry.get("bytes"):
            raise Refused(
                f"[backup_corrupt] {path}: {status.st_size} bytes, the manifest says "
                f"{entry.get('bytes')}"
            )
        if _sha256(path) != entry.get("sha256"):
            raise Refused(f"[backup_corrupt] {path}: its sha256 is not the manifest's")
    return manifest


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "folder": {"type": "path", "required": True},
            "trusted": {"type": "path", "required": True},
            "backup_id": {"type": "str", "default": ""},
            "instance_id": {"type": "str", "required": True},
            "cluster_name": {"type": "str", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        chosen = choose(Path(params["folder"]), Path(params["trusted"]), params["backup_id"])
        manifest = verify(chosen, params["instance_id"], params["cluster_name"])
    except Refused as exc:
        module.exit_json(changed=False, refusal=str(exc))
    except OSError as exc:
        module.exit_json(changed=False, refusal=f"[backup_corrupt] {exc.filename}: {exc.strerror}")
    module.exit_json(changed=False, backup_id=chosen.name, path=str(chosen), manifest=manifest)


if __name__ == "__main__":
    main()
