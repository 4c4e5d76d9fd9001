"""Accounts: what the pending, running and suspended jobs of each user, account and partition
hold or ask for, and each account's fair share. Users and accounts are bounded to the `top` with
the most queued jobs, the rest summed under `_other` (no cluster user or account this bundle
makes starts with `_`), so the series stay bounded however many users a cluster has."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from slurm_metrics import Snapshot

OWNER_SERIES = (
    ("jobs_pending", "Pending jobs"),
    ("jobs_running", "Running jobs"),
    ("jobs_suspended", "Suspended jobs"),
    ("cpus_pending", "CPUs asked for by pending jobs"),
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
        queued = [j for j in snapshot.jobs if j["state"] in ("PENDING", "RUNNING", "SUSPENDED")]
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
                    row["cpus_pending"] += job["cpus"] or 0
                    row["gpus_pending"] += job["gpus"] or 0
                elif job["state"] == "SUSPENDED":
                    # a suspended job's CPUs are released to others; it holds none
                    row["jobs_suspended"] += 1
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
        yield from self._shares(snapshot)

    def _shares(self, snapshot: Snapshot) -> Iterator[Metric]:
        """Each account's standing, where sshare answered (accounting on). Under Fair Tree
        (Slurm's default, and this bundle's) Slurm gives an account no fair-share factor, only
        its Level FS: slurm_account_fairshare then has no samples."""
        if snapshot.shares is None:
            return
        for series, field_name, text in (
            ("fairshare", "fairshare", "The account's fair-share factor (classic fair share)"),
            (
                "level_fairshare",
                "level_fs",
                "The account's Level FS under Fair Tree: its shares over its usage among its"
                " siblings (above 1: under-served; +Inf: no usage)",
            ),
        ):
            family = GaugeMetricFamily(f"slurm_account_{series}", text, labels=["account"])
            for row in snapshot.shares:
                if row[field_name] is not None:
                    family.add_metric([row["account"]], row[field_name])
            yield family
