"""Slurm exporter: one collection's time and peak memory on large clusters.

Generates the answers the exporter reads for N nodes (`--json`) and M jobs (squeue's text
form) from the ones captured on real 22.05 and 24.11 daemons (tests/fixtures/slurm: every node
and job a copy of a captured record with a new name, state and numbers), then times what a
scrape costs the exporter: parsing both answers and producing every metric (the Slurm commands
themselves are not run).
Each measurement runs in a fresh process that reads the answers from files, so its peak RSS
is the exporter's with them.

Usage: python -m bench.slurm_exporter [--nodes 1000] [--jobs 10000] [--repeat 3]
"""

import argparse
import copy
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import markdown

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
NODE_STATES = {
    "22.05": [("idle", []), ("allocated", []), ("mixed", []), ("idle", ["DRAIN"]), ("down", [])],
    "24.11": [["IDLE"], ["ALLOCATED"], ["MIXED"], ["IDLE", "DRAIN"], ["DOWN", "NOT_RESPONDING"]],
}
JOB_STATES = ["RUNNING", "PENDING", "PENDING", "COMPLETED", "FAILED"]
USERS, ACCOUNTS = 500, 40


def answers(version: str, nodes: int, jobs: int) -> tuple[str, str, str]:
    """(nodes command, its answer, the squeue answer) for a cluster of this size."""
    folder = FIXTURES / version
    scontrol = (folder / "scontrol-nodes.json").is_file()
    node_file = folder / ("scontrol-nodes.json" if scontrol else "sinfo.json")
    node_answer = json.loads(node_file.read_text())
    template = node_answer["nodes"][0]
    node_answer["nodes"] = []
    for index in range(nodes):
        node = copy.deepcopy(template)
        state = NODE_STATES[version][index % len(NODE_STATES[version])]
        if scontrol:
            node["state"] = state
        else:
            node["state"], node["state_flags"] = state
        node.update(
            name=f"gpu-{index:05d}",
            cpus=128,
            alloc_cpus=64 if index % 5 in (1, 2) else 0,
            gres="gpu:h200:8(S:0-1)",
            gres_used="gpu:h200:4(IDX:0-3)" if index % 5 in (1, 2) else "gpu:h200:0(IDX:N/A)",
        )
        node_answer["nodes"].append(node)
    # squeue's text form, as the exporter asks it (-t all): the captured line, renumbered,
    # spread over USERS users in ACCOUNTS accounts (the per-user series are bounded to --top)
    captured = (folder / "jobs.txt").read_text()
    # the running job ("long"), not the pending one under a 1,000-character hostile name
    sys.path.insert(0, str(ROOT / "roles/slurm_common/files"))
    from slurm_readers.commands import text_rows

    rows = text_rows(captured, "jobs")
    template = next(row for row in rows if row[-1] == "long")
    separator = re.search(r"\|[0-9a-f]{24}\|", captured).group()
    lines = []
    for index in range(jobs):
        template[0], template[1] = str(index + 1), JOB_STATES[index % len(JOB_STATES)]
        template[2], template[3] = f"user{index % USERS:04d}", f"acct{index % ACCOUNTS:02d}"
        lines.append(separator.join(template))
    job_answer = "\n".join(lines) + "\n"
    command = "scontrol show nodes --json" if scontrol else "sinfo --json"
    return command, json.dumps(node_answer), json.dumps(job_answer)


def measure_once(version: str, folder: Path) -> None:
    """In a fresh process: read the answers, then time one collection; prints JSON."""
    for path in ("roles/slurm_common/files", "roles/monitoring/files"):
        sys.path.insert(0, str(ROOT / path))
    import slurm_exporter

    command = (folder / "command").read_text()
    node_answer, job_answer = (folder / "nodes").read_text(), (folder / "jobs").read_text()
    # by the command's name: the jobs query's separator is new at each call
    replies = {command.split()[0]: node_answer, "squeue": job_answer}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    collector = slurm_exporter.SlurmCollector(
        (FIXTURES / version / "VERSION").read_text().strip(),
        run=lambda argv: replies[argv[0]],
    )
    started = time.perf_counter()
    samples = sum(len(family.samples) for family in collector.collect())
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "peak_mib": peak / 1024,
                "baseline_mib": before / 1024,
                "samples": samples,
                "answer_mib": (len(node_answer) + len(job_answer)) / 2**20,
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--once", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        measure_once(args.once[0], Path(args.once[1]))
        return
    columns = ["Slurm shape", "nodes", "jobs", "answers MiB", "collection s", "peak MiB"]
    print(markdown.header([*columns, "samples"], text={"Slurm shape"}))
    for version in ("22.05", "24.11"):
        runs = []
        with tempfile.TemporaryDirectory() as temporary:
            folder = Path(temporary)
            command, node_answer, job_answer = answers(version, args.nodes, args.jobs)
            (folder / "command").write_text(command)
            (folder / "nodes").write_text(node_answer)
            (folder / "jobs").write_text(job_answer)
            for _ in range(args.repeat):
                argv = [sys.executable, "-m", "bench.slurm_exporter", "--once", version, temporary]
                done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
                runs.append(json.loads(done.stdout))
        best = min(runs, key=lambda run: run["seconds"])
        print(
            markdown.row(
                version, f"{args.nodes:,}", f"{args.jobs:,}", f"{best['answer_mib']:.1f}",
                f"{best['seconds']:.3f}", f"{max(r['peak_mib'] for r in runs):.0f}",
                f"{best['samples']:,}",
            )
        )  # fmt: skip


if __name__ == "__main__":
    main()
