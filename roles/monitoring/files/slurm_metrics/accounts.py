"""Accounts: what the pending and running jobs of each user, account and partition hold or ask
for. Users and accounts are bounded to the `top` with the most pending and running jobs, the
rest summed under `_other` (no cluster user or account this bundle makes starts with `_`), so
the series stay bounded however many users a cluster has."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from slurm_metrics import Snapshot

OWNER_SERIES = (
    ("jobs_pending", "Pending jobs"),
    ("jobs_running", "Running jobs"),
    ("cpus_running", "CPUs held by running jobs"),
    ("gpus_running", "GPUs held by running jobs"),
    ("gpus_pending", "GPUs asked for by pending jobs"),
)
OTHERS = "_other"


class Metrics:
    def __init__(self, top: int = 20) -> None:
        self.top = top

    def update(self, snapshot: Snapshot) -> None:
        pass

    def collect(self, snapshot: Snapshot) -> Iterator[Metric]:
        """slurm_{user,account,partition}_{jobs,cpus,gpus}_*."""
        queued = [j for j in snapshot.jobs if j["state"] in ("PENDING", "RUNNING")]
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
