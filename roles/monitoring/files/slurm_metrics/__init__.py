"""The Slurm exporter's metrics, one module per Slurm domain: nodes, jobs, scheduler and
accounts (users, accounts, partitions). Each module's Metrics class turns the collection's
Snapshot into Prometheus families; a new domain is a new module here and one line in the
exporter's DOMAINS. Installed beside slurm_exporter.py and the readers (slurm_readers/)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric

# The community exporter's gauges whose names end in `_total`, kept so that its public
# dashboards read this one: the only names `promtool check metrics` flags. Every other gauge
# of this exporter ends otherwise, and its one counter in `_total`.
COMMUNITY_TOTAL_GAUGES = (
    "slurm_nodes_total",
    "slurm_cpus_total",
    "slurm_gpus_total",
    "slurm_node_cpu_total",
    "slurm_node_mem_total",
    "slurm_node_gpu_total",
    "slurm_partition_cpus_total",
    "slurm_scheduler_backfilled_jobs_since_start_total",
    "slurm_scheduler_backfilled_jobs_since_cycle_total",
    "slurm_scheduler_backfilled_heterogeneous_total",
)


@dataclass
class Snapshot:
    """What one collection read of Slurm; every scrape until the next one is served from it."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    # sdiag's figures; None where sdiag did not answer (the rest of the collection stands)
    scheduler: dict[str, float] | None = None
    # sshare's account rows; None where sshare did not answer (no accounting)
    shares: list[dict[str, Any]] | None = None
    up: bool = False
    seconds: float = 0.0
    taken_at: float = 0.0


class Domain(Protocol):
    def update(self, snapshot: Snapshot) -> None:
        """Once per collection that Slurm answered (what a domain counts across collections)."""

    def collect(self, snapshot: Snapshot) -> Iterator[Metric]:
        """At every scrape."""


def gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
