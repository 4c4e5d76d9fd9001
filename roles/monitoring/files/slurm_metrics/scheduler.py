"""The scheduler: sdiag's figures (the exporter reads sdiag in each collection)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from slurm_readers.scheduler import FIGURES

from slurm_metrics import Snapshot, gauge

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
    "backfill_cycles": "Backfill cycles since the statistics' reset (sdiag)",
    "backfill_last_cycle": "The backfill loop's last cycle, microseconds (sdiag)",
    "backfill_mean_cycle": "The backfill loop's mean cycle, microseconds (sdiag)",
    "backfill_last_depth": "Jobs the backfill loop last looked at (sdiag)",
    "backfill_depth_mean": "Jobs the backfill loop looks at, on average (sdiag)",
}


class Metrics:
    def update(self, snapshot: Snapshot) -> None:
        pass

    def collect(self, snapshot: Snapshot) -> Iterator[Metric]:
        figures = snapshot.scheduler
        if figures is None:
            return
        for name in FIGURES:
            if name in figures:
                yield gauge(f"slurm_scheduler_{name}", SCHEDULER_HELP[name], figures[name])
