"""A lost controller's replacement from a backup, on the container lab, in one run.

For each storage model asked (the backup on the platform's mount, or fetched to the control
plane), deploys a lab (a controller and `--workers` separate workers), starts a job on a worker
that runs until released and one pending behind it, takes a backup, starts the new host, kills
the controller's container and sends replace_controller through `slurm-app-driver` called by
its full path with a minimal environment, as the platform calls it. Measures:

- the replacement's wall seconds and the run's duration;
- the job's interruption as the cluster sees it: from the kill to the new controller listing
  the job RUNNING again (the job itself never stops: its worker keeps it);
- once released, how long the job's end takes to reach the new controller's accounting.

Usage: python -m bench.replace_controller [--distro trixie] [--workers 2]
       [--storage platform_mount allocation_local] [--keep]
The lab is named `benchrc`; it is removed after each model unless --keep (the last one kept).
"""

import argparse
import json
import threading
import time
from typing import Any

from bench import markdown
from bench.member_operations import driver, on_host, result_of, slowest_tasks
from driver.lab import lab
from driver.lab.spec import lab_dir

LAB = "benchrc"
OLD, NEW = f"{LAB}-ctl", f"{LAB}-c2"
WORKER = f"{LAB}-w01"
RELEASE = "/tmp/release-bench-job"


def submit(script: str) -> str:
    command = f"cd /tmp && runuser -u labuser -- sbatch --parsable -o /dev/null {script}"
    return on_host(LAB, OLD, command).strip()


def seen_running(job: str, since: float, seen: dict[str, float]) -> None:
    """Polls the new host until its slurmctld lists the job RUNNING; the seconds since `since`."""
    container = lab.host_container(LAB, NEW)
    while "at" not in seen:
        answer = container.exec_run(["squeue", "-h", "-j", job, "-o", "%T"])
        if answer.exit_code == 0 and answer.output.decode().strip() == "RUNNING":
            seen["at"] = time.perf_counter() - since
        time.sleep(0.5)


def replacement(storage: str, distro: str, workers: int) -> dict[str, Any]:
    lab.down(LAB)
    up = driver(
        *("lab", "up", "--name", LAB, "--distro", distro, "--workers", str(workers)),
        *("--placement", "separate", "--storage", storage),
    )
    running = submit(f"-w {WORKER} --wrap 'until [ -e {RELEASE} ]; do sleep 1; done'")
    on_host(LAB, OLD, f"until squeue -h -j {running} -t R | grep -q .; do sleep 1; done")
    submit(f"-d afterok:{running} --wrap true")
    driver("lab", "op", "backup", "--name", LAB, "--format", "json")
    driver("lab", "add-host", NEW, "--name", LAB)
    killed = time.perf_counter()
    lab.host_container(LAB, OLD).kill()
    seen: dict[str, float] = {}
    poller = threading.Thread(target=seen_running, args=(running, killed, seen), daemon=True)
    poller.start()
    wall = driver(
        *("lab", "op", "replace_controller", "--name", LAB, "--target", OLD),
        *("--replacement", NEW, "--format", "json"),
    )
    poller.join(timeout=60)
    result = result_of(LAB, "replace_controller")
    released = time.perf_counter()
    on_host(LAB, WORKER, f"touch {RELEASE}")
    on_host(
        LAB,
        NEW,
        f"until sacct -n -X -j {running} -o State | grep -q COMPLETED; do sleep 0.5; done",
    )
    recorded = time.perf_counter() - released
    _, slowest = slowest_tasks(lab_dir(LAB) / "replace_controller-events.jsonl")
    return {
        "storage": storage,
        "workers": workers,
        "lab_up_s": round(up),
        "wall_s": round(wall, 1),
        "duration_s": result["duration_s"],
        "job_unseen_s": round(seen.get("at", float("nan")), 1),
        "end_recorded_s": round(recorded, 1),
        "restore": result["adapter_detail"]["restore"],
        "slowest": slowest,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distro", default="trixie", choices=["trixie", "bookworm"])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--storage",
        nargs="+",
        default=["platform_mount", "allocation_local"],
        choices=["platform_mount", "allocation_local"],
    )
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    rows = []
    try:
        for storage in args.storage:
            rows.append(replacement(storage, args.distro, args.workers))
            print(json.dumps(rows[-1]), flush=True)
            if not args.keep:
                lab.down(LAB)
    finally:
        if not args.keep:
            lab.down(LAB)
    columns = [
        "backup on",
        "workers",
        "replacement wall s",
        "run s",
        "job unseen s (kill to listed again)",
        "job end recorded s",
        "slowest tasks",
    ]
    print(markdown.header(columns, text={"backup on", "slowest tasks"}))
    for row in rows:
        print(
            markdown.row(
                row["storage"],
                row["workers"],
                row["wall_s"],
                row["duration_s"],
                row["job_unseen_s"],
                row["end_recorded_s"],
                markdown.slowest_tasks_cell(row["slowest"]),
            )
        )


if __name__ == "__main__":
    main()
