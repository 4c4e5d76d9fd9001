"""The `nodes` task (the Nodes tab): each node's state, its CPUs, GPUs and memory, and how
much of them jobs hold."""

from __future__ import annotations

from typing import Any

from slurm_readers.commands import slurm_command
from slurm_readers.nodes import slurm_node_usage, slurm_nodes

from slurm_tasks import core


def task_nodes(config: dict[str, Any], request: dict[str, Any]) -> dict[str, Any]:
    answer = core.slurm(**slurm_command("nodes", config["version"]))
    if answer.lstrip().startswith("{"):
        nodes = slurm_node_usage(answer)
    else:  # a build without the JSON serializer: no GPU or memory use in the text form
        nodes = [{**n, "alloc_gpus": None, "alloc_memory": None} for n in slurm_nodes(answer)]
    return {
        "nodes": [
            {
                "hostname": node["name"],
                "state": node["state"],
                "cpus_total": node["cpus"],
                "cpus_alloc": node["alloc_cpus"],
                "gpus_total": node["gpus"],
                "gpus_alloc": node["alloc_gpus"],
                "memory_total_mb": node["real_memory"],
                "memory_alloc_mb": node["alloc_memory"],
                "partitions": node["partitions"],
                "reason": node["reason"],
            }
            for node in nodes
        ]
    }


TASKS = {"nodes": task_nodes}
