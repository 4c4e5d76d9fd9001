"""Eight operations at once from one driver host, on eight instances.

Deploys `--labs` same_node labs (one host each: controller and worker, monitoring on) through
the driver, then for each operation asked (`--operations`, default status and the deploy's
unchanged re-run): the operation on the first lab alone (`--repeat` times), then on every lab
at once. Each operation is a fresh `slurm-app-driver run REQUEST` process called by its full
path with a minimal environment, as the platform calls it. For each run: its wall seconds, its
exit code, the peak of its process tree's memory (the driver, ansible-runner, ansible-playbook
and its workers, sampled every --sample-s: the sum of proportional set sizes, so pages the
workers share with their parent count once, and the largest single process's RSS) and the CPU
seconds of the whole tree (user + system, reaped children included).

Usage: python -m bench.concurrent_operations [--labs 8] [--operations status deploy]
[--repeat 2] [--keep]. The labs are named `par1`..`parN`; removed at the end unless --keep.
"""

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil

from bench import markdown
from bench.member_operations import DRIVER, PLATFORM_ENV, driver
from driver.lab import lab as lab_hosts
from driver.lab import requests as lab_requests

MIB = 1024 * 1024


class TreeSampler(threading.Thread):
    """Samples a process and its descendants until it ends (or only the descendants:
    `with_root` false): peak PSS sum, peak single RSS."""

    def __init__(self, pid: int, every_s: float, with_root: bool = True) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.every_s = every_s
        self.with_root = with_root
        self.peak_pss = 0
        self.peak_rss = 0
        self.peak_processes = 0
        self.finished = threading.Event()

    def run(self) -> None:
        while not self.finished.is_set():
            with contextlib.suppress(psutil.NoSuchProcess):
                tree = [self.root] * self.with_root + self.root.children(recursive=True)
                pss = 0
                for process in tree:
                    with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                        memory = process.memory_full_info()
                        pss += memory.pss
                        self.peak_rss = max(self.peak_rss, memory.rss)
                self.peak_pss = max(self.peak_pss, pss)
                self.peak_processes = max(self.peak_processes, len(tree))
            self.finished.wait(self.every_s)


@contextlib.contextmanager
def children_sampled(every_s: float = 0.5) -> Iterator[TreeSampler]:
    """This process's descendants sampled while the block runs (a driver call through
    subprocess, say): the sampler's peaks once the block is done."""
    sampler = TreeSampler(os.getpid(), every_s, with_root=False)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.finished.set()
        sampler.join()


def run_measured(request: Path, every_s: float) -> dict[str, Any]:
    """One `slurm-app-driver run` as the platform calls it, its tree sampled; its CPU from
    wait4, which counts every descendant it reaped (Ansible reaps its workers)."""
    started = time.perf_counter()
    process = subprocess.Popen([str(DRIVER), "run", str(request)], env=PLATFORM_ENV,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    sampler = TreeSampler(process.pid, every_s)
    sampler.start()
    output = process.stdout.read() if process.stdout else b""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    sampler.finished.set()
    sampler.join()
    last = output.decode(errors="replace").strip().splitlines()[-1:]
    return {
        "wall_s": wall,
        "rc": process.returncode,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_pss_mib": sampler.peak_pss / MIB,
        "peak_rss_mib": sampler.peak_rss / MIB,
        "processes": sampler.peak_processes,
        "last_line": last[0][:300] if last else "",
    }


def at_once(requests: list[Path], every_s: float) -> tuple[float, list[dict[str, Any]]]:
    started = time.perf_counter()
    with ThreadPoolExecutor(len(requests)) as pool:
        runs = list(pool.map(lambda request: run_measured(request, every_s), requests))
    return time.perf_counter() - started, runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labs", type=int, default=8)
    parser.add_argument("--operations", nargs="+", default=["status", "deploy"])
    parser.add_argument("--distro", default="trixie")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--sample-s", type=float, default=0.2)
    parser.add_argument("--keep", action="store_true", help="leave the labs running")
    parser.add_argument("--json", help="also write the measurements here")
    args = parser.parse_args()
    labs = [f"par{index}" for index in range(1, args.labs + 1)]
    results: dict[str, Any] = {}
    cpu_before = psutil.cpu_times()
    try:
        for lab in labs:
            if not lab_requests.lab_dir(lab).joinpath("deploy-result.json").is_file():
                driver("lab", "up", "--name", lab, "--placement", "same_node",
                       "--distro", args.distro)  # fmt: skip
        cpu_before = psutil.cpu_times()
        for name in args.operations:
            requests = [lab_requests.operation_request(lab, name) for lab in labs]
            alone = [run_measured(requests[0], args.sample_s) for _ in range(args.repeat)]
            span, together = at_once(requests, args.sample_s)
            results[name] = {"alone": alone, "together": together, "span_s": span}
    finally:
        if not args.keep:
            for lab in labs:
                lab_hosts.down(lab)
    columns = ["operation", "run", "wall s", "exit", "CPU s", "peak PSS MiB (tree)",
               "largest process RSS MiB", "processes"]  # fmt: skip
    print(markdown.header(columns, text={"operation", "run"}))
    for name, measured in results.items():
        rows = [(f"alone #{i + 1}", run) for i, run in enumerate(measured["alone"])] + [
            (f"{len(labs)} at once, #{i + 1} by end", run)
            for i, run in enumerate(sorted(measured["together"], key=lambda r: r["wall_s"]))
        ]
        for label, run in rows:
            print(markdown.row(name, label, f"{run['wall_s']:.1f}", run["rc"],
                               f"{run['cpu_s']:.1f}", f"{run['peak_pss_mib']:.0f}",
                               f"{run['peak_rss_mib']:.0f}", run["processes"]))  # fmt: skip
    print()
    for name, measured in results.items():
        alone = statistics.median(run["wall_s"] for run in measured["alone"])
        slowest = max(run["wall_s"] for run in measured["together"])
        cpu = sum(run["cpu_s"] for run in measured["together"])
        failed = [run["last_line"] for run in measured["together"] if run["rc"] != 0]
        print(f"{name}: alone {alone:.1f} s; {len(labs)} at once: the last ended after "
              f"{slowest:.1f} s ({slowest / alone:.2f}x alone), {cpu:.0f} CPU s in their trees "
              f"over {measured['span_s']:.1f} s on {psutil.cpu_count()} cores "
              f"({cpu / measured['span_s'] / psutil.cpu_count():.0%} of the machine); "
              f"peak PSS per operation {max(r['peak_pss_mib'] for r in measured['together']):.0f}"
              f" MiB; failed: {failed or 'none'}")  # fmt: skip
    busy = psutil.cpu_times()
    print(
        f"machine CPU while measuring: user {busy.user - cpu_before.user:.0f} s, system "
        f"{busy.system - cpu_before.system:.0f} s, idle {busy.idle - cpu_before.idle:.0f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
