"""Action plugin for slurm_files: reads each entry's src on the control node, as copy does,
and sends its bytes with the module's arguments, so that the host gets every file in one
module run instead of one transfer per file."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp: Any = None, task_vars: dict | None = None) -> dict:
        result = super().run(tmp, task_vars)
        entries = []
        for given in self._task.args.get("files") or []:
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
                module_args={**self._task.args, "files": entries},
                task_vars=task_vars,
            )
        )
        return result
