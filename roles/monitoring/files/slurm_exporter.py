#!/usr/bin/python3
"""Prometheus exporter for one Slurm cluster, run on its controller (default port 9341).

Why it exists: Debian packages no Slurm exporter, and the public ones parse Slurm's text
output or one openapi version's JSON, so they break when Slurm changes either. This one reads
Slurm with the bundle's own readers (slurm_readers/, installed beside this file): the readers
the roles and the driver use, tested against output captured from real 22.05 and 24.11
daemons. Nodes come from `--json` where the version answers it right (the text forms carry no
GPU use); jobs from squeue's text form, which lists the same records in every version at a
fraction of the JSON's parsing cost.

One collection serves every scrape for --cache-seconds (the scrape interval), so any number of
scrapers costs one set of Slurm calls per interval. It needs only python3 and Debian's
python3-prometheus-client, and runs as an unprivileged user: squeue, sinfo and scontrol
answer any user.

Names and labels follow the community exporter (prometheus-slurm-exporter) where the meaning
is the same, so its public dashboards work: slurm_nodes_<state> for each state by name,
slurm_cpus_*, slurm_gpus_*, slurm_node_{cpu,mem,gpu}_* per node (labels node and status),
slurm_scheduler_* from sdiag (its agent queue is slurm_scheduler_queue_size; pending jobs are
slurm_queue_pending), slurm_{user,account}_jobs_* .... Per user and per account, the --top most
active keep their own label and the rest are summed under `_other` (no cluster user or account
this bundle makes starts with `_`), so the series stay bounded however many users a cluster
has.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import REGISTRY, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from slurm_readers.commands import slurm_command
from slurm_readers.jobs import slurm_jobs
from slurm_readers.nodes import POWER_FLAGS, slurm_node_usage, slurm_nodes
from slurm_readers.scheduler import FIGURES, slurm_scheduler
from slurm_readers.versions import slurm_version

# argv, then the environment a slurm_command adds: its stdout
Runner = Callable[..., str]

# Every series exists from the first scrape, so dashboards and alerts never see a gap. The
# community exporter's states, and `other` for what none of them names (future, unknown).
NODE_STATES = (
    "alloc",
    "comp",
    "down",
    "drain",
    "err",
    "fail",
    "idle",
    "maint",
    "mix",
    "plnd",
    "resv",
    "other",
)
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
# Per user, account and partition: what their pending and running jobs hold or ask for.
OWNER_SERIES = (
    ("jobs_pending", "Pending jobs"),
    ("jobs_running", "Running jobs"),
    ("cpus_running", "CPUs held by running jobs"),
    ("gpus_running", "GPUs held by running jobs"),
    ("gpus_pending", "GPUs asked for by pending jobs"),
)
OTHERS = "_other"
# Per node, as the community exporter names them (labels node and status: sinfo's state word);
# memory in MB as Slurm counts it.
PER_NODE = (
    ("cpu_alloc", "CPUs allocated on the node"),
    ("cpu_idle", "CPUs of the node that could take a job now"),
    ("cpu_other", "CPUs of the node that take no job (drained, down, ...)"),
    ("cpu_total", "CPUs of the node"),
    ("mem_alloc", "Memory allocated on the node, MB"),
    ("mem_total", "Memory Slurm schedules on the node, MB"),
    ("gpu_alloc", "GPUs allocated on the node"),
    ("gpu_total", "GPUs of the node"),
)
# sdiag's figures; times in microseconds, as sdiag gives them.
SCHEDULER_HELP = {
    "threads": "Server threads (sdiag)",
    "queue_size": "Messages in slurmctld's agent queue (sdiag)",
    "dbd_queue_size": "Messages waiting for slurmdbd (sdiag)",
    "last_cycle": "The main scheduling loop's last cycle, microseconds (sdiag)",
    "mean_cycle": "The main scheduling loop's mean cycle, microseconds (sdiag)",
    "cycle_per_minute": "Main scheduling cycles per minute (sdiag)",
    "last_queue_length": "Jobs the main loop last looked at (sdiag)",
    "backfilled_jobs_since_start_total": "Jobs backfill started since slurmctld started (sdiag)",
    "backfilled_jobs_since_cycle_total": "Jobs backfill started since the stats reset (sdiag)",
    "backfilled_heterogeneous_total": "Heterogeneous job components backfill started (sdiag)",
    "backfill_cycles_total": "Backfill cycles since the statistics' reset (sdiag)",
    "backfill_last_cycle": "The backfill loop's last cycle, microseconds (sdiag)",
    "backfill_mean_cycle": "The backfill loop's mean cycle, microseconds (sdiag)",
    "backfill_last_depth": "Jobs the backfill loop last looked at (sdiag)",
    "backfill_depth_mean": "Jobs the backfill loop looks at, on average (sdiag)",
}
# From seconds to days: a GPU queue waits minutes to hours.
WAIT_BUCKETS = (10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 43200, 86400, 172800)


def run_command(
    argv: list[str], environment: dict[str, str] | None = None, timeout: float = 30
) -> str:
    """A command's stdout, with `environment` added (a slurm_command's: `**slurm_command()`)."""
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=True,
        timeout=timeout,
        env={**os.environ, **(environment or {})},
    ).stdout


# A flag that keeps a node from taking new jobs wins over its base state, in this order: an
# operator's drain first (a draining node that still runs jobs counts as drain, where the
# community exporter counts it alloc), then what is wrong with it, then what reserves it.
FLAG_STATES = (
    ("drain", "drain"),
    ("not_responding", "down"),
    ("fail", "fail"),
    ("maintenance", "maint"),
    ("reserved", "resv"),
    ("completing", "comp"),
    ("planned", "plnd"),
    # off under power saving, or a CLOUD node never resumed: no state of the community
    # exporter's names it, and its CPUs are not idle ones a job could have now
    *((flag, "other") for flag in POWER_FLAGS),
)
BASE_STATES = {
    "allocated": "alloc",
    "mixed": "mix",
    "idle": "idle",
    "fail": "fail",
    "error": "err",
    "completing": "comp",
}


def node_state(node: dict[str, Any]) -> str:
    """The one state of NODE_STATES a node counts under."""
    flags = node["flags"]
    if node["base_state"] == "down":
        return "drain" if "drain" in flags else "down"
    for flag, state in FLAG_STATES:
        if flag in flags:
            return state
    return BASE_STATES.get(node["base_state"], "other")


@dataclass
class Snapshot:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    # sdiag's figures; None where sdiag did not answer (the rest of the collection stands)
    scheduler: dict[str, float] | None = None
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
        top: int = 20,
    ) -> None:
        self.version = version
        self.run = run
        self.cache_seconds = cache_seconds
        self.clock = clock
        self.top = top
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self.failures = 0
        # Each job's wait is counted once, when a collection first sees it started; the ids
        # are forgotten when slurmctld forgets the job (MinJobAge). After a restart, the
        # started jobs slurmctld still holds are counted again, as a counter reset.
        self._waits = Histogram(
            "slurm_job_wait_seconds",
            "Seconds from submission to start, of the jobs seen starting",
            buckets=WAIT_BUCKETS,
            registry=None,
        )
        self._waits_seen: set[str] = set()

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
            nodes_output = self.run(**slurm_command("nodes", self.version))
            # Jobs in squeue's text form: 24.11's JSON carries ~5 KB per job, and parsing it
            # took 0.9 s of every collection at 10,000 jobs (bench/README.md); the text form
            # reads the same records in every version.
            jobs_output = self.run(**slurm_command("jobs", self.version, json=False, ended=True))
            if nodes_output.lstrip().startswith("{"):
                nodes = slurm_node_usage(nodes_output)
            else:  # a build without the JSON serializer: no GPU use in the text forms
                nodes = [{**n, "alloc_gpus": None} for n in slurm_nodes(nodes_output)]
            jobs = slurm_jobs(jobs_output, ended=True)
        except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as error:
            # A failed collection is a sample (slurm_up 0, the failures counted), never a
            # failed scrape: the exporter's own series and the last cause stay readable.
            self.failures += 1
            print(f"collection failed: {type(error).__name__}: {error}"[:500], file=sys.stderr)
            return Snapshot(up=False, seconds=time.perf_counter() - started, taken_at=now)
        self._count_waits(jobs)
        scheduler = self._read_scheduler()
        return Snapshot(nodes, jobs, scheduler, True, time.perf_counter() - started, now)

    def _read_scheduler(self) -> dict[str, float] | None:
        try:
            return slurm_scheduler(self.run(["sdiag"]))
        except (OSError, subprocess.SubprocessError) as error:
            print(f"sdiag failed: {type(error).__name__}: {error}"[:500], file=sys.stderr)
            return None

    def _count_waits(self, jobs: list[dict[str, Any]]) -> None:
        present = set()
        for job in jobs:
            present.add(job["job_id"])
            # a job cancelled while pending has a start time but ran nowhere
            if job["job_id"] in self._waits_seen or not (job["start_time"] and job["node_list"]):
                continue
            if job["submit_time"] and job["start_time"] >= job["submit_time"]:
                self._waits.observe(job["start_time"] - job["submit_time"])
            self._waits_seen.add(job["job_id"])
        self._waits_seen &= present

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        yield _gauge("slurm_up", "Whether Slurm answered the last collection", int(snap.up))
        yield _gauge(
            "slurm_exporter_collect_seconds", "Time the last collection took", snap.seconds
        )
        yield CounterMetricFamily(
            "slurm_exporter_collect_failures",
            "Collections that Slurm did not answer or that could not be read",
            value=self.failures,
        )
        if not snap.up:
            return
        states = {state: 0 for state in NODE_STATES}
        cpus = {"alloc": 0, "idle": 0, "other": 0}
        gpus = {"alloc": 0, "idle": 0, "other": 0}
        per_node = {
            name: GaugeMetricFamily(f"slurm_node_{name}", text, labels=["node", "status"])
            for name, text in PER_NODE
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
            labels = [node["name"], str(node["state"])]
            figures = {
                "cpu_alloc": alloc_cpus,
                "cpu_idle": total_cpus - alloc_cpus if spare == "idle" else 0,
                "cpu_other": total_cpus - alloc_cpus if spare == "other" else 0,
                "cpu_total": total_cpus,
                "mem_alloc": node.get("alloc_memory"),
                "mem_total": node["real_memory"],
                "gpu_alloc": node["alloc_gpus"],
                "gpu_total": total_gpus,
            }
            for name, value in figures.items():
                # unknown without --json (allocated memory and GPUs): no number, not 0
                if value is not None:
                    per_node[name].add_metric(labels, value)
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
        yield node_state_family
        yield from per_node.values()
        yield from self._owner_series(snap.jobs)
        yield from self._waits.collect()
        for name in FIGURES if snap.scheduler is not None else ():
            if name in snap.scheduler:
                yield _gauge(f"slurm_scheduler_{name}", SCHEDULER_HELP[name], snap.scheduler[name])

    def _owner_series(self, jobs: list[dict[str, Any]]) -> Iterator[Metric]:
        """slurm_{user,account,partition}_{jobs,cpus,gpus}_*: users and accounts bounded to
        the --top with the most pending and running jobs, the rest summed as _other."""
        queued = [j for j in jobs if j["state"] in ("PENDING", "RUNNING")]
        for owner, field_name, bounded in (
            ("user", "user", True),
            ("account", "account", True),
            ("partition", "partition", False),
        ):
            names = [str(j[field_name] or "") for j in queued]
            counts = Counter(names)
            kept = set(counts)
            if bounded and len(kept) > self.top:
                ranked = sorted(kept, key=lambda n: (-counts[n], n))
                kept = set(ranked[: self.top])
            totals: dict[str, dict[str, int]] = {}
            for job, name in zip(queued, names, strict=True):
                row = totals.setdefault(
                    name if name in kept else OTHERS,
                    dict.fromkeys((series for series, _ in OWNER_SERIES), 0),
                )
                if job["state"] == "PENDING":
                    row["jobs_pending"] += 1
                    row["gpus_pending"] += job["gpus"] or 0
                else:
                    row["jobs_running"] += 1
                    row["cpus_running"] += job["cpus"] or 0
                    row["gpus_running"] += job["gpus"] or 0
            for series, text in OWNER_SERIES:
                family = GaugeMetricFamily(
                    f"slurm_{owner}_{series}", f"{text}, by {owner}", labels=[owner]
                )
                for name, row in sorted(totals.items()):
                    family.add_metric([name], row[series])
                yield family


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # The unit passes the address Prometheus scrapes; alone, it answers this host only.
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9341)
    parser.add_argument("--cache-seconds", type=float, default=30.0)
    parser.add_argument(
        "--top", type=int, default=20, help="users and accounts with their own series"
    )
    args = parser.parse_args(argv)
    version = slurm_version(run_command(["sinfo", "-V"]))
    REGISTRY.register(SlurmCollector(version, cache_seconds=args.cache_seconds, top=args.top))
    start_http_server(args.port, addr=args.address)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
