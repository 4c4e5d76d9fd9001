"""Action plugin for slurm_install: Ansible's own modules, run in one host-step. Each unit is
masked with ansible.builtin.file, the packages installed with ansible.builtin.apt, then the
units unmasked (also when apt fails) and systemd reloaded with ansible.builtin.systemd_service.
Four tasks cost the control side four steps on every installing host; this is one, and each
module keeps its own idempotence and check mode. Where it succeeds, the host's fact
slurm_common_installed_packages says what the host holds (the caller's `installed`), for the
other roles' own installs to skip: one more set_fact step saved.

Given the roles' package sets instead of packages, it reads which the host holds (dpkg-query,
in the same step) and plans the one transaction with slurm_common's filter
(slurm_install_plan): what to install, which units to mask, what the host then holds. Where
that fails and an optional set had something to install, it tries again without the optional
sets: a monitoring repository down must not stop the cluster (the set's role's own install
fails again, and reports it the role's way)."""

from __future__ import annotations

import shlex
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import filter_loader

UNIT_FOLDER = "/etc/systemd/system"
DPKG_QUERY = ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\\n"]


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset({"packages", "masked_units", "cache_valid_time", "installed", "sets"})

    def _module(self, name: str, args: dict[str, Any], task_vars: dict | None) -> dict:
        return self._execute_module(module_name=name, module_args=args, task_vars=task_vars)

    def _held(self, package_sets: list[dict[str, Any]]) -> list[str]:
        """dpkg-query's lines for every package the sets name or remove (read in check mode
        too: the plan needs them)."""
        names = list(
            dict.fromkeys(
                name
                for pset in package_sets
                for name in [*(pset.get("packages") or []), *(pset.get("absent") or [])]
            )
        )
        if not names:
            return []
        ran = self._low_level_execute_command(shlex.join(DPKG_QUERY + names))
        # 1: some are not known to dpkg yet, which is what a new host looks like
        if ran["rc"] not in (0, 1):
            raise AnsibleActionFail(f"dpkg-query failed: {ran.get('stderr', '').strip()}")
        return ran["stdout"].splitlines()

    def _install(
        self, packages: list[str], units: list[str], installed: list[str], task_vars: dict | None
    ) -> dict[str, Any]:
        cache_valid_time = int(self._task.args.get("cache_valid_time", 86400))
        held = {"slurm_common_installed_packages": installed}
        if not packages:
            return {"changed": False, "msg": "nothing to install", "ansible_facts": held}
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
                    return {"failed": True, "msg": f"masking {path}: {masked.get('msg')}"}
            apt = self._module(
                "ansible.builtin.apt",
                {"name": packages, "state": "present", "install_recommends": False,
                 "cache_valid_time": cache_valid_time},
                task_vars,
            )  # fmt: skip
        finally:
            # a mask must not outlive the install, whatever apt did
            for path in unit_paths:
                self._module("ansible.builtin.file", {"path": path, "state": "absent"}, task_vars)
            if unit_paths:
                self._module("ansible.builtin.systemd_service", {"daemon_reload": True}, task_vars)
        done: dict[str, Any] = {"changed": bool(apt.get("changed"))}
        for key in ("failed", "msg", "stdout", "stderr", "rc", "cache_updated"):
            if key in apt:
                done[key] = apt[key]
        if not apt.get("failed"):
            done["ansible_facts"] = held
        return done

    def run(self, tmp: Any = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        args = self._task.args
        if args.get("sets") is None:
            packages = list(args.get("packages") or [])
            installed = list(args.get("installed") or packages)
            return result | self._install(
                packages, list(args.get("masked_units") or []), installed, task_vars
            )
        package_sets = list(args["sets"])
        # slurm_common's filter, the one plan of a host's transaction
        plan = filter_loader.get("slurm_install_plan").j2_function
        lines = self._held(package_sets)
        every = plan(package_sets, lines)
        done = self._install(
            every["packages"], every["units"], every["wanted"] + every["held"], task_vars
        )
        required = plan(package_sets, lines, with_optional=False)
        if done.get("failed") and required["packages"] != every["packages"]:
            first = done.get("msg")
            done = self._install(
                required["packages"],
                required["units"],
                required["wanted"] + required["held"],
                task_vars,
            )
            done["warnings"] = [f"the optional package sets were left out: {first}"]
        return result | done
