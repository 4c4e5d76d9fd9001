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
active keep their own label and the rest are summed under `_other`, so the series stay bounded
however many users a cluster has.

The metrics are built per Slurm domain, one module each in slurm_metrics/ (nodes, jobs,
scheduler, accounts), installed beside this file; this file reads Slurm and serves them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from prometheus_client import REGISTRY, start_http_server
from prometheus_client.core import CounterMetricFamily, Metric
from slurm_metrics import Domain, Snapshot, accounts, gauge, jobs, nodes, scheduler
from slurm_readers.commands import slurm_command
from slurm_readers.jobs import slurm_jobs
from slurm_readers.nodes import slurm_node_usage, slurm_nodes
from slurm_readers.scheduler import slurm_scheduler
from slurm_readers.shares import SHARES_COMMAND, slurm_shares
from slurm_readers.versions import slurm_version

# argv, then the environment a slurm_command adds: its stdout
Runner = Callable[..., str]
T = TypeVar("T")


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
        self._lock = threading.Lock()
        self._snapshot: Snapshot | None = None
        self.failures = 0
        self.domains: tuple[Domain, ...] = (
            nodes.Metrics(),
            jobs.Metrics(),
            scheduler.Metrics(),
            accounts.Metrics(top),
        )

    def snapshot(self) -> Snapshot:
        # One reader at a time: scrapes that arrive during a collection wait for its result.
        with self._lock:
            now = self.clock()
            if self._snapshot is None or now - self._snapshot.taken_at >= self.cache_seconds:
                self._snapshot = self._read(now)
                if self._snapshot.up:
                    for domain in self.domains:
                        domain.update(self._snapshot)
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
                read_nodes = slurm_node_usage(nodes_output)
            else:  # a build without the JSON serializer: no GPU use in the text forms
                read_nodes = [{**n, "alloc_gpus": None} for n in slurm_nodes(nodes_output)]
            read_jobs = slurm_jobs(jobs_output, ended=True)
        except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError) as error:
            # A failed collection is a sample (slurm_up 0, the failures counted), never a
            # failed scrape: the exporter's own series and the last cause stay readable.
            self.failures += 1
            print(f"collection failed: {type(error).__name__}: {error}"[:500], file=sys.stderr)
            return Snapshot(up=False, seconds=time.perf_counter() - started, taken_at=now)
        figures = self._read_optional(["sdiag"], slurm_scheduler)
        shares = self._read_optional(SHARES_COMMAND, slurm_shares)
        return Snapshot(
            nodes=read_nodes,
            jobs=read_jobs,
            scheduler=figures,
            shares=shares,
            up=True,
            seconds=time.perf_counter() - started,
            taken_at=now,
        )

    def _read_optional(self, argv: list[str], read: Callable[[str], T]) -> T | None:
        """What only some series need (sdiag's figures; sshare's, which need accounting): a
        command that fails takes those series away, and the rest of the collection stands."""
        try:
            return read(self.run(argv))
        except (OSError, subprocess.SubprocessError) as error:
            print(f"{argv[0]} failed: {type(error).__name__}: {error}"[:500], file=sys.stderr)
            return None

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        yield gauge("slurm_up", "Whether Slurm answered the last collection", int(snap.up))
        yield gauge("slurm_exporter_collect_seconds", "Time the last collection took", snap.seconds)
        yield CounterMetricFamily(
            "slurm_exporter_collect_failures",
            "Collections that Slurm did not answer or that could not be read",
            value=self.failures,
        )
        if not snap.up:
            return
        for domain in self.domains:
            yield from domain.collect(snap)


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
