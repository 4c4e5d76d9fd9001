"""What a step's condition costs the Ansible top level when it reads every member's variables.

A condition such as `ansible_play_hosts_all | map('extract', hostvars) | selectattr(...)`,
evaluated for each member, reads each member's variables once per member: members² reads of
Ansible's VariableManager a step. This runs one play of `--steps` steps over N hosts, once
with such a condition on each step and once with the same answer from a group (what deploy.yml's
record play now asks), and gives the control CPU of each run and their difference per step.
The hosts are local connections with their facts gathered (min and virtual, as the deploy's
first play gathers them), so each member's variables are about as large as in a deploy.

Usage: python -m bench.hostvars_scan [--sizes 25 100 250] [--steps 3] [--json FILE]
"""

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import markdown

CONDITIONS = {
    "every member's variables": (
        "ansible_play_hosts_all | map('extract', hostvars) | selectattr('never_set', 'defined')"
        " | list | length == 0"
    ),
    "a group": "groups['never_made'] | default([]) | length == 0",
}


def playbook(condition: str, steps: int) -> list[dict[str, Any]]:
    step = {"ansible.builtin.debug": {"msg": "ran"}, "when": "records | bool"}
    return [
        {
            "hosts": "all",
            "gather_facts": True,
            "gather_subset": ["min", "virtual"],
            "vars": {"records": f"{{{{ {condition} }}}}"},
            "tasks": [{"name": f"step {number}", **step} for number in range(steps)],
        }
    ]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(hosts: int, condition: str, steps: int) -> float:
    """The control CPU of one ansible-playbook run over `hosts` local hosts."""
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        inventory = {
            "all": {
                "hosts": {f"m{number:04d}": {} for number in range(hosts)},
                "vars": {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                },
            }
        }
        (base / "inventory.json").write_text(json.dumps(inventory))
        (base / "play.json").write_text(json.dumps(playbook(condition, steps)))
        before = children_cpu_s()
        subprocess.run(
            [Path(sys.executable).parent / "ansible-playbook", "-i", "inventory.json", "--forks",
             "20", "play.json"],
            cwd=base, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        return children_cpu_s() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 100, 250])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows = []
    for hosts in args.sizes:
        cpu = {name: run(hosts, condition, args.steps) for name, condition in CONDITIONS.items()}
        extra = cpu["every member's variables"] - cpu["a group"]
        rows.append({"hosts": hosts, **cpu, "extra_per_step_s": extra / args.steps})
    columns = ["hosts", *(f"control CPU s: {name}" for name in CONDITIONS),
               "the scan's CPU s per step", "per member read ms"]  # fmt: skip
    print(markdown.header(columns))
    for row in rows:
        per_read_ms = row["extra_per_step_s"] / row["hosts"] ** 2 * 1000
        print(markdown.row(
            row["hosts"], *(f"{row[name]:.1f}" for name in CONDITIONS),
            f"{row['extra_per_step_s']:.2f}", f"{per_read_ms:.2f}",
        ))  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
