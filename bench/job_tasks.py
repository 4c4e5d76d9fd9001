"""Issue 49's typed tasks: `usage` over a month of a large cluster's accounting, and `job`,
`job_output` and `usage` end to end on a lab host.

Usage (recorded answers): 100,000 allocations over 30 days (200 users in 20 accounts, a
quarter on typed GPUs, some still running), printed as sacct prints the `usage` query with
SLURM_TIME_FORMAT=%s; the task command's answer_for runs in a fresh process on it (Slurm's own
time to print it is not in this figure). On a lab (`--lab NAME --job ID`): the installed
command on the host itself, timed there (python's start, the schema check, `scontrol show
config`, the Slurm queries, the read as the user), the median of `--repeat` runs.

    .venv/bin/python -m bench.job_tasks [--allocations 100000] [--days 30]
    .venv/bin/python -m bench.job_tasks --lab cfg --job 12 --user labuser --host cfg-ctl
"""

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import markdown
from bench.tasks import answer_in_process

ROOT = Path(__file__).resolve().parent.parent
DAY = 86400
SEPARATOR = "|0123456789abcdef01234567|"


def usage_answer(allocations: int, days: int, end: int, now: int) -> str:
    """`allocations` records as sacct prints the usage query, spread over `days` before `end`."""
    rng = random.Random(49)
    rows = []
    start = end - days * DAY
    for job_id in range(1, allocations + 1):
        user = rng.randrange(200)
        began = rng.randrange(start - DAY, end)
        ran = rng.randrange(60, 12 * 3600)
        ended = "Unknown" if began + ran > now else began + ran
        gpus = rng.choice((0, 0, 1, 2, 4, 8))
        tres = f"billing={gpus or 1},cpu={rng.choice((1, 2, 8, 32))},mem=4G,node=1"
        if gpus:
            kind = "h100" if job_id % 4 == 0 else None
            tres += f",gres/gpu={gpus}" + (f",gres/gpu:{kind}={gpus}" if kind else "")
        rows.append(SEPARATOR.join(
            (str(job_id), f"user{user:03d}", f"acct{user % 20:02d}", tres, str(began), str(ended))
        ))  # fmt: skip
    return "\n".join(rows) + "\n"


def measure_usage_once(folder: Path, days: int) -> None:
    """In a fresh process: the usage task's answer over the recorded answer; prints JSON."""
    answer = (folder / "sacct").read_text()

    def slurm(
        argv: list[str], user: str | None = None, stdin: str | None = None, **_: object
    ) -> str:
        if argv[:3] == ["scontrol", "show", "config"]:
            return "SLURM_VERSION = 24.11.5\nAccountingStorageType = accounting_storage/slurmdbd\n"
        return answer

    last = time.gmtime(time.time() - DAY)
    first = time.gmtime(time.time() - days * DAY)
    given = {"from": time.strftime("%Y-%m-%d", first), "to": time.strftime("%Y-%m-%d", last)}
    measured = answer_in_process("usage", given, folder, slurm)
    output = measured.pop("answer")["output"]
    print(json.dumps({**measured, "allocations": output["allocations"],
                      "accounts": len(output["accounts"])}))  # fmt: skip


def usage_table(allocations: int, days: int, repeat: int) -> None:
    import tempfile

    now = int(time.time())
    end = now // DAY * DAY
    print(markdown.header(["allocations in sacct's answer", "days", "counted", "accounts",
                           "answer KiB", "answer s (best)", "peak MiB"]))  # fmt: skip
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        (folder / "sacct").write_text(usage_answer(allocations, days, end, now))
        runs = []
        for _ in range(repeat):
            argv = [sys.executable, "-m", "bench.job_tasks", "--once", temporary, str(days)]
            done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
            runs.append(json.loads(done.stdout))
        best = min(runs, key=lambda run: run["seconds"])
        print(markdown.row(
            f"{allocations:,}", days, f"{best['allocations']:,}", best["accounts"],
            f"{best['answer_kib']:,.0f}", f"{best['seconds']:.3f}",
            f"{max(r['peak_mib'] for r in runs):.0f}",
        ))  # fmt: skip


# Runs the installed command `repeat` times on the host and prints each run's seconds.
_ON_HOST = """
import json, subprocess, sys, time
task, repeat = sys.argv[1], int(sys.argv[2])
seconds = []
for _ in range(repeat):
    started = time.perf_counter()
    done = subprocess.run(["/usr/local/libexec/slurm-app/task"], input=task, text=True,
                          capture_output=True)
    seconds.append(time.perf_counter() - started)
    assert done.returncode == 0, done.stdout + done.stderr
print(json.dumps(seconds))
"""


def time_on_host(lab: str, host: str, task: dict[str, Any], repeat: int) -> list[float]:
    """The installed task command run `repeat` times on the lab host itself (no SSH, no
    driver): each run's seconds, sorted."""
    from driver.lab import lab as lab_hosts

    ran = lab_hosts.host_container(lab, host).exec_run(
        ["python3", "-c", _ON_HOST, json.dumps(task), str(repeat)], workdir="/"
    )
    assert ran.exit_code == 0, ran.output.decode()
    return sorted(json.loads(ran.output.decode().strip().splitlines()[-1]))


def on_lab(lab: str, job: int, user: str, host: str, repeat: int) -> None:
    today = time.strftime("%Y-%m-%d", time.gmtime())
    month = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 29 * DAY))
    asked = (
        (f"{lab}-ctl", {"task": "job", "user": user, "input": {"job_id": job}}),
        (host, {"task": "job_output", "user": user, "input": {"job_id": job}}),
        (host, {"task": "job_output", "user": user, "input": {"job_id": job, "tail_kib": 1024}}),
        (f"{lab}-ctl", {"task": "usage", "input": {"from": month, "to": today}}),
    )
    print(markdown.header(["task on the host itself", "host", "median s", "max s"],
                          text={"task on the host itself", "host"}))  # fmt: skip
    for where, task in asked:
        seconds = time_on_host(lab, where, task, repeat)
        label = task["task"] + "".join(
            f" {k}={v}" for k, v in task["input"].items() if k not in ("job_id",)
        )
        print(markdown.row(label, where, f"{seconds[len(seconds) // 2]:.3f}", f"{seconds[-1]:.3f}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--allocations", type=int, default=100_000)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--lab")
    parser.add_argument("--job", type=int)
    parser.add_argument("--user", default="labuser")
    parser.add_argument("--host", help="the job's batch host (job_output runs there)")
    parser.add_argument("--once", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        measure_usage_once(Path(args.once[0]), int(args.once[1]))
    elif args.lab:
        on_lab(args.lab, args.job, args.user, args.host or f"{args.lab}-w01", args.repeat)
    else:
        usage_table(args.allocations, args.days, args.repeat)


if __name__ == "__main__":
    main()
