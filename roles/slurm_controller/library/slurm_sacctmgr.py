#!/usr/bin/python3
"""Ansible module: the cluster's accounting entities, made to match, through sacctmgr."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_sacctmgr
short_description: Make a Slurm cluster's accounts, users and admin levels match a description
description:
  - Reads the cluster, accounts, associations and admin levels from slurmdbd with
    C(sacctmgr -n -P show), then adds what is missing and corrects admin levels.
  - Never removes an account, a user or an association it was not told about: records
    created by hand stay.
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
  accounts:
    description: Accounts that must exist in the cluster.
    type: list
    elements: dict
    default: []
    suboptions:
      name: {type: str, required: true, description: Account name.}
      description: {type: str, default: "", description: Description; empty means the name.}
      organization: {type: str, default: "", description: Organization; empty means the name.}
  default_account:
    description: The account of users that name none.
    type: str
    default: ""
  users:
    description:
      - Users that must be associated with an account of the cluster. Each is a dict with
        C(name), optionally C(account) (default I(default_account)) and C(admin_level)
        (None, Operator, Administrator) or C(admin) (true = Administrator). Other keys are
        ignored, so the cluster's user list (with uid, gid) can be passed as it is.
    type: list
    elements: dict
    default: []
"""

RETURN = r"""
commands:
  description: The sacctmgr command lines run (in check mode, the ones that would run).
  type: list
  returned: always
"""

from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

SACCTMGR = "sacctmgr"
ADMIN_LEVELS = ("None", "Operator", "Administrator")


def _rows(module: AnsibleModule, *args: str) -> list[list[str]]:
    rc, out, err = module.run_command([SACCTMGR, "-n", "-P", "show", *args])
    if rc != 0:
        module.fail_json(msg=f"sacctmgr show {args[0]} failed: {err.strip() or out.strip()}")
    return [line.split("|") for line in out.splitlines() if line.strip()]


def current_state(module: AnsibleModule, cluster: str) -> dict[str, Any]:
    """What slurmdbd holds that this module manages."""
    clusters = {row[0] for row in _rows(module, "cluster", "format=cluster")}
    accounts = {
        row[0]: {"description": row[1], "organization": row[2]}
        for row in _rows(module, "account", "format=account,descr,org")
    }
    associations = sorted(
        f"{row[1]}@{row[0]}"
        for row in _rows(
            module, "association", "where", f"cluster={cluster}", "format=account,user"
        )
        if len(row) > 1 and row[1]
    )
    admin_levels = {row[0]: row[1] for row in _rows(module, "user", "format=user,adminlevel")}
    return {
        "cluster": cluster in clusters,
        "accounts": sorted(name for name in accounts),
        "associations": associations,
        "admin_levels": admin_levels,
    }


def wanted_users(users: list[dict[str, Any]], default_account: str) -> list[dict[str, str]]:
    """users[i] as {name, account, admin_level}, or a ValueError naming the entry."""
    wanted = []
    for index, user in enumerate(users):
        name = user.get("name")
        account = user.get("account") or default_account
        level = user.get("admin_level") or ("Administrator" if user.get("admin") else "None")
        if not isinstance(name, str) or not name:
            raise ValueError(f"users[{index}].name: expected a login name")
        if not account:
            raise ValueError(f"users[{index}] ({name}): no account and no default_account")
        if level not in ADMIN_LEVELS:
            raise ValueError(f"users[{index}].admin_level: expected one of {ADMIN_LEVELS}")
        wanted.append({"name": name, "account": account, "admin_level": level})
    return wanted


def plan(state: dict[str, Any], params: dict[str, Any]) -> tuple[list[list[str]], dict[str, Any]]:
    """The sacctmgr commands that make `state` match `params`, and the state after them."""
    cluster = params["cluster"]
    commands: list[list[str]] = []
    after = {
        "cluster": state["cluster"],
        "accounts": list(state["accounts"]),
        "associations": list(state["associations"]),
        "admin_levels": dict(state["admin_levels"]),
    }
    if not state["cluster"] and params["create_cluster"]:
        commands.append([SACCTMGR, "-i", "add", "cluster", cluster])
        after["cluster"] = True
    for account in params["accounts"]:
        if account["name"] in after["accounts"]:
            continue
        commands.append(
            [
                SACCTMGR,
                "-i",
                "add",
                "account",
                account["name"],
                f"Cluster={cluster}",
                f"Description={account['description'] or account['name']}",
                f"Organization={account['organization'] or account['name']}",
            ]
        )
        after["accounts"].append(account["name"])
    for user in params["users"]:
        association = f"{user['name']}@{user['account']}"
        if association not in after["associations"]:
            commands.append(
                [
                    SACCTMGR,
                    "-i",
                    "add",
                    "user",
                    user["name"],
                    f"Account={user['account']}",
                    f"Cluster={cluster}",
                ]
            )
            after["associations"].append(association)
            after["admin_levels"].setdefault(user["name"], "None")
        if after["admin_levels"].get(user["name"]) != user["admin_level"]:
            commands.append(
                [
                    SACCTMGR,
                    "-i",
                    "modify",
                    "user",
                    "where",
                    f"name={user['name']}",
                    "set",
                    f"AdminLevel={user['admin_level']}",
                ]
            )
            after["admin_levels"][user["name"]] = user["admin_level"]
    after["accounts"].sort()
    after["associations"].sort()
    return commands, after


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "cluster": {"type": "str", "required": True},
            "create_cluster": {"type": "bool", "default": False},
            "accounts": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "description": {"type": "str", "default": ""},
                    "organization": {"type": "str", "default": ""},
                },
            },
            "default_account": {"type": "str", "default": ""},
            "users": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    try:
        users = wanted_users(module.params["users"], module.params["default_account"])
    except ValueError as error:
        module.fail_json(msg=str(error))
    before = current_state(module, module.params["cluster"])
    if not before["cluster"] and not module.params["create_cluster"]:
        module.fail_json(
            msg=f"slurmdbd has no cluster {module.params['cluster']!r}: slurmctld registers it "
            "on its first start with accounting on (or set create_cluster)"
        )
    commands, after = plan(before, {**module.params, "users": users})
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
