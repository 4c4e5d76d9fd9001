#!/usr/bin/python3
"""Ansible module: judge a controller's answer to `backup run` on the control plane, and file
the files fetched after it under names the control plane made."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_backup_receive
short_description: Admit a controller's backup answer, then file the fetched backup
description:
  - Runs on the machine running Ansible (delegate_to localhost). The customer is root on the
    controller, so every byte of its answer is theirs - the backup's id, file names, sizes and
    counts included. Nothing in the answer chooses a path, a name, a size or a count here.
  - "I(step=admit): the answer must be exactly what files/slurm_app_backup.py prints for the id
    the control plane made (I(expected)): one JSON object, its fields of a strict grammar
    (file names from the backup format's four, sha256 in hex, sizes and times in range), and
    the sizes it claims must fit this instance's share of the backups folder (I(max_bytes),
    counting the backups that stay) beside I(keep)/I(max_count) backups. With I(folder) set,
    the receiving folder <folder>/<id>.partial is made (0700) once the answer is admitted."
  - "I(step=settle): every fetched file must be a regular file of the admitted size and sha256;
    the manifest is written from the admitted answer (never fetched), the folder renamed to
    <folder>/<id>, and all but the newest min(keep, max_count) backups removed."
  - A refusal is not an error of the module; it returns I(refusal), starting with
    [backup_refused] and naming the answer's field, for a fail task to report. A refused
    admit writes nothing; a refused settle removes the receiving folder.
options:
  step:
    description: admit (the answer) or settle (the fetched files).
    type: str
    choices: [admit, settle]
    required: true
  answer:
    description: The controller's stdout (admit).
    type: str
    default: ""
  manifest:
    description: The manifest admit returned (settle).
    type: dict
    default: {}
  expected:
    description: >-
      What the answer must say (admit): backup_id, destination (staging or platform_mount),
      path, instance_id, cluster_name.
    type: dict
    default: {}
  folder:
    description: The instance's backups folder on this machine; empty for a backup on the mount.
    type: str
    default: ""
  keep:
    description: How many backups the instance keeps.
    type: int
    default: 7
  max_count:
    description: The most backups one instance may keep in I(folder), whatever I(keep) says.
    type: int
    default: 10
  max_bytes:
    description: >-
      The most bytes one instance's backups may fill in I(folder), the new one's included.
    type: int
    default: 21474836480
"""

EXAMPLES = r"""
- name: Admit the controller's answer
  slurm_backup_receive:
    step: admit
    answer: "{{ taken.stdout }}"
    expected:
      backup_id: 20261203T120000Z
      destination: staging
      path: /var/lib/slurm-app-backup/20261203T120000Z
      instance_id: 5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01
      cluster_name: research
    folder: /var/lib/slurm-app-driver/backups/5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01
  delegate_to: localhost
  register: admitted
"""

RETURN = r"""
refusal:
  description: Why the answer or the fetched files were refused, starting with the error code.
  type: str
  returned: when refused
manifest:
  description: The admitted manifest (admit).
  type: dict
  returned: success
answer:
  description: The admitted answer, its manifest included (admit).
  type: dict
  returned: success
receiving:
  description: The folder the files are fetched into (admit with a folder).
  type: str
  returned: success
pruned:
  description: The backups removed to keep the newest (settle).
  type: list
  returned: success
"""


from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.slurm_backup import Refused, admit, settle  # noqa: E402


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "step": {"type": "str", "choices": ["admit", "settle"], "required": True},
            "answer": {"type": "str", "default": ""},
            "manifest": {"type": "dict", "default": {}},
            "expected": {"type": "dict", "default": {}},
            "folder": {"type": "str", "default": ""},
            "keep": {"type": "int", "default": 7},
            "max_count": {"type": "int", "default": 10},
            "max_bytes": {"type": "int", "default": 20 * 1024**3},
        },
    )
    params = module.params
    try:
        if params["step"] == "admit":
            admitted = admit(
                params["answer"],
                params["expected"],
                params["folder"],
                params["keep"],
                params["max_count"],
                params["max_bytes"],
            )
            module.exit_json(changed="receiving" in admitted, **admitted)
        pruned = settle(params["folder"], params["manifest"], params["keep"], params["max_count"])
        module.exit_json(changed=True, pruned=pruned)
    except Refused as exc:
        module.exit_json(changed=False, refusal=str(exc))
    except OSError as exc:
        module.exit_json(changed=False, refusal=f"[backup_refused] {exc.strerror}")


if __name__ == "__main__":
    main()
