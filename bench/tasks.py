"""The Jobs and Nodes tabs' typed tasks: one answer's time and peak memory on a large cluster,
and the round trip through `slurm-app-driver task` on a lab.

On-host: the task command (roles/slurm_common/files/slurm_app_task.py) answers `queue`
(all jobs, and one user's) and `nodes` from Slurm answers for N nodes and M jobs built from
the records captured on real 22.05 and 24.11 daemons (bench.slurm_exporter's builder), each in
a fresh process (its peak RSS is the answer's); Slurm itself is not run.
With --lab NAME: `slurm-app-driver task` for queue and nodes on the lab's controller (one SSH
exec each, host key checked), median of --repeat runs.

Usage: python -m bench.tasks [--nodes 1000] [--jobs 10000] [--repeat 3] [--lab NAME]
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import markdown
from bench import slurm_exporter as exporter_bench

ROOT = exporter_bench.ROOT
ASKED = (("queue", {}), ("queue", {"user": "user0007"}), ("nodes", {}))


def answer_in_process(
    name: str, given: dict, folder: Path, slurm: Callable[..., str]
) -> dict[str, Any]:
    """The task command's answer to `name` with `given`, in this process, Slurm answered by
    `slurm`: {seconds, import_s, peak_mib, baseline_mib, answer_kib, answer}."""
    for path in ("roles/slurm_common/filter_plugins", "roles/slurm_common/files"):
        sys.path.insert(0, str(ROOT / path))
    imported = time.perf_counter()
    import slurm_app_task
    from slurm_tasks import core

    import_s = time.perf_counter() - imported
    core.slurm = slurm
    config = {
        "storage_mount": "",
        "users": [],
        "audit_log": str(folder / "audit.log"),
        "max_script_bytes": 1048576,
    }
    manifest = ROOT / "manifests" / "slurm-reference" / "manifest.yaml"
    import yaml

    tasks = {t["name"]: t for t in yaml.safe_load(manifest.read_text())["versions"][-1]["tasks"]}
    raw = json.dumps({"task": name, "input": given})
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    answer = slurm_app_task.answer_for(raw, config, tasks)
    text = json.dumps(answer)
    elapsed = time.perf_counter() - started
    assert answer["status"] == "ok", answer
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"seconds": elapsed, "import_s": import_s, "peak_mib": peak / 1024,
            "baseline_mib": before / 1024, "answer_kib": len(text) / 1024,
            "answer": answer}  # fmt: skip


def measure_once(version: str, folder: Path, name: str, given: dict) -> None:
    """In a fresh process: one answer from the answers in `folder`; prints JSON."""
    command = (folder / "command").read_text()
    slurm_version = (exporter_bench.FIXTURES / version / "VERSION").read_text().strip()
    replies = {
        command: (folder / "nodes").read_text(),
        "squeue": (folder / "jobs").read_text(),
        "scontrol show config": f"SLURM_VERSION = {slurm_version}\n"
        "AccountingStorageType = accounting_storage/slurmdbd\n",
    }

    def slurm(argv: list[str], user: str | None = None, stdin: str | None = None) -> str:
        return replies[argv[0]] if argv[0] == "squeue" else replies[" ".join(argv)]

    measured = answer_in_process(name, given, folder, slurm)
    del measured["answer"]
    print(json.dumps(measured))


def on_host(nodes: int, jobs: int, repeat: int) -> None:
    columns = ["Slurm shape", "task", "nodes", "jobs", "answer KiB", "answer s", "imports s"]
    print(markdown.header([*columns, "peak MiB"], text={"Slurm shape", "task"}))
    for version in ("22.05", "24.11"):
        with tempfile.TemporaryDirectory() as temporary:
            folder = Path(temporary)
            command, node_answer, job_answer = exporter_bench.answers(version, nodes, jobs)
            (folder / "command").write_text(command)
            (folder / "nodes").write_text(node_answer)
            (folder / "jobs").write_text(json.loads(job_answer))
            for name, given in ASKED:
                runs = []
                for _ in range(repeat):
                    argv = [sys.executable, "-m", "bench.tasks", "--once", version, temporary,
                            name, json.dumps(given)]  # fmt: skip
                    done = subprocess.run(
                        argv, capture_output=True, text=True, check=True, cwd=ROOT
                    )
                    runs.append(json.loads(done.stdout))
                best = min(runs, key=lambda run: run["seconds"])
                label = name + (
                    f" ({', '.join(f'{k}={v}' for k, v in given.items())})" if given else ""
                )
                print(
                    markdown.row(
                        version, label, f"{nodes:,}", f"{jobs:,}", f"{best['answer_kib']:,.0f}",
                        f"{best['seconds']:.3f}", f"{best['import_s']:.3f}",
                        f"{max(r['peak_mib'] for r in runs):.0f}",
                    )
                )  # fmt: skip


def through_driver(lab: str, repeat: int) -> None:
    from driver.lab import requests as lab_requests

    binary = Path(sys.executable).parent / "slurm-app-driver"
    through = "task through `slurm-app-driver task` (lab)"
    print(markdown.header([through, "median s", "min s"], text={through}))
    for name, given in (("queue", {}), ("nodes", {})):
        request = lab_requests.task_request(lab, name, None, given)
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run([str(binary), "task", str(request)], capture_output=True, check=True)
            times.append(time.perf_counter() - started)
        print(markdown.row(name, f"{statistics.median(times):.2f}", f"{min(times):.2f}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lab")
    parser.add_argument("--once", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        version, folder, name, given = args.once
        measure_once(version, Path(folder), name, json.loads(given))
    elif args.lab:
        through_driver(args.lab, args.repeat)
    else:
        on_host(args.nodes, args.jobs, args.repeat)


if __name__ == "__main__":
    main()
