"""status through the controller against status over every member, on the same lab in one run.

For each size of --sizes (default 2 and 24), deploys a lab of 1 controller and that many
workers, waits until Prometheus scraped every worker since (status through the controller
reports none `unknown`), then runs status --repeat times in each read, alternated: the default
`through_controller` (the controller and the monitoring host reached, the workers read from
Prometheus) and `read=every_member` (every member over SSH). Each through `slurm-app-driver`
called by its full path with a minimal environment, as the platform calls it; for each: the
operation's time, the driver's wall time, the control CPU (bench.large_lab's measure), the
hosts reached and the tasks run. The medians go in the table, with the ratio of the two reads.

Usage: python -m bench.status_read [--distro trixie] [--sizes 2 24] [--repeat 3] [--keep]
[--json FILE]. The labs are `sr<N>`; each is removed after its runs unless --keep.
"""

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from bench import markdown
from bench.large_lab import deployed, measured
from bench.member_operations import driver, figures, result_of
from driver.lab import lab as lab_hosts

READS = ("through_controller", "every_member")


def status(lab: str, read: str) -> dict[str, Any]:
    argv = ["lab", "op", "status", "--name", lab, "--format", "json", "--option", f"read={read}"]
    wall = driver(*argv)
    result = result_of(lab, "status")
    health = result["adapter_detail"]["health"]
    return {
        **figures(lab, "status", wall),
        "reached": sum(1 for counts in result["hosts"].values() if counts["ok"] > 0),
        "classification": health["classification"],
        "unknown": len(health["unknown"]),
    }


def every_worker_scraped(lab: str, timeout: float = 180) -> None:
    """Until Prometheus holds every worker: a fresh deploy restarted the node exporters."""
    deadline = time.monotonic() + timeout
    while status(lab, "through_controller")["unknown"] and time.monotonic() < deadline:
        time.sleep(5)


def measure(size: int, distro: str, repeat: int, keep: bool) -> list[dict[str, Any]]:
    lab = f"sr{size}"
    runs: dict[str, list[dict[str, Any]]] = {read: [] for read in READS}
    try:
        deployed(lab, size, distro)
        every_worker_scraped(lab)
        for _ in range(repeat):
            for read in READS:
                runs[read].append(measured(read, lambda read=read: status(lab, read)))
    finally:
        if not keep:
            lab_hosts.down(lab)
    rows = []
    for read, measured_runs in runs.items():
        rows.append({
            "workers": size,
            "read": read,
            **{key: statistics.median(run[key] for run in measured_runs)
               for key in ("duration_s", "wall_s", "control_cpu_s", "tasks", "reached")},
            "classification": sorted({run["classification"] for run in measured_runs}),
            "unknown": max(run["unknown"] for run in measured_runs),
            "runs_s": [run["duration_s"] for run in measured_runs],
        })  # fmt: skip
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    columns = ["workers", "read", "operation s", "driver wall s", "control CPU s",
               "hosts reached", "tasks", "health", "each run s"]  # fmt: skip
    lines = [markdown.header(columns, text={"read", "health", "each run s"})]
    for row in rows:
        lines.append(markdown.row(
            row["workers"], row["read"], row["duration_s"], row["wall_s"], row["control_cpu_s"],
            row["reached"], row["tasks"], "/".join(row["classification"]),
            ", ".join(str(s) for s in row["runs_s"]),
        ))  # fmt: skip
    return "\n".join(lines)


def ratios(rows: list[dict[str, Any]]) -> str:
    seconds = {(row["workers"], row["read"]): row["duration_s"] for row in rows}
    sizes = sorted({row["workers"] for row in rows})
    return "; ".join(
        f"1+{size}: every_member / through_controller "
        f"{seconds[(size, 'every_member')] / seconds[(size, 'through_controller')]:.2f}"
        for size in sizes
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distro", default="trixie")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2, 24])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="leave the labs running")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for size in sorted(args.sizes):
        rows += measure(size, args.distro, args.repeat, args.keep)
    print(table(rows))
    print()
    print(ratios(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
