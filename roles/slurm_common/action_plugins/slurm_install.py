"""Action plugin for slurm_install: Ansible's own modules, run in one host-step. Each unit is
masked with ansible.builtin.file, the packages installed with ansible.builtin.apt, then the
units unmasked (also when apt fails) and systemd reloaded with ansible.builtin.systemd_service.
Four tasks cost the control side four steps on every installing host; this is one, and each
module keeps its own idempotence and check mode. Where it succeeds, the host's fact
slurm_common_installed_packages says what the host holds (the caller's `installed`), for the
other roles' own installs to skip: one more set_fact step saved."""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

UNIT_FOLDER = "/etc/systemd/system"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"packages", "masked_units", "cache_valid_time", "installed"})

    def _module(self, name: str, args: dict[str, Any], task_vars: dict | None) -> dict:
        return self._execute_module(module_name=name, module_args=args, task_vars=task_vars)

    def run(self, tmp: Any = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        args = self._task.args
        packages = list(args.get("packages") or [])
        units = list(args.get("masked_units") or [])
        held = {"slurm_common_installed_packages": list(args.get("installed") or packages)}
        if not packages:
            return result | {"changed": False, "msg": "nothing to install", "ansible_facts": held}
        unit_paths = [f"{UNIT_FOLDER}/{unit}.service" for unit in units]
        try:
            for path in unit_paths:
                masked = self._module(
                    "ansible.builtin.file",
                    {"src": "/dev/null", "dest": path, "state": "link", "force": True,
                     "owner": "root", "group": "root"},
                    task_vars,
                )  # fmt: skip
                if masked.get("failed"):
                    return result | {"failed": True, "msg": f"masking {path}: {masked.get('msg')}"}
            apt = self._module(
                "ansible.builtin.apt",
                {"name": packages, "state": "present", "install_recommends": False,
                 "cache_valid_time": int(args.get("cache_valid_time", 86400))},
                task_vars,
            )  # fmt: skip
        finally:
            # a mask must not outlive the install, whatever apt did
            for path in unit_paths:
                self._module("ansible.builtin.file", {"path": path, "state": "absent"}, task_vars)
            if unit_paths:
                self._module("ansible.builtin.systemd_service", {"daemon_reload": True}, task_vars)
        result["changed"] = bool(apt.get("changed"))
        for key in ("failed", "msg", "stdout", "stderr", "rc", "cache_updated"):
            if key in apt:
                result[key] = apt[key]
        if not apt.get("failed"):
            result["ansible_facts"] = held
        return result
