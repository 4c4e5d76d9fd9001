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

from pathlib import Path  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.slurm_backup import Refused, choose, verify  # noqa: E402


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
        module.exit_json(
            changed=False,
            refusal=f"[backup_corrupt] {Path(str(exc.filename)).name}: {exc.strerror}",
        )
    module.exit_json(changed=False, backup_id=chosen.name, path=str(chosen), manifest=manifest)


if __name__ == "__main__":
    main()
