#!/usr/bin/python3
"""Ansible module: the cluster's accounting entities, made to match, through sacctmgr."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_sacctmgr
short_description: Make a Slurm cluster's QoS, accounts, users and admin levels match a description
description:
  - Reads the cluster, QoS, accounts, associations, default accounts and admin levels from
    slurmdbd with C(sacctmgr -n -P show), then adds what is missing and corrects what differs.
  - The accounts it is given are described whole - their fair share, their QoS and their
    users. A user of I(users) associated with one of them but no longer listed there is taken
    out of it (sacctmgr refuses while the user has jobs under it). Accounts, users and QoS it
    was not told about are never touched, so records created by hand stay.
  - Supports check mode (reports the sacctmgr commands it would run) and diff mode.
options:
  cluster:
    description: The cluster's name (ClusterName in slurm.conf).
    type: str
    required: true
  create_cluster:
    description:
      - Add the cluster when slurmdbd does not know it. Off by default, because slurmctld
        registers its cluster on its first start with accounting on.
    type: bool
    default: false
  qos:
    description:
      - QoS that must exist with these limits. A limit left out is cleared (-1).
    type: list
    elements: dict
    default: []
    suboptions:
      name: {type: str, required: true, description: QoS name.}
      priority: {type: int, default: 0, description: Priority (multifactor's QoS factor).}
      max_gpus_per_user:
        type: int
        description: GPUs one user's running jobs may hold together (MaxTRESPerUser gres/gpu).
      max_gpus:
        type: int
        description: GPUs all the QoS's running jobs may hold together (GrpTRES gres/gpu).
      max_jobs_per_user: {type: int, description: Running jobs per user (MaxJobsPerUser).}
      max_wall:
        type: str
        description: Longest time limit of a job (MaxWall), as a Slurm time.
  accounts:
    description: Accounts that must exist in the cluster, each described whole.
    type: list
    elements: dict
    default: []
    suboptions:
      name: {type: str, required: true, description: Account name.}
      description: {type: str, default: "", description: Description; empty means the name.}
      organization: {type: str, default: "", description: Organization; empty means the name.}
      fairshare: {type: int, default: 1, description: The account's share (Fairshare).}
      qos:
        type: list
        elements: str
        default: []
        description: The QoS its jobs may ask for; empty means normal.
      default_qos:
        type: str
        default: ""
        description: The QoS of a job that names none; empty means the first of I(qos).
      users:
        type: list
        elements: str
        default: []
        description:
          - The users of I(users) associated with it; a user in none gets I(default_account).
  default_account:
    description: The account of users that no account lists.
    type: str
    default: ""
  users:
    description:
      - Users that must be associated with the cluster. Each is a dict with C(name) and
        optionally C(admin_level) (None, Operator, Administrator) or C(admin) (true =
        Administrator). Other keys are ignored, so the cluster's user list (with uid, gid)
        can be passed as it is. A user's default account is the first account listing it.
    type: list
    elements: dict
    default: []
"""

EXAMPLES = r"""
- name: Make the QoS, accounts, users and admin levels match
  slurm_sacctmgr:
    cluster: research
    qos:
      - name: gpu-small
        priority: 10
        max_gpus_per_user: 2
        max_wall: "1-00:00:00"
    accounts:
      - name: physics
        fairshare: 2
        qos: [gpu-small]
        users: [alice, bob]
    default_account: physics
    users:
      - name: alice
        admin_level: Operator
      - name: bob

- name: Show what would change, changing nothing
  slurm_sacctmgr:
    cluster: research
    accounts: [{name: physics, users: [alice]}]
  check_mode: true
  diff: true
"""

RETURN = r"""
commands:
  description: The sacctmgr command lines run (in check mode, the ones that would run).
  type: list
  returned: always
"""

from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible.module_utils.slurm_accounting import (  # noqa: E402
    SACCTMGR,
    plan,
    qos_row,
    reference_problems,
    slurm_minutes,
    wanted_accounts,
    wanted_users,
)


def _rows(module: AnsibleModule, *args: str) -> list[list[str]]:
    rc, out, err = module.run_command([SACCTMGR, "-n", "-P", "show", *args])
    if rc != 0:
        module.fail_json(msg=f"sacctmgr show {args[0]} failed: {err.strip() or out.strip()}")
    return [line.split("|") for line in out.splitlines() if line.strip()]


def current_state(module: AnsibleModule, cluster: str) -> dict[str, Any]:
    """What slurmdbd holds that this module manages."""
    clusters = {row[0] for row in _rows(module, "cluster", "format=cluster")}
    qos = {
        row[0]: qos_row(row)
        for row in _rows(module, "qos", "format=name,priority,maxtrespu,grptres,maxjobspu,maxwall")
    }
    accounts = {row[0] for row in _rows(module, "account", "format=account")}
    rows = _rows(
        module,
        "association",
        "where",
        f"cluster={cluster}",
        "format=account,user,partition,fairshare,qos,defaultqos",
    )
    settings = {
        row[0]: {
            "fairshare": int(row[3]) if row[3].isdigit() else None,
            "qos": sorted(q for q in row[4].split(",") if q),
            "default_qos": row[5],
        }
        for row in rows
        if not row[1] and not row[2]
    }
    users = _rows(module, "user", "format=user,defaultaccount,adminlevel")
    return {
        "cluster": cluster in clusters,
        "qos": qos,
        "accounts": sorted(accounts),
        "account_settings": settings,
        "associations": sorted({f"{row[1]}@{row[0]}" for row in rows if row[1]}),
        "default_accounts": {row[0]: row[1] for row in users},
        "admin_levels": {row[0]: row[2] for row in users},
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "cluster": {"type": "str", "required": True},
            "create_cluster": {"type": "bool", "default": False},
            "qos": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "priority": {"type": "int", "default": 0},
                    "max_gpus_per_user": {"type": "int"},
                    "max_gpus": {"type": "int"},
                    "max_jobs_per_user": {"type": "int"},
                    "max_wall": {"type": "str"},
                },
            },
            "accounts": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "description": {"type": "str", "default": ""},
                    "organization": {"type": "str", "default": ""},
                    "fairshare": {"type": "int", "default": 1},
                    "qos": {"type": "list", "elements": "str", "default": []},
                    "default_qos": {"type": "str", "default": ""},
                    "users": {"type": "list", "elements": "str", "default": []},
                },
            },
            "default_account": {"type": "str", "default": ""},
            "users": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    params = module.params
    problems = reference_problems(params["users"], params["accounts"], params["qos"])
    if problems:
        module.fail_json(
            msg="; ".join(f"{'.'.join(map(str, path))}: {message}" for path, message in problems)
        )
    try:
        users = wanted_users(params["users"], params["default_account"], params["accounts"])
        accounts = wanted_accounts(params["accounts"], params["default_account"])
        for qos in params["qos"]:
            if qos.get("max_wall"):
                slurm_minutes(qos["max_wall"])
    except ValueError as error:
        module.fail_json(msg=str(error))
    before = current_state(module, params["cluster"])
    if not before["cluster"] and not params["create_cluster"]:
        module.fail_json(
            msg=f"slurmdbd has no cluster {params['cluster']!r}: slurmctld registers it "
            "on its first start with accounting on (or set create_cluster)"
        )
    commands, after = plan(before, {**params, "users": users, "accounts": accounts})
    if not module.check_mode:
        for command in commands:
            rc, out, err = module.run_command(command)
            if rc != 0:
                module.fail_json(
                    msg=f"{' '.join(command[2:4])} failed: {err.strip() or out.strip()}",
                    commands=[" ".join(c) for c in commands],
                )
    module.exit_json(
        changed=bool(commands),
        commands=[" ".join(c) for c in commands],
        diff={"before": before, "after": after},
    )


if __name__ == "__main__":
    main()
