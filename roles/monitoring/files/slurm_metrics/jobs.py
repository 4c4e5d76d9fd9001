"""Jobs: how many are in each state, and how long the started ones waited."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import Histogram
from prometheus_client.core import Metric

from slurm_metrics import Snapshot, gauge

JOB_STATES = (
    "pending",
    "running",
    "suspended",
    "completing",
    "configuring",
    "completed",
    "failed",
    "cancelled",
    "timeout",
    "node_fail",
    "preempted",
    "out_of_memory",
)
# From seconds to days: a GPU queue waits minutes to hours.
WAIT_BUCKETS = (10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 43200, 86400, 172800)


class Metrics:
    def __init__(self) -> None:
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

    def update(self, snapshot: Snapshot) -> None:
        present = set()
        for job in snapshot.jobs:
            present.add(job["job_id"])
            # a job cancelled while pending has a start time but ran nowhere
            if job["job_id"] in self._waits_seen or not (job["start_time"] and job["node_list"]):
                continue
            if job["submit_time"] and job["start_time"] >= job["submit_time"]:
                self._waits.observe(job["start_time"] - job["submit_time"])
            self._waits_seen.add(job["job_id"])
        self._waits_seen &= present

    def collect(self, snapshot: Snapshot) -> Iterator[Metric]:
        jobs = dict.fromkeys(JOB_STATES, 0)
        waiting_on_others = 0
        for job in snapshot.jobs:
            state = str(job["state"] or "").lower()
            if state in jobs:
                jobs[state] += 1
            if state == "pending" and job["reason"] == "Dependency":
                waiting_on_others += 1
        for state, count in jobs.items():
            yield gauge(
                f"slurm_queue_{state}",
                f"Jobs {state} (ended ones while slurmctld still holds them, MinJobAge)",
                count,
            )
        yield gauge(
            "slurm_queue_pending_dependency",
            "Pending jobs waiting for another job (also counted in slurm_queue_pending)",
            waiting_on_others,
        )
        yield from self._waits.collect()
