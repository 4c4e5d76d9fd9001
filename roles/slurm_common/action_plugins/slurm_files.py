"""Action plugin for slurm_files: reads each entry's src on the control node, as copy does,
and sends its bytes with the module's arguments, so that the host gets every file in one
module run instead of one transfer per file. Given `converged`, it first reads the member as
slurm_common's converge check does and puts the record of that reading before the entries:
the reading and the record in one step (the module's documentation says how)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import filter_loader


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _converged_record(
        self, converged: dict[str, str], task_vars: dict | None
    ) -> tuple[list[dict[str, Any]], int | None]:
        """The record's entries of this reading, and the reading's exit status (None where a
        check run did not read). The shell module's own run, so that the reading is the one
        converged_probe.yml's step registers: its output stripped of the last newline alike."""
        reading = self._execute_module(
            module_name="ansible.builtin.command",
            module_args={
                "_raw_params": converged["command"],
                "_uses_shell": True,
                "executable": "/bin/bash",
            },
            task_vars=task_vars,
        )
        if reading.get("skipped"):
            return [], None
        fingerprint = filter_loader.get("slurm_converge_reading").j2_function(
            {"rc": reading.get("rc"), "stdout": reading.get("stdout", "")}, converged["inputs"]
        )["fingerprint"]
        if not fingerprint:
            return [], reading.get("rc")
        record = converged["record"]
        entries = [
            {"path": str(Path(record).parent), "state": "directory", "mode": "0700"},
            {"path": record, "content": f"{fingerprint}\n", "mode": "0600"},
        ]
        return entries, reading.get("rc")

    def run(self, tmp: Any = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        converged = args.pop("converged", None)
        entries: list[dict[str, Any]] = []
        if converged:
            missing = [key for key in ("command", "inputs", "record") if not converged.get(key)]
            if missing:
                raise AnsibleActionFail(f"converged: {', '.join(missing)} required")
            entries, read_rc = self._converged_record(converged, task_vars)
            if read_rc is not None:
                result["converged_read_rc"] = read_rc
        for given in args.get("files") or []:
            entry = dict(given)
            source = entry.pop("src", None)
            if source is not None:
                if entry.get("content") is not None:
                    raise AnsibleActionFail(f"{entry.get('path')}: give content or src, not both")
                data = Path(self._find_needle("files", source)).read_bytes()
                entry["content_b64"] = base64.b64encode(data).decode()
            entries.append(entry)
        result.update(
            self._execute_module(
                module_name="slurm_files",
                module_args={**args, "files": entries},
                task_vars=task_vars,
            )
        )
        return result
