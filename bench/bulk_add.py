"""add_worker joining k new allocations in one operation, timed in one run.

On one lab (1 controller, 1 worker, monitoring on), each through a fresh `slurm-app-driver`
process called by its full path with a minimal environment (as the platform calls it):

- k=1: one new host joins (operation.target);
- k=K (default 8): K new hosts join in one operation (operation.targets);

so T(K)/T(1) and the hosts touched come from the same machine in the same run. With
--preinstalled, each new host gets the packages a worker needs (slurm_common's, slurm_worker's
and node_exporter) before its join is timed, installed with their units masked and left
stopped, as on an image with the packages baked in: the join is then the configuration, the
key, the starts and the controller's change, and every lab host's dpkg work (on the same 2
CPUs) is out of the ratio. Serial joins of
K hosts would cost about K x T(1); the table shows that beside the measured bulk join, how
busy the machine's CPUs were during each join (from /proc/stat: every lab host is a container
on the same CPUs, so a join of K hosts does K hosts' work on them) and the CPU seconds of the
control side alone (the driver, ansible-playbook, its forks and their ssh clients: what the
platform's own host spends, whatever the workers' CPUs).

Usage: python -m bench.bulk_add [--distro trixie] [--k 8] [--preinstalled] [--keep] [--json FILE]
The lab is named `bulk`; it is removed at the end unless --keep.
"""

import argparse
import json
import resource
from pathlib import Path
from typing import Any

import yaml

from bench import markdown
from bench.member_operations import (
    ROOT,
    driver,
    on_host,
    result_of,
    slowest_tasks,
    worker_packages,
)
from driver.lab import lab as lab_hosts
from driver.lab.spec import lab_dir

LAB = "bulk"


def cpu_ticks() -> tuple[int, int]:
    """The machine's (busy, total) CPU ticks so far, every CPU together."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def control_cpu_s() -> float:
    """CPU seconds of every process this one started and waited for, their own children
    included: each driver call's whole tree."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def preinstall(host: str, distro: str) -> None:
    """The worker's packages on the host, stopped, untimed (an image with them baked in).
    Every unit they ship that would start on install is masked for it, so none starts on the
    package's defaults (slurmd's would retry DNS for 90 s), then unmasked and left stopped."""
    monitoring = yaml.safe_load((ROOT / "roles/monitoring/vars/main.yml").read_text())
    packages = " ".join(
        [*worker_packages(distro), monitoring["__monitoring_node_exporter_package"]]
    )
    # the roles name munge's and slurmd's units literally; the exporter's is in its vars
    units = ("munge", "slurmd", monitoring["__monitoring_node_exporter_unit"])
    masks = " ".join(f"/etc/systemd/system/{unit}.service" for unit in units)
    on_host(
        LAB,
        host,
        f"set -e; for m in {masks}; do ln -sf /dev/null $m; done; "
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
        f"{packages} >/dev/null; rm -f {masks}; systemctl daemon-reload",
    )


def join(hosts: list[str], preinstalled_on: str | None = None) -> dict[str, Any]:
    """Start the hosts (with the packages of `preinstalled_on`'s workers already on them, if
    given), then join them in one add_worker; the operation's figures."""
    for host in hosts:
        driver("lab", "add-host", host, "--name", LAB)
        if preinstalled_on:
            preinstall(host, preinstalled_on)
    targets = [argument for host in hosts for argument in ("--target", host)]
    busy_before, total_before = cpu_ticks()
    control_before = control_cpu_s()
    wall = driver("lab", "op", "add_worker", "--name", LAB, "--format", "json", *targets)
    control = control_cpu_s() - control_before
    busy_after, total_after = cpu_ticks()
    result = result_of(LAB, "add_worker")
    statuses = {m["member_id"]: m["status"] for m in result["members"]}
    joined = [h for h in hosts if statuses.get(f"{LAB}-worker-{h}") == "ready"]
    if result["status"] != "succeeded" or joined != hosts:
        raise SystemExit(f"the join of {hosts} did not succeed: {result.get('error')}")
    tasks, slowest = slowest_tasks(lab_dir(LAB) / "add_worker-events.jsonl")
    return {
        "k": len(hosts),
        "wall_s": round(wall, 1),
        "duration_s": result["duration_s"],
        "changed": result["changed"],
        "hosts_touched": len(result["adapter_detail"]["hosts_touched"]),
        "readiness_nodes": result["adapter_detail"]["readiness"]["nodes"],
        "cpu_busy": (busy_after - busy_before) / max(total_after - total_before, 1),
        "control_cpu_s": round(control, 1),
        "tasks": tasks,
        "slowest": slowest,
    }


def table(rows: list[dict[str, Any]], one: float) -> str:
    columns = ["k", "wall s", "operation s", "k x T(1) s", "CPUs busy", "control CPU s"]
    columns += ["changes", "hosts touched", "readiness job nodes", "tasks", "slowest tasks (s)"]
    lines = [markdown.header(columns, text={"slowest tasks (s)"})]
    for joined in rows:
        lines.append(
            markdown.row(
                joined["k"],
                joined["wall_s"],
                joined["duration_s"],
                f"{joined['k'] * one:.1f}",
                f"{joined['cpu_busy']:.0%}",
                joined["control_cpu_s"],
                joined["changed"],
                joined["hosts_touched"],
                joined["readiness_nodes"],
                joined["tasks"],
                markdown.slowest_tasks_cell(joined["slowest"]),
            )
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distro", default="trixie")
    parser.add_argument("--k", type=int, default=8, help="hosts joined in the bulk operation")
    parser.add_argument(
        "--preinstalled",
        action="store_true",
        help="the new hosts already hold the worker's packages (untimed), as on a baked image",
    )
    parser.add_argument("--keep", action="store_true", help="leave the lab running")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    try:
        driver("lab", "up", "--name", LAB, "--workers", "1", "--distro", args.distro)
        baked = args.distro if args.preinstalled else None
        rows.append(join([f"{LAB}-w02"], baked))
        rows.append(join([f"{LAB}-w{index:02d}" for index in range(3, 3 + args.k)], baked))
    finally:
        if not args.keep:
            lab_hosts.down(LAB)
    one, bulk = rows[0]["duration_s"], rows[-1]["duration_s"]
    print(table(rows, one))
    print(
        f"\nadd_worker, k={args.k} in one operation / k=1: {bulk / one:.2f} "
        f"(hosts touched {rows[-1]['hosts_touched']} and {rows[0]['hosts_touched']}); "
        f"{args.k} serial joins would take about {args.k * one:.0f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
