#!/usr/bin/python3
"""Ansible module: the job steps on this node whose slurmstepd is older than slurmd."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_stale_steps
short_description: Find the slurmstepds that started before the node's slurmd
description:
  - Slurm 22.05's slurmstepd keeps the address of the controller it started under. After a
    replace_controller restarted slurmd pointed at the new controller, the slurmstepds older
    than slurmd are those of jobs that ran through the loss; their end never reaches the new
    controller.
  - Reads /proc only; check mode runs it too.
options: {}
"""

EXAMPLES = r"""
- name: Find the slurmstepds older than slurmd
  slurm_stale_steps:
  register: stale
"""

RETURN = r"""
jobs:
  description: >-
    Job id to C(pids), its slurmstepds' process ids, and C(tasks), whether a batch or numbered
    step still has a process of its own running (the job's work goes on).
  type: dict
  returned: success
slurmd_pid:
  description: slurmd's process id, 0 where it does not run (then nothing is stale).
  type: int
  returned: success
"""

import re  # noqa: E402
from pathlib import Path  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

STEPD = re.compile(r"^slurmstepd: \[(\d+)\.([a-z0-9_]+)\]")
# an extern step's process only holds the job's cgroup: no work of the job's
NO_WORK = {"extern"}


def _stat(pid: int) -> tuple[int, int] | None:
    """A process's parent and start time (clock ticks since boot), from /proc/PID/stat."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name, in parentheses, may hold spaces: the fields follow its last ')'
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[19])


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def stale_steps(slurmd_pid: int) -> dict[str, dict]:
    slurmd = _stat(slurmd_pid) if slurmd_pid else None
    if slurmd is None:
        return {}
    parents: dict[int, int] = {}
    steps: dict[int, tuple[str, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is None:
            continue
        parents[pid] = stat[0]
        found = STEPD.match(_cmdline(pid))
        if found and stat[1] < slurmd[1]:
            steps[pid] = (found.group(1), found.group(2))
    jobs: dict[str, dict] = {}
    for pid, (job, step) in sorted(steps.items()):
        entry = jobs.setdefault(job, {"pids": [], "tasks": False})
        entry["pids"].append(pid)
        if step not in NO_WORK and pid in parents.values():
            entry["tasks"] = True
    return jobs


def main() -> None:
    module = AnsibleModule(argument_spec={}, supports_check_mode=True)
    rc, out, err = module.run_command(
        ["systemctl", "show", "--property=MainPID", "--value", "slurmd"]
    )
    if rc != 0:
        module.fail_json(msg=f"systemctl show slurmd: {err.strip()}")
    slurmd_pid = int(out.strip() or 0)
    module.exit_json(changed=False, slurmd_pid=slurmd_pid, jobs=stale_steps(slurmd_pid))


if __name__ == "__main__":
    main()
