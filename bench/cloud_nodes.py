"""1,000 node definitions with no host, and 10,000 pending jobs, on a real slurmctld.

Deploys a lab of 1 controller and 1 worker through the driver, submits `--jobs` held jobs,
and measures in one run the cluster with the lab's nodes alone and with `--nodes` more nodes
that have no host (`State=CLOUD`, never resumed: power saving has no ResumeProgram here), put
in slurm.conf through a fragment of the controller's own (`95-bench.conf`, which every later
converge assembles with the bundle's fragments). slurmctld is restarted for each change of
the node definitions, and the two alternate for `--rounds` rounds of reads, so that the
machine's slow and fast minutes fall on both; each figure is the median over the rounds of
the median of `--repeat` runs:

- status, the driver's operation;
- the `queue` and `nodes` tasks, through `slurm-app-driver task` (one SSH exec) and on the
  controller itself (the command alone);
- one scrape of the Slurm exporter without its cache: a second instance of the installed
  exporter with `--cache-seconds 0` on another port, timed from the controller.

Then, once per definition set: `scontrol reconfigure` until slurmctld answers again, and an
add_worker of a fresh host (time, changes, hosts touched).

The jobs are held (`sbatch -H`), so no readiness job waits behind them; slurmctld's
MaxJobCount is raised in the same fragment (Slurm's default, 10,000, would refuse the
readiness jobs once the pending jobs fill it; a later line wins over slurm.conf's own, which a
platform's cluster sets with the config's `scheduler.max_job_count`).

Usage: python -m bench.cloud_nodes [--distro trixie] [--nodes 1000] [--jobs 10000]
[--repeat 3] [--rounds 3] [--keep]. The lab is named `cloud`; removed at the end unless --keep.
"""

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import markdown
from bench.job_tasks import time_on_host
from bench.member_operations import DRIVER, PLATFORM_ENV, driver, on_host, operation
from driver.lab import lab as lab_hosts
from driver.lab import requests as lab_requests
from driver.lab.lab import host_container

LAB = "cloud"
FRAGMENT = "/etc/slurm/slurm-app.d/slurm.conf.d/95-bench.conf"
UNCACHED_PORT = 9399

# Times a reconfigure on the controller until slurmctld answers again, and one uncached scrape
# of the exporter instance started on UNCACHED_PORT; prints seconds as JSON.
_RECONFIGURE = """
import json, subprocess, time
started = time.perf_counter()
subprocess.run(["scontrol", "reconfigure"], check=True, capture_output=True)
while subprocess.run(["scontrol", "ping"], capture_output=True, text=True).stdout.count("UP") < 1:
    time.sleep(0.05)
print(json.dumps(time.perf_counter() - started))
"""
_SCRAPE = """
import json, socket, sys, time, urllib.request
url = f"http://{socket.gethostbyname(socket.gethostname())}:{sys.argv[1]}/metrics"
for _ in range(100):
    try:
        urllib.request.urlopen(url, timeout=30).read()
        break
    except OSError:
        time.sleep(0.2)
seconds = []
for _ in range(int(sys.argv[2])):
    started = time.perf_counter()
    body = urllib.request.urlopen(url, timeout=30).read()
    seconds.append(time.perf_counter() - started)
print(json.dumps({"seconds": sorted(seconds), "bytes": len(body)}))
"""


def controller_python(script: str, *argv: str) -> Any:
    """`script` run by the controller's python3; its last line of output, as JSON."""
    ran = host_container(LAB, f"{LAB}-ctl").exec_run(["python3", "-c", script, *argv])
    assert ran.exit_code == 0, ran.output.decode()
    return json.loads(ran.output.decode().strip().splitlines()[-1])


def through_driver(task: str, repeat: int) -> list[float]:
    request = lab_requests.task_request(LAB, task)
    seconds = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([str(DRIVER), "task", str(request)], env=PLATFORM_ENV,
                       capture_output=True, check=True)  # fmt: skip
        seconds.append(time.perf_counter() - started)
    return sorted(seconds)


def restart_with(lines: list[str]) -> None:
    """The bench's fragment holds `lines`; slurm.conf assembled as the bundle does, slurmctld
    restarted (node definitions change only on a restart) until it answers."""
    text = "".join(f"{line}\\n" for line in lines)
    assemble = "cat /etc/slurm/slurm-app.d/slurm.conf.d/* > /etc/slurm/slurm.conf"
    restart = "systemctl restart slurmctld && until scontrol ping | grep -q UP; do sleep 0.2; done"
    # the lab's own nodes registered again (they are `unk` until their slurmd reports)
    nodes = f"sinfo -h -N -n '{LAB}-w[01-99]' -o %T"
    registered = f"until ! {nodes} | grep -qv '^idle$'; do sleep 0.2; done"
    on_host(
        LAB,
        f"{LAB}-ctl",
        f"printf '{text}' > {FRAGMENT} && {assemble} && {restart} && {registered}",
    )


def submit_held(jobs: int) -> float:
    started = time.perf_counter()
    submit = "sbatch -H -J held -o /dev/null --wrap true >/dev/null"
    on_host(
        LAB,
        f"{LAB}-ctl",
        f"runuser -u labuser -- bash -c 'for i in $(seq {jobs}); do {submit}; done'",
    )
    return time.perf_counter() - started


def reads(repeat: int) -> dict[str, Any]:
    """The reads, each the median of `repeat`: status, the tasks, an uncached scrape."""
    ctl = f"{LAB}-ctl"
    row: dict[str, Any] = {
        "nodes_defined": int(on_host(LAB, ctl, "sinfo -h -N -o %N | sort -u | wc -l")),
        "pending": int(on_host(LAB, ctl, "squeue -h -t PD -o %i | wc -l")),
        "status_s": statistics.median(
            operation(LAB, "status")["duration_s"] for _ in range(repeat)
        ),
    }
    for task in ("queue", "nodes"):
        row[f"{task}_driver_s"] = statistics.median(through_driver(task, repeat))
        row[f"{task}_host_s"] = statistics.median(
            time_on_host(LAB, ctl, {"task": task, "input": {}}, repeat)
        )
    on_host(LAB, ctl, "(nohup python3 /usr/local/lib/slurm-app-exporter/slurm_exporter.py "
            f"--address $(hostname -i) --port {UNCACHED_PORT} --cache-seconds 0 "
            ">/tmp/uncached.log 2>&1 &)")  # fmt: skip
    try:
        scrape = controller_python(_SCRAPE, str(UNCACHED_PORT), str(repeat))
    finally:
        on_host(LAB, ctl, f"pkill -f 'por[t] {UNCACHED_PORT}' || true")
    row["scrape_s"] = statistics.median(scrape["seconds"])
    row["scrape_kib"] = round(scrape["bytes"] / 1024)
    return row


def changes(repeat: int, new_host: str) -> dict[str, Any]:
    """What changes the cluster: reconfigures (median of `repeat`), then one add_worker."""
    reconfigure = statistics.median(controller_python(_RECONFIGURE) for _ in range(repeat))
    driver("lab", "add-host", new_host, "--name", LAB)
    added = operation(LAB, "add_worker", new_host)
    return {
        "reconfigure_s": reconfigure,
        "add_worker_s": added["duration_s"],
        "add_worker_changes": added["changed"],
        "add_worker_hosts": added["hosts_touched"],
    }


def merged(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from several rounds of reads: each time the median over the rounds."""
    return {
        key: statistics.median(r[key] for r in rounds) if key.endswith("_s") else rounds[-1][key]
        for key in rounds[0]
    }


COLUMNS = {
    "phase": "slurm.conf",
    "nodes_defined": "nodes",
    "pending": "pending jobs",
    "status_s": "status s",
    "queue_driver_s": "queue s (driver)",
    "queue_host_s": "queue s (host)",
    "nodes_driver_s": "nodes s (driver)",
    "nodes_host_s": "nodes s (host)",
    "scrape_s": "scrape s (uncached)",
    "scrape_kib": "scrape KiB",
    "reconfigure_s": "reconfigure s",
    "add_worker_s": "add_worker s",
    "add_worker_changes": "changes",
    "add_worker_hosts": "hosts touched",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distro", default="trixie")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="leave the lab running")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args()
    limit = [f"MaxJobCount={2 * args.jobs}"]
    # Each with an address of the benchmarking range (RFC 2544): a CLOUD node named without
    # one is resolved by name at every reconfigure, 5 tries a second apart, while slurmctld
    # answers nothing (24.11.5; measured: 10 s per node).
    cloud = [
        f"NodeName=cloud{index:04d} NodeAddr=198.18.{index // 256}.{index % 256} CPUs=8 "
        "RealMemory=64000 State=CLOUD"
        for index in range(1, args.nodes + 1)
    ]
    rows = []
    phases = {"the lab's nodes": limit, f"+ {args.nodes:,} CLOUD nodes": [*limit, *cloud]}
    try:
        driver("lab", "up", "--name", LAB, "--workers", "1", "--distro", args.distro)
        restart_with(limit)
        submitted = submit_held(args.jobs)
        # the phases alternate, so that the machine's slow and fast minutes fall on both
        measured: dict[str, list[dict[str, Any]]] = {phase: [] for phase in phases}
        for _ in range(args.rounds):
            for phase, lines in phases.items():
                restart_with(lines)
                measured[phase].append(reads(args.repeat))
        for index, (phase, lines) in enumerate(phases.items()):
            restart_with(lines)
            rows.append({"phase": phase, **merged(measured[phase]),
                         **changes(args.repeat, f"{LAB}-w{index + 2:02d}")})  # fmt: skip
    finally:
        if not args.keep:
            lab_hosts.down(LAB)
    print(markdown.header(list(COLUMNS.values()), text={"slurm.conf"}))
    for row in rows:
        print(markdown.row(*(
            f"{row[key]:.2f}" if isinstance(row[key], float) else row[key] for key in COLUMNS
        )))  # fmt: skip
    print(f"\n{args.jobs:,} held jobs submitted in {submitted:.0f} s; with / without the nodes: "
          + ", ".join(f"{COLUMNS[key]} {rows[1][key] / rows[0][key]:.2f}"
                      for key in COLUMNS if key.endswith("_s") and rows[0][key]))  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
