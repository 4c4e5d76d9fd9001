"""Action plugin for slurm_accounts: the cluster users' accounts on a member in one host-step.

`checked` reads what the host has (slurm_read), looks where the homes go (slurm_folder, in check
mode) and refuses what would take over the host's own accounts or move a home. `present` makes
its files first (slurm_files: the record of the accounts, before they are made), then the
groups (ansible.builtin.group), the users (ansible.builtin.user) and the homes (slurm_folder).
Each was its own looped task, and every task costs the control side a step on every member;
here each module keeps its own idempotence and check mode, run from one step.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase
from ansible.plugins.loader import filter_loader


def _storage_conflict(refused: list[dict], host: str) -> str:
    """slurm_common's one [storage_conflict] message, which folder_refusal.yml gives too."""
    return filter_loader.get("slurm_storage_conflict").j2_function(refused, host)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _module(self, name: str, args: dict[str, Any], task_vars: dict | None) -> dict:
        return self._execute_module(module_name=name, module_args=args, task_vars=task_vars)

    def _homes_of(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Each user's home as slurm_folder takes it: slurm_common's filter user_folders, less
        its first entry (the homes' folder itself, which this step does not make)."""
        user_folders = filter_loader.get("user_folders").j2_function
        folders = user_folders(params["users"], params["home_base"])
        return [{"root": params["home_root"], **folder} for folder in folders[1:]]

    def _homes(
        self, params: dict[str, Any], task_vars: dict | None, look_only: bool
    ) -> tuple[list[dict], bool]:
        """slurm_folder over every home: its refusals, and whether it changed one. `look_only`:
        nothing changed whatever the run's mode (the guard)."""
        refused: list[dict] = []
        changed = False
        for user, home in zip(params["users"], self._homes_of(params), strict=True):
            kept = self._module("slurm_folder", home | {"look_only": look_only}, task_vars)
            if kept.get("refusal"):
                refused.append(kept)
            elif kept.get("failed"):
                raise _Failed(f"home of {user['name']}: {kept.get('msg')}")
            changed = changed or bool(kept.get("changed"))
        return refused, changed

    def _checked(self, params: dict[str, Any], host: str, task_vars: dict | None) -> dict:
        names = [user["name"] for user in params["users"]]
        commands: dict[str, list[str]] = {"record": ["cat", params["record"]]}
        # getent exits 2 where some names are not there (a new member); with no cluster users
        # it is not asked (it would list every account)
        if names:
            commands |= {kind: ["getent", kind, *names] for kind in ("passwd", "group")}
        read = self._module("slurm_read", {"commands": commands}, task_vars)
        if read.get("failed"):
            raise _Failed(f"reading the host's accounts: {read.get('msg')}")
        ran = read["commands"]
        for name in ("passwd", "group"):
            if name in ran and ran[name]["rc"] not in (0, 2):
                raise _Failed(f"getent {name}: {ran[name]['stderr'].strip()}")
        passwd = ran["passwd"]["stdout"].splitlines() if "passwd" in ran else []
        group = ran["group"]["stdout"].splitlines() if "group" in ran else []
        recorded = ran["record"]["stdout"].split()
        foreign = sorted({line.split(":", 1)[0] for line in passwd + group} - set(recorded))
        moved = filter_loader.get("moved_homes").j2_function(passwd, params["home_base"])
        refused = self._homes(params, task_vars, look_only=True)[0] if params["makes_homes"] else []
        if foreign:
            raise _Failed(
                f"[account_exists] {host} already has {', '.join(foreign)}, not created by this "
                "bundle: a cluster user of that name would take the account over (its uid, its "
                "gid and, at decommission, its home). Choose other names; nothing was changed on "
                "this host"
            )
        if moved:
            raise _Failed(
                f"[config_refused] storage: on {host}, {', '.join(moved)} would move to "
                f"{params['home_base']}; the storage of a running cluster cannot change (its "
                "files stay where they are); nothing was changed on this host"
            )
        if refused:
            raise _Failed(_storage_conflict(refused, host))
        return {"changed": False, "recorded": recorded, "msg": "nothing refused"}

    def _present(self, params: dict[str, Any], host: str, task_vars: dict | None) -> dict:
        changed = False
        if params["files"]:
            made = self._module("slurm_files", {"files": params["files"]}, task_vars)
            if made.get("failed"):
                raise _Failed(f"files: {made.get('msg')}")
            changed = bool(made.get("changed"))
        users = list(zip(params["users"], self._homes_of(params), strict=True))
        if params["accounts"]:
            for user, home in users:
                made = self._module(
                    "ansible.builtin.group", {"name": user["name"], "gid": home["gid"]}, task_vars
                )
                if made.get("failed"):
                    raise _Failed(f"group {user['name']}: {made.get('msg')}")
                changed = changed or bool(made.get("changed"))
            # On a shared mount only the controller makes the homes (makes_homes): members
            # racing to copy /etc/skel into one folder would each find it half made. A home is
            # the user's alone (umask 077) whatever the image's login.defs says.
            for user, home in users:
                made = self._module(
                    "ansible.builtin.user",
                    {"name": user["name"], "uid": home["uid"], "group": user["name"],
                     "shell": "/bin/bash", "home": home["path"],
                     "create_home": params["makes_homes"], "umask": "077"},
                    task_vars,
                )  # fmt: skip
                if made.get("failed"):
                    raise _Failed(f"user {user['name']}: {made.get('msg')}")
                changed = changed or bool(made.get("changed"))
        if params["homes"] and params["makes_homes"]:
            refused, kept = self._homes(params, task_vars, look_only=False)
            if refused:
                raise _Failed(_storage_conflict(refused, host))
            changed = changed or kept
        return {"changed": changed}

    def run(self, tmp: Any = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        _, params = self.validate_argument_spec(
            argument_spec={
                "state": {"type": "str", "choices": ["checked", "present"], "required": True},
                "users": {"type": "list", "elements": "dict", "required": True},
                "record": {"type": "path"},
                "home_base": {"type": "path", "required": True},
                "home_root": {"type": "path", "required": True},
                "makes_homes": {"type": "bool", "required": True},
                "accounts": {"type": "bool", "default": True},
                "homes": {"type": "bool", "default": True},
                "files": {"type": "list", "elements": "dict", "default": []},
            },
            required_if=[("state", "checked", ["record"])],
        )
        host = (task_vars or {}).get("inventory_hostname", "")
        step = self._checked if params["state"] == "checked" else self._present
        try:
            return result | step(params, host, task_vars)
        except _Failed as failure:
            return result | {"failed": True, "msg": str(failure)}


class _Failed(Exception):
    """What the step refuses or where a module failed: the task fails with this message."""
