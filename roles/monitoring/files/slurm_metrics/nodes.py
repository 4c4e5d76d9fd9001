"""Nodes: how many count under each state, their CPUs and GPUs, and each node's own figures,
named as the community exporter (prometheus-slurm-exporter) names them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from slurm_readers.nodes import POWER_FLAGS

from slurm_metrics import Snapshot, gauge

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
# Nodes that take jobs: their unallocated CPUs and GPUs count as idle, the rest as other.
SCHEDULABLE = ("idle", "mix", "alloc")
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


# Per partition, as the community exporter names them (label partition): a node in several
# partitions counts in each.
PARTITION_CPUS = (
    ("allocated", "CPUs allocated in the partition"),
    ("idle", "CPUs of the partition that could take a job now"),
    ("other", "CPUs of the partition that take no job (drained, down, ...)"),
    ("total", "CPUs of the partition"),
)


def split(total: int | None, allocated: int | None, state: str) -> dict[str, int]:
    """A node's CPUs or GPUs as allocated, idle (a node that takes jobs) or other, and in all."""
    total, allocated = total or 0, allocated or 0
    spare = total - allocated
    takes_jobs = state in SCHEDULABLE
    return {
        "allocated": allocated,
        "idle": spare if takes_jobs else 0,
        "other": 0 if takes_jobs else spare,
        "total": total,
    }


class Metrics:
    def update(self, snapshot: Snapshot) -> None:
        pass

    def collect(self, snapshot: Snapshot) -> Iterator[Metric]:
        states = dict.fromkeys(NODE_STATES, 0)
        cpus = {"alloc": 0, "idle": 0, "other": 0}
        gpus = {"alloc": 0, "idle": 0, "other": 0}
        partitions: dict[str, dict[str, int]] = {}
        per_node = {
            name: GaugeMetricFamily(f"slurm_node_{name}", text, labels=["node", "status"])
            for name, text in PER_NODE
        }
        node_state_family = GaugeMetricFamily(
            "slurm_node_state", "1 for the state the node counts under", labels=["node", "state"]
        )
        for node in snapshot.nodes:
            state = node_state(node)
            states[state] += 1
            node_cpu = split(node["cpus"], node["alloc_cpus"], state)
            node_gpu = split(node["gpus"], node["alloc_gpus"], state)
            for sums, split_node in ((cpus, node_cpu), (gpus, node_gpu)):
                sums["alloc"] += split_node["allocated"]
                sums["idle"] += split_node["idle"]
                sums["other"] += split_node["other"]
            for partition in node.get("partitions") or []:
                sums = partitions.setdefault(partition, dict.fromkeys(node_cpu, 0))
                for part, value in node_cpu.items():
                    sums[part] += value
            node_state_family.add_metric([node["name"], state], 1)
            labels = [node["name"], str(node["state"])]
            figures = {
                "cpu_alloc": node_cpu["allocated"],
                "cpu_idle": node_cpu["idle"],
                "cpu_other": node_cpu["other"],
                "cpu_total": node_cpu["total"],
                "mem_alloc": node.get("alloc_memory"),
                "mem_total": node["real_memory"],
                "gpu_alloc": node["alloc_gpus"],
                "gpu_total": node_gpu["total"],
            }
            for name, value in figures.items():
                # unknown without --json (allocated memory and GPUs): no number, not 0
                if value is not None:
                    per_node[name].add_metric(labels, value)
        for state, count in states.items():
            yield gauge(f"slurm_nodes_{state}", f"Nodes counted as {state}", count)
        yield gauge("slurm_nodes_total", "Nodes in the cluster", len(snapshot.nodes))
        for kind, counts in (("cpus", cpus), ("gpus", gpus)):
            if kind == "gpus" and any(n["alloc_gpus"] is None for n in snapshot.nodes):
                continue  # unknown without --json: no number rather than a wrong one
            for part, value in counts.items():
                yield gauge(f"slurm_{kind}_{part}", f"{kind.upper()} {part}", value)
            total = sum(counts.values())
            yield gauge(f"slurm_{kind}_total", f"{kind.upper()} in the cluster", total)
            if kind == "gpus" and total:
                # the community exporter's ratio; a cluster without GPUs has none to divide by
                yield gauge(
                    "slurm_gpus_utilization",
                    "GPUs allocated, of the cluster's",
                    counts["alloc"] / total,
                )
        for part, text in PARTITION_CPUS:
            family = GaugeMetricFamily(f"slurm_partition_cpus_{part}", text, labels=["partition"])
            for partition, sums in sorted(partitions.items()):
                family.add_metric([partition], sums[part])
            yield family
        yield node_state_family
        yield from per_node.values()
