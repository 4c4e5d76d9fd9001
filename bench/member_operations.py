"""Member operations on the container lab, timed in one run.

Deploys a lab of 1 controller and 3 workers through the driver and measures, each through a
fresh `slurm-app-driver` process called by its full path with a minimal environment (as the
platform calls it):

- deploy and its no-op re-run (where the time goes: the slowest tasks from the event log);
- status at 3 and at 6 workers;
- add_worker as the cluster grows from 3 to 7 workers, and on a second lab with 1 worker, so
  the cost with 1 and with 6 existing workers comes from one run;
- the floors, beside the steps they bound (what no tool can avoid on this image): every
  member's packages installed at once on fresh hosts, one apt transaction each (deploy); one
  SSH round trip per member at once that reads every unit the status reads, and the node
  states on the controller (the unchanged re-run and status); the joined node's packages
  installed again and slurmd started, alone, until slurmctld schedules on it (add_worker).

Usage: python -m bench.member_operations [--distro bookworm] [--keep] [--deploy-only]
--deploy-only: the deploy, its re-run and the deploy's floor alone, with their ratio.
The labs are named `bench` and `benchone`; they are removed at the end unless --keep.
"""

import argparse
import datetime
import itertools
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from bench import markdown
from driver.lab import lab as lab_hosts
from driver.lab.distros import distro
from driver.lab.lab import controller_container, host_container
from driver.lab.spec import key_dir, lab_dir

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(sys.executable).parent / "slurm-app-driver"
PLATFORM_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/root")}


def _role_vars(role: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "roles" / role / "vars/main.yml").read_text())
    return loaded


def worker_packages(codename: str, monitoring: bool = False) -> list[str]:
    """What the roles install on a worker of this release (slurm_common's and slurm_worker's
    package lists, and monitoring's node_exporter): the floors install the same set."""
    common, worker = _role_vars("slurm_common"), _role_vars("slurm_worker")
    release = common["__slurm_common_release_packages"].get(distro(codename).debian_version, [])
    exporter = (
        [_role_vars("monitoring")["__monitoring_node_exporter_package"]] if monitoring else []
    )
    return [
        *common["__slurm_common_packages"],
        *release,
        *worker["__slurm_worker_packages"],
        *exporter,
    ]


def controller_packages(codename: str) -> list[str]:
    """What the roles install on a separate controller with accounting and monitoring."""
    common, controller = _role_vars("slurm_common"), _role_vars("slurm_controller")
    monitoring = _role_vars("monitoring")
    release = common["__slurm_common_release_packages"].get(distro(codename).debian_version, [])
    return [
        *common["__slurm_common_packages"],
        *release,
        *controller["__slurm_controller_packages"],
        *controller["__slurm_controller_accounting_packages"],
        monitoring["__monitoring_node_exporter_package"],
        *monitoring["__monitoring_prometheus_packages"],
    ]


def driver(*argv: str) -> float:
    """Run the driver; its wall seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [str(DRIVER), *argv], env=PLATFORM_ENV, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"slurm-app-driver {' '.join(argv)} failed:\n{done.stdout[-3000:]}")
    return elapsed


def result_of(lab: str, operation: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((lab_dir(lab) / f"{operation}-result.json").read_text())
    return result


def slowest_tasks(events_file: Path, count: int = 6) -> tuple[int, list[tuple[str, float]]]:
    """Task count and the slowest tasks: each task's time runs until the next task or play
    starts (the profile_tasks callback's measure, from the driver's own event log)."""
    events = [json.loads(line) for line in events_file.read_text().splitlines()]
    marks = [e for e in events if e["event"] in ("task.started", "play.started")] + events[-1:]
    spent: dict[str, float] = defaultdict(float)
    for current, following in itertools.pairwise(marks):
        if current["event"] == "task.started":
            delta = datetime.datetime.fromisoformat(
                following["ts"]
            ) - datetime.datetime.fromisoformat(current["ts"])
            spent[current["task"]] += delta.total_seconds()
    tasks = sum(1 for e in events if e["event"] == "task.started")
    return tasks, sorted(spent.items(), key=lambda item: -item[1])[:count]


def operation(lab: str, name: str, *targets: str) -> dict[str, Any]:
    argv = ["lab", "op", name, "--name", lab, "--format", "json"]
    wall = driver(*argv, *(word for target in targets for word in ("--target", target)))
    return figures(lab, name, wall)


def figures(lab: str, name: str, wall: float) -> dict[str, Any]:
    """The figures of the lab's last `name` operation, from its result and event log."""
    result = result_of(lab, name)
    tasks, slowest = slowest_tasks(lab_dir(lab) / f"{name}-events.jsonl")
    return {
        "operation": name,
        "wall_s": round(wall, 1),
        "duration_s": result["duration_s"],
        "changed": result["changed"],
        "hosts_touched": len(result["adapter_detail"]["hosts_touched"]),
        "tasks": tasks,
        "slowest": slowest,
        "readiness_reused": (result["adapter_detail"].get("readiness") or {}).get("reused"),
    }


def on_host(lab: str, host: str, script: str) -> str:
    done = host_container(lab, host).exec_run(["/bin/bash", "-c", script])
    output: str = done.output.decode()
    if done.exit_code != 0:
        raise SystemExit(f"{host}: {script!r} failed:\n{output[-2000:]}")
    return output


def floor(lab: str, host: str, packages: list[str]) -> float:
    """The joined node's packages removed with what only they needed (configuration and key
    kept; untimed), then timed: installed again from the image's cache and started, until
    sinfo shows the node schedulable. slurmctld notices a stopped slurmd only after
    SlurmdTimeout, so in practice that wait adds nothing: the floor is install and start."""
    names = " ".join(packages)
    on_host(lab, host, f"systemctl stop slurmd; apt-get remove -y -q --autoremove {names}")
    started = time.perf_counter()
    on_host(
        lab,
        host,
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
        f"{names} && systemctl restart munge slurmd",
    )
    controller = controller_container(lab)
    while True:
        state = controller.exec_run(["sinfo", "-h", "-n", host, "-o", "%T"]).output.decode()
        if state.strip() in ("idle", "mixed", "allocated"):
            return time.perf_counter() - started
        if time.perf_counter() - started > 180:
            raise SystemExit(f"{host} did not come back after the floor's install: {state!r}")
        time.sleep(0.2)


def deploy_floor(lab: str, codename: str, workers: int) -> float:
    """Fresh hosts of the lab's image, one per member of the deploy, each given its member's
    packages in one apt transaction, all at once (postinsts start what they start; nothing is
    configured): the install a deploy cannot avoid on these shared CPUs."""
    hosts = [f"{lab}-f{index:02d}" for index in range(1, workers + 2)]
    for host in hosts:
        driver("lab", "add-host", host, "--name", lab)
    sets = [controller_packages(codename)] + [worker_packages(codename, monitoring=True)] * workers
    install = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
    started = time.perf_counter()
    with ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(lambda h, p: on_host(lab, h, install + " ".join(p)), hosts, sets))
    return time.perf_counter() - started


def read_floor(lab: str, repeat: int = 3) -> float:
    """One SSH session per member, all at once, each a fresh ssh process as the driver opens
    them: every unit the status reads, and on the controller the node states and slurmctld's
    answer. Any run that reads every member costs at least this; best of `repeat`."""
    key = key_dir(lab) / "id_ed25519"
    folder = lab_dir(lab)
    recorded = folder / "members.json"  # the members as the last operation left them
    members = json.loads(
        recorded.read_text() if recorded.is_file() else (folder / "deploy.json").read_text()
    )
    members = members if isinstance(members, list) else members["members"]
    allocations = {a["id"]: a for a in json.loads((folder / "allocations.json").read_text())}
    addresses = {
        allocations[m["allocation_id"]]["hostname"]: allocations[m["allocation_id"]]["address"]
        for m in members
        if m.get("status") != "removed"
    }
    worker_units = "munge slurmd prometheus-node-exporter"
    controller = (
        "systemctl is-active munge slurmctld slurmdbd mariadb prometheus prometheus-alertmanager"
        " slurm-app-exporter prometheus-node-exporter; sinfo -h -N -o '%N %T'; scontrol ping"
    )

    def read(host: str) -> None:
        command = controller if host == f"{lab}-ctl" else f"systemctl is-active {worker_units}"
        subprocess.run(
            [
                "ssh",
                "-i",
                str(key),
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "LogLevel=ERROR",
                f"root@{addresses[host]}",
                command,
            ],
            capture_output=True,
            check=False,
            timeout=60,
        )

    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        with ThreadPoolExecutor(len(addresses)) as pool:
            list(pool.map(read, addresses))
        best = min(best, time.perf_counter() - started)
    return best


def floor_row(step: str, seconds: float, hosts: int) -> dict[str, Any]:
    return {
        "step": step,
        "wall_s": round(seconds, 1),
        "duration_s": "",
        "changed": "",
        "hosts_touched": hosts,
        "tasks": "",
        "slowest": [],
    }


def table(rows: list[dict[str, Any]]) -> str:
    columns = ["step", "wall s", "operation s", "changes", "hosts touched", "tasks"]
    lines = [markdown.header([*columns, "slowest tasks (s)"], text={"step", "slowest tasks (s)"})]
    for step in rows:
        lines.append(
            markdown.row(
                step["step"],
                step["wall_s"],
                step["duration_s"],
                step["changed"],
                step["hosts_touched"],
                step["tasks"],
                markdown.slowest_tasks_cell(step["slowest"]),
            )
        )
    return "\n".join(lines)


def deployed(lab: str, codename: str) -> list[dict[str, Any]]:
    """A lab of 1 controller + 3 workers deployed, and the unchanged re-run: their rows."""
    wall = driver("lab", "up", "--name", lab, "--workers", "3", "--distro", codename)
    return [
        {
            "step": "deploy, 3 workers (wall: lab up with its hosts' start)",
            **figures(lab, "deploy", wall),
        },
        {"step": "deploy again (no-op)", **operation(lab, "deploy")},
    ]


def deploy_against_its_floor(codename: str, keep: bool, json_path: str | None) -> None:
    """The deploy and, in the same run, its floor: the deploy as a multiple of the floor."""
    try:
        rows = deployed("bench", codename)
        rows.insert(
            1,
            floor_row(
                "floor: every member's packages at once, fresh hosts",
                deploy_floor("bench", codename, 3),
                4,
            ),
        )
    finally:
        if not keep:
            lab_hosts.down("bench")
    print(table(rows))
    print(f"\ndeploy / its floor: {rows[0]['duration_s'] / rows[1]['wall_s']:.2f}")
    if json_path:
        Path(json_path).write_text(json.dumps(rows, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distro", default="bookworm")
    parser.add_argument("--keep", action="store_true", help="leave the labs running")
    parser.add_argument("--json", help="also write the measurements here")
    parser.add_argument(
        "--deploy-only", action="store_true", help="the deploy, its re-run and its floor alone"
    )
    args = parser.parse_args()
    if args.deploy_only:
        deploy_against_its_floor(args.distro, args.keep, args.json)
        return
    rows: list[dict[str, Any]] = []
    floor_s = 0.0
    try:
        rows += deployed("bench", args.distro)
        rows.append({"step": "status, 3 workers", **operation("bench", "status")})
        rows.append(
            floor_row("floor: one SSH read per member at once, 3 workers", read_floor("bench"), 4)
        )
        for index in range(4, 8):
            host = f"bench-w{index:02d}"
            driver("lab", "add-host", host, "--name", "bench")
            row = operation("bench", "add_worker", host)
            rows.append({"step": f"add_worker with {index - 1} existing workers", **row})
            if index == 6:
                rows.append({"step": "status, 6 workers", **operation("bench", "status")})
                rows.append(
                    floor_row(
                        "floor: one SSH read per member at once, 6 workers", read_floor("bench"), 7
                    )
                )
        rows.append(
            {"step": "add_worker again, same request", **operation("bench", "add_worker", host)}
        )
        floor_s = floor("bench", host, worker_packages(args.distro))
        rows.append(
            floor_row("floor: packages and slurmd start alone, until schedulable", floor_s, 1)
        )
        driver("lab", "up", "--name", "benchone", "--workers", "1", "--distro", args.distro)
        driver("lab", "add-host", "benchone-w02", "--name", "benchone")
        rows.append(
            {
                "step": "add_worker with 1 existing worker (second lab)",
                **operation("benchone", "add_worker", "benchone-w02"),
            }
        )
        # last, so that the daemons the packages' postinsts start load nothing timed; shown
        # beside the deploy
        rows.insert(
            1,
            floor_row(
                "floor: every member's packages at once, fresh hosts",
                deploy_floor("bench", args.distro, 3),
                4,
            ),
        )
    finally:
        if not args.keep:
            for lab in ("bench", "benchone"):
                lab_hosts.down(lab)
    print(table(rows))
    one = next(r for r in rows if r["step"].startswith("add_worker with 1 existing"))
    six = next(r for r in rows if r["step"].startswith("add_worker with 6 existing"))
    print(
        f"\nadd_worker, 6 existing / 1 existing: {six['duration_s'] / one['duration_s']:.2f} "
        f"(hosts touched {six['hosts_touched']} and {one['hosts_touched']}); "
        f"the floor ({floor_s:.1f} s) is {floor_s / six['duration_s']:.0%} of the add at 6 workers"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
