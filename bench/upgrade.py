"""An upgrade from the last release against the cluster's size, and what it pauses, in one run.

For each size asked, deploys a lab (a controller and `--workers` separate workers) with the
last release's own driver (tests/upgrade/FROM, installed by driver.lab.releases beside this
venv), then upgrades it with this bundle's driver and rolls it back, both through
`slurm-app-driver` by its full path with a minimal environment. While each runs, a prober on
the controller asks `scontrol ping` every 0.2 s and submits a one-second job every 2 s.
Measures:

- the operation's wall seconds, its run's duration and changes, its slowest tasks;
- scheduling paused: the longest stretch in which slurmctld did not answer a ping, and their
  sum;
- the longest wait of a probe job from its submission to its start (sacct), which is what a
  user sees.

Usage: python -m bench.upgrade [--distro trixie] [--workers 2 6] [--keep]
The lab is named `benchup`; it is removed after each size unless --keep (the last one kept).
"""

import argparse
import datetime
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import markdown
from bench.member_operations import PLATFORM_ENV, ROOT, driver, on_host, result_of, slowest_tasks
from driver import __version__
from driver.lab import lab
from driver.lab.releases import install_release, release_command
from driver.lab.spec import LabSpec, lab_dir

LAB = "benchup"
RELEASE = (ROOT / "tests" / "upgrade" / "FROM").read_text().strip()


PROBE_JOB = ["runuser", "-u", "labuser", "--", "sbatch", "--parsable", "-o", "/dev/null"]


class Prober:
    """Pings slurmctld (`ping`) and submits a one-core probe job every `submit_every` seconds
    (`wrap` its command) on the lab's controller until stopped; `jobs` are the ids sbatch
    took (it refuses while slurmctld restarts). The upgrade e2e uses it too."""

    def __init__(
        self,
        lab_name: str = LAB,
        submit_every: float = 2.0,
        wrap: str = "sleep 1",
        ping: bool = True,
    ) -> None:
        self.lab_name = lab_name
        self.submit_every = submit_every
        self.wrap = wrap
        self.down: list[tuple[float, float]] = []
        self.jobs: list[str] = []
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=work, daemon=True)
            for work in ((self._ping, self._submit) if ping else (self._submit,))
        ]

    def __enter__(self) -> "Prober":
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _ping(self) -> None:
        container = lab.host_container(self.lab_name, f"{self.lab_name}-ctl")
        since = None
        while not self._stop.is_set():
            answer = container.exec_run(["scontrol", "ping"])
            up = answer.exit_code == 0 and b"is UP" in answer.output
            now = time.perf_counter()
            if not up and since is None:
                since = now
            elif up and since is not None:
                self.down.append((since, now))
                since = None
            time.sleep(0.2)
        if since is not None:
            self.down.append((since, time.perf_counter()))

    def _submit(self) -> None:
        container = lab.host_container(self.lab_name, f"{self.lab_name}-ctl")
        while not self._stop.wait(self.submit_every):
            answer = container.exec_run([*PROBE_JOB, "-t", "1", "-D", "/tmp", "--wrap", self.wrap])
            if answer.exit_code == 0:
                self.jobs.append(answer.output.decode().strip())


def start_waits(jobs: list[str], lab_name: str = LAB) -> tuple[list[float], int]:
    """Each probe job's seconds from submission to start, once they all ran; and how many
    slurmctld held after their launch failed (a node's prolog failing while its slurmd is
    between two Slurm versions), which are cancelled and left out."""
    ids = ",".join(jobs)
    controller = f"{lab_name}-ctl"
    # until every probe job ended, or waits held after a failed launch
    done = (
        f"until ! squeue -h -j {ids} -o '%i %r' 2>/dev/null | grep -v launch_failed | grep -q .; "
        "do sleep 1; done"
    )
    on_host(lab_name, controller, done)
    held = on_host(lab_name, controller, f"squeue -h -j {ids} -o %i 2>/dev/null || true").split()
    if held:
        on_host(lab_name, controller, f"scancel {' '.join(held)}")
    rows = on_host(lab_name, controller, f"sacct -n -X -P -j {ids} -o JobID,Submit,Start").split()
    waits = []
    for row in rows:
        job, submitted, started = row.split("|")
        if job not in held:
            start = datetime.datetime.fromisoformat(started)
            waits.append((start - datetime.datetime.fromisoformat(submitted)).total_seconds())
    return waits, len(held)


def operation(name: str, *options: str, lab_name: str = LAB) -> dict[str, Any]:
    """One operation on the lab with the prober running: its figures, and its result's."""
    with Prober(lab_name) as prober:
        wall = driver("lab", "op", name, "--name", lab_name, "--format", "json", *options)
    result = result_of(lab_name, name)
    _, slowest = slowest_tasks(lab_dir(lab_name) / f"{name}-events.jsonl")
    pauses = [end - start for start, end in prober.down]
    waits, held = start_waits(prober.jobs, lab_name) if prober.jobs else ([], 0)
    return {
        "wall_s": round(wall, 1),
        "duration_s": result["duration_s"],
        "changed": result["changed"],
        "paused_longest_s": round(max(pauses, default=0.0), 1),
        "paused_total_s": round(sum(pauses), 1),
        "probe_jobs": len(waits),
        "probe_jobs_held": held,
        "start_wait_max_s": max(waits, default=0.0),
        "slowest": slowest,
    }


def size(distro: str, workers: int, release: Path) -> dict[str, Any]:
    lab.down(LAB)
    path = lab.up(LabSpec(name=LAB, workers=workers, distro=distro, placement="separate"))
    request = json.loads(path.read_text())
    request["instance"]["version"] = "1.0"
    path.write_text(json.dumps(request))
    command, env = release_command(release, PLATFORM_ENV)
    started = time.perf_counter()
    subprocess.run([*command, "run", str(path)], env=env, capture_output=True, check=True)
    deployed = time.perf_counter() - started
    upgrade = operation("upgrade", "--option", f"to_version={__version__}")
    rollback = operation("rollback", "--option", "to_version=1.0")
    return {
        "workers": workers,
        "deploy_1_0_s": round(deployed, 1),
        "upgrade": upgrade,
        "rollback": rollback,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distro", default="trixie", choices=["trixie", "bookworm"])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    venv = Path(sys.executable).parent.parent
    release = install_release(ROOT, RELEASE, venv, ROOT / ".venv" / "release-install")
    rows = []
    try:
        for workers in args.workers:
            rows.append(size(args.distro, workers, release))
            print(json.dumps(rows[-1]), flush=True)
            if not args.keep:
                lab.down(LAB)
    finally:
        if not args.keep:
            lab.down(LAB)
    print_operations(rows, ["workers"], lambda row, _: [row["workers"]])


def print_operations(
    rows: list[dict[str, Any]],
    columns: list[str],
    cells: Callable[[dict[str, Any], str], list[Any]],
) -> None:
    """The table of each row's upgrade and rollback: `columns` (and their `cells` for a row
    and an operation) after the operation's name, then what operation() measured."""
    measured_columns = [
        "wall s",
        "run s",
        "changes",
        "slurmctld unanswered: longest s",
        "in all s",
        "probe jobs",
        "held after a failed launch",
        "longest start wait s",
        "slowest tasks",
    ]
    print(
        markdown.header(
            ["operation", *columns, *measured_columns], text={"operation", "slowest tasks"}
        )
    )
    for row in rows:
        for name in ("upgrade", "rollback"):
            measured = row[name]
            print(
                markdown.row(
                    name,
                    *cells(row, name),
                    measured["wall_s"],
                    measured["duration_s"],
                    measured["changed"],
                    measured["paused_longest_s"],
                    measured["paused_total_s"],
                    measured["probe_jobs"],
                    measured.get("probe_jobs_held", 0),
                    measured["start_wait_max_s"],
                    markdown.slowest_tasks_cell(measured["slowest"]),
                )
            )


if __name__ == "__main__":
    main()
