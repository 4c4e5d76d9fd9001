"""A lab of 24 real workers against one of 3, in one run, for a model at 256 and 1,000.

Deploys a lab of 1 controller and 3 workers through the driver and joins one worker to it;
removes it, then deploys 1 controller and `--workers` workers (24) and runs status, an
add_worker of 1 host, an add_worker of 8 hosts in one operation, a remove_worker and the
decommission of every host. Each step through `slurm-app-driver` called by its full path with
a minimal environment, as the platform calls it; for each: its time, changes, hosts touched,
task count, the CPU of the driver's whole process tree (the control side: the driver,
ansible-playbook, its workers) and how busy the machine's CPUs were (the lab's hosts run on the
same cores, so their installs and daemons count there and not in the control CPU). The slowest
tasks come from the driver's event log.

Usage: python -m bench.large_lab [--distro trixie] [--workers 24] [--keep] [--json FILE].
The labs are `ls3` and `l24`; removed at the end unless --keep.
"""

import argparse
import json
from pathlib import Path
from typing import Any

from bench import markdown
from bench.bulk_add import control_cpu_s, cpu_ticks
from bench.member_operations import driver, figures, operation
from driver.lab import lab as lab_hosts


def measured(step: str, run: Any) -> dict[str, Any]:
    """`run()` (a driver call returning the operation's figures) with the CPU it cost."""
    busy_before, total_before = cpu_ticks()
    control_before = control_cpu_s()
    figures = run()
    busy_after, total_after = cpu_ticks()
    return {
        "step": step,
        **figures,
        "control_cpu_s": round(control_cpu_s() - control_before, 1),
        "cpu_busy": (busy_after - busy_before) / max(total_after - total_before, 1),
    }


def deployed(lab: str, workers: int, distro: str) -> dict[str, Any]:
    wall = driver("lab", "up", "--name", lab, "--workers", str(workers), "--distro", distro)
    return figures(lab, "deploy", wall)


def joined(lab: str, hosts: list[str]) -> dict[str, Any]:
    for host in hosts:
        driver("lab", "add-host", host, "--name", lab)
    return operation(lab, "add_worker", *hosts)


def table(rows: list[dict[str, Any]]) -> str:
    columns = ["step", "operation s", "changes", "hosts touched", "tasks", "control CPU s",
               "CPUs busy", "slowest tasks (s)"]  # fmt: skip
    lines = [markdown.header(columns, text={"step", "slowest tasks (s)"})]
    for row in rows:
        slowest = markdown.slowest_tasks_cell(row["slowest"])
        lines.append(markdown.row(
            row["step"], row["duration_s"], row["changed"], row["hosts_touched"], row["tasks"],
            row["control_cpu_s"], f"{row['cpu_busy']:.0%}", slowest,
        ))  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distro", default="trixie")
    parser.add_argument("--workers", type=int, default=24)
    parser.add_argument("--keep", action="store_true", help="leave the labs running")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args()
    large, n = "l24", args.workers
    rows: list[dict[str, Any]] = []
    try:
        rows.append(measured("deploy 1+3", lambda: deployed("ls3", 3, args.distro)))
        rows.append(measured("add_worker k=1 at 3", lambda: joined("ls3", ["ls3-w04"])))
        lab_hosts.down("ls3")
        rows.append(measured(f"deploy 1+{n}", lambda: deployed(large, n, args.distro)))
        rows.append(measured(f"status at {n}", lambda: operation(large, "status")))
        one = [f"{large}-w{n + 1:02d}"]
        rows.append(measured(f"add_worker k=1 at {n}", lambda: joined(large, one)))
        eight = [f"{large}-w{index:02d}" for index in range(n + 2, n + 10)]
        rows.append(measured(f"add_worker k=8 at {n + 1}", lambda: joined(large, eight)))
        rows.append(measured(f"remove_worker at {n + 9}",
                             lambda: operation(large, "remove_worker", eight[-1])))  # fmt: skip
        rows.append(measured(f"decommission of {n + 9} hosts",
                             lambda: operation(large, "decommission")))  # fmt: skip
    finally:
        print(table(rows))
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
        if not args.keep:
            for lab in ("ls3", large):
                lab_hosts.down(lab)
    seconds = {row["step"]: row["duration_s"] for row in rows}
    ratios = {
        f"deploy 1+{n} / 1+3": (f"deploy 1+{n}", "deploy 1+3"),
        "add k=8 / k=1": (f"add_worker k=8 at {n + 1}", f"add_worker k=1 at {n}"),
        f"add k=1 at {n} / at 3": (f"add_worker k=1 at {n}", "add_worker k=1 at 3"),
    }
    print("; ".join(f"{name}: {seconds[a] / seconds[b]:.2f}" for name, (a, b) in ratios.items()))


if __name__ == "__main__":
    main()
