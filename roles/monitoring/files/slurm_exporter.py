#!/usr/bin/python3
"""Prometheus exporter for one Slurm cluster, run on its controller (default port 9341).

Why it exists: Debian packages no Slurm exporter, and the public ones parse Slurm's text
output or one openapi version's JSON, so they break when Slurm changes either. This one reads
Slurm with the bundle's own readers (slurm_output.py, installed beside this file): the readers
the roles and the driver use, tested against output captured from real 22.05 and 24.11
daemons. Nodes come from `--json` where the version answers it right (the text forms carry no
GPU use); jobs from squeue's text form, which lists the same records in every version at a
fraction of the JSON's parsing cost.

One collection serves every scrape for --cache-seconds (the scrape interval), so any number of
scrapers costs one set of Slurm calls per interval. It needs only python3 and Debian's
python3-prometheus-client, and runs as an unprivileged user: squeue, sinfo and scontrol
answer any user.
"""

from __future__ import annotations

import argparse
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import slurm_output
from prometheus_client import REGISTRY, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric

Runner = Callable[[list], str]

# Every series exists from the first scrape, so dashboards and alerts never see a gap.
NODE_STATES = ("alloc", "idle", "mix", "drain", "down", "other")
JOB_STATES = (
    "pending",
    "running",
    "suspended",
    "completing",
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "node_fail",
    "preempted",
    "out_of_memory",
)
# Nodes that take jobs: their unallocated CPUs and GPUs count as idle, the rest as other.
SCHEDULABLE = ("idle", "mix", "alloc")


def run_command(argv: list, timeout: float = 30) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=timeout).stdout


def node_state(node: dict[str, Any]) -> str:
    """The one state a node counts under: a drain wins, then down (or not responding)."""
    flags = node["flags"]
    if "drain" in flags:
        return "drain"
    if node["base_state"] in ("down", "fail") or "not_responding" in flags or "fail" in flags:
        return "down"
    return {"allocated": "alloc", "mixed": "mix", "idle": "idle"}.get(node["base_state"], "other")


@dataclass
class Snapshot:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    up: bool = False
    seconds: float = 0.0
    taken_at: float = 0.0


class SlurmCollector:
    """A prometheus_client collector; `run` runs one Slurm command and returns its stdout."""

    def __init__(
        self,
        version: str,
        run: Runner = run_command,
        cache_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.version = version
        self.run = run
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None

    def snapshot(self) -> Snapshot:
        # One reader at a time: scrapes that arrive during a collection wait for its result.
        with self._lock:
            now = self.clock()
            if self._snapshot is None or now - self._snapshot.taken_at >= self.cache_seconds:
                self._snapshot = self._read(now)
            return self._snapshot

    def _read(self, now: float) -> Snapshot:
        started = time.perf_counter()
        try:
            nodes_output = self.run(slurm_output.slurm_command("nodes", self.version))
            # Jobs in squeue's text form: 24.11's JSON carries ~5 KB per job, and parsing it
            # took 0.9 s of every collection at 10,000 jobs (bench/README.md); the text form
            # reads the same records in every version.
            jobs_output = self.run(
                slurm_output.slurm_command("jobs", self.version, json=False, ended=True)
            )
        except (OSError, subprocess.SubprocessError):
            return Snapshot(up=False, seconds=time.perf_counter() - started, taken_at=now)
        if nodes_output.lstrip().startswith("{"):
            nodes = slurm_output.slurm_node_usage(nodes_output)
        else:  # a build without the JSON serializer: no GPU use in the text forms
            nodes = [{**n, "alloc_gpus": None} for n in slurm_output.slurm_nodes(nodes_output)]
        jobs = slurm_output.slurm_jobs(jobs_output, ended=True)
        return Snapshot(nodes, jobs, True, time.perf_counter() - started, now)

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        yield _gauge("slurm_up", "Whether Slurm answered the last collection", int(snap.up))
        yield _gauge(
            "slurm_exporter_collect_seconds", "Time the last collection took", snap.seconds
        )
        if not snap.up:
            return
        states = {state: 0 for state in NODE_STATES}
        cpus = {"alloc": 0, "idle": 0, "other": 0}
        gpus = {"alloc": 0, "idle": 0, "other": 0}
        per_node = {
            name: GaugeMetricFamily(f"slurm_node_{name}", text, labels=["node"])
            for name, text in (
                ("cpus_alloc", "CPUs allocated on the node"),
                ("cpus_total", "CPUs of the node"),
                ("gpus_alloc", "GPUs allocated on the node"),
                ("gpus_total", "GPUs of the node"),
            )
        }
        node_state_family = GaugeMetricFamily(
            "slurm_node_state", "1 for the state the node counts under", labels=["node", "state"]
        )
        for node in snap.nodes:
            state = node_state(node)
            states[state] += 1
            total_cpus, alloc_cpus = node["cpus"] or 0, node["alloc_cpus"] or 0
            total_gpus, alloc_gpus = node["gpus"] or 0, node["alloc_gpus"] or 0
            spare = "idle" if state in SCHEDULABLE else "other"
            cpus["alloc"] += alloc_cpus
            cpus[spare] += total_cpus - alloc_cpus
            gpus["alloc"] += alloc_gpus
            gpus[spare] += total_gpus - alloc_gpus
            node_state_family.add_metric([node["name"], state], 1)
            per_node["cpus_alloc"].add_metric([node["name"]], alloc_cpus)
            per_node["cpus_total"].add_metric([node["name"]], total_cpus)
            if node["alloc_gpus"] is not None:
                per_node["gpus_alloc"].add_metric([node["name"]], alloc_gpus)
            per_node["gpus_total"].add_metric([node["name"]], total_gpus)
        for state, count in states.items():
            yield _gauge(f"slurm_nodes_{state}", f"Nodes counted as {state}", count)
        yield _gauge("slurm_nodes_total", "Nodes in the cluster", len(snap.nodes))
        for kind, counts in (("cpus", cpus), ("gpus", gpus)):
            if kind == "gpus" and any(n["alloc_gpus"] is None for n in snap.nodes):
                continue  # unknown without --json: no number rather than a wrong one
            for part, value in counts.items():
                yield _gauge(f"slurm_{kind}_{part}", f"{kind.upper()} {part}", value)
            yield _gauge(
                f"slurm_{kind}_total", f"{kind.upper()} in the cluster", sum(counts.values())
            )
        jobs = {state: 0 for state in JOB_STATES}
        for job in snap.jobs:
            state = str(job["state"] or "").lower()
            if state in jobs:
                jobs[state] += 1
        for state, count in jobs.items():
            yield _gauge(
                f"slurm_queue_{state}",
                f"Jobs {state} (ended ones while slurmctld still holds them, MinJobAge)",
                count,
            )
        yield _gauge(
            "slurm_scheduler_queue_size",
            "Pending jobs: the backlog the scheduler walks",
            jobs["pending"],
        )
        yield node_state_family
        yield from per_node.values()


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=9341)
    parser.add_argument("--cache-seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    version = slurm_output.slurm_version(run_command(["sinfo", "-V"]))
    REGISTRY.register(SlurmCollector(version, cache_seconds=args.cache_seconds))
    start_http_server(args.port, addr=args.address)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
