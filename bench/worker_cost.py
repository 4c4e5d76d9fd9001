"""What one worker costs the control side: its host-tasks and control CPU in a deploy and an add.

Deploys a lab of 1 controller + N workers for each N of --sizes (default 1 and 3), one lab at a
time, through `slurm-app-driver` called by its full path with a minimal environment (as the
platform calls it), then joins one more worker to the last lab with add_worker. For each step:
the operation's time, the control CPU (the driver's whole process tree: the driver,
ansible-playbook, its workers; bench.large_lab's measure) and each host's host-tasks, what
Ansible ran or decided on it (ok + skipped, from the result's per-host counts; a skipped task
costs the control side what a run one does). Per worker: the slope between the smallest and the
largest size, which leaves out what the controller and the monitoring host cost.

Usage: python -m bench.worker_cost [--distro trixie] [--sizes 1 3] [--json FILE] [--keep]
The labs are `wc<N>`; each is removed after its steps unless --keep.
"""

import argparse
import json
import statistics
from functools import partial
from pathlib import Path
from typing import Any

from bench import markdown
from bench.large_lab import deployed, joined, measured
from bench.member_operations import driver, result_of


def host_tasks(lab: str, name: str) -> dict[str, int]:
    """Each host's host-tasks in the lab's last `name` operation."""
    hosts = result_of(lab, name)["hosts"]
    return {host: counts["ok"] + counts["skipped"] for host, counts in hosts.items()}


def worker_tasks(tasks: dict[str, int], controller: str) -> float:
    return statistics.mean(count for host, count in tasks.items() if host != controller)


def measure(sizes: list[int], distro: str, keep: bool) -> list[dict[str, Any]]:
    rows = []
    for size in sizes:
        lab = f"wc{size}"
        row = measured(f"deploy 1+{size}", partial(deployed, lab, size, distro))
        tasks = host_tasks(lab, "deploy")
        row |= {"workers": size, "controller_tasks": tasks[f"{lab}-ctl"]}
        row["worker_tasks"] = worker_tasks(tasks, f"{lab}-ctl")
        rows.append(row)
        if size == sizes[-1]:
            host = f"{lab}-w{size + 1:02d}"
            row = measured(f"add_worker k=1 at {size}", partial(joined, lab, [host]))
            tasks = host_tasks(lab, "add_worker")
            row |= {"workers": 1, "controller_tasks": tasks[f"{lab}-ctl"]}
            row["worker_tasks"] = worker_tasks(tasks, f"{lab}-ctl")
            rows.append(row)
        if not keep:
            driver("lab", "down", "--name", lab)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    columns = ["step", "operation s", "control CPU s", "CPUs busy", "host-tasks: controller",
               "host-tasks: each worker", "changes"]  # fmt: skip
    lines = [markdown.header(columns, text={"step"})]
    for row in rows:
        lines.append(markdown.row(
            row["step"], row["duration_s"], row["control_cpu_s"], f"{row['cpu_busy']:.0%}",
            row["controller_tasks"], round(row["worker_tasks"], 1), row["changed"],
        ))  # fmt: skip
    return "\n".join(lines)


def per_worker(rows: list[dict[str, Any]]) -> str:
    deploys = [row for row in rows if row["step"].startswith("deploy")]
    first, last = deploys[0], deploys[-1]
    added = last["workers"] - first["workers"]
    if added <= 0:
        return ""
    cpu = (last["control_cpu_s"] - first["control_cpu_s"]) / added
    wall = (last["duration_s"] - first["duration_s"]) / added
    return (
        f"Per worker, deploy 1+{first['workers']} to 1+{last['workers']}: "
        f"{cpu:.2f} control CPU s, {wall:.1f} s of the operation's time."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distro", default="trixie")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--keep", action="store_true", help="leave the labs running")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args()
    rows = measure(sorted(args.sizes), args.distro, args.keep)
    print(table(rows))
    print()
    print(per_worker(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
