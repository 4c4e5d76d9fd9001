"""Nodes: the hardware slurmd finds, their state in slurmctld, and which of them take jobs."""

from __future__ import annotations

import re
from typing import Any

from .answers import integer, is_json, json_records, none_if_null
from .commands import text_rows

# What sinfo's %T prints for a drained node, by whether it still runs something.
_DRAIN_WORDS = {"drained": "idle", "draining": "allocated"}
# sinfo's state suffixes as the flags Slurm's JSON names (sinfo(1), NODE STATE CODES).
_SUFFIX_FLAGS = {
    "*": "not_responding",
    "~": "powered_down",
    "#": "powering_up",
    "%": "powering_down",
    "!": "power_down",
    "@": "reboot_requested",
    "^": "reboot_issued",
    "$": "maintenance",
    "-": "planned",
}
# A node off or on its way (power saving, a CLOUD node never resumed) is not the idle node it
# is to slurmctld: the state word says so, as sinfo's suffix does (the exporter reads these too).
POWER_FLAGS = ("powered_down", "powering_up", "powering_down")


def slurm_node_hardware(output: str) -> dict[str, Any]:
    """The first line of `slurmd -C` as the numbers a NodeName line needs."""
    fields = dict(
        pair.split("=", 1) for pair in output.strip().splitlines()[0].split() if "=" in pair
    )
    try:
        return {
            "name": fields["NodeName"],
            "cpus": int(fields["CPUs"]),
            "boards": int(fields.get("Boards", 1)),
            "sockets_per_board": int(fields["SocketsPerBoard"]),
            "cores_per_socket": int(fields["CoresPerSocket"]),
            "threads_per_core": int(fields["ThreadsPerCore"]),
            "real_memory": int(fields["RealMemory"]),
        }
    except (KeyError, ValueError) as error:
        raise ValueError(f"unexpected `slurmd -C` output: {output[:200]!r}") from error


def slurm_gres_gpus(gres: str | None) -> int:
    """GPUs in a gres string: 'gpu:h200:8(S:0-1),nic:2' -> 8; '' or '(null)' -> 0."""
    total = 0
    for item in re.split(r",(?![^(]*\))", gres or ""):
        parts = re.sub(r"\(.*\)$", "", item).split(":")
        if parts[0] == "gpu" and len(parts) > 1 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


def slurm_nodes(output: str) -> list[dict[str, Any]]:
    """One record per node: name, state (sinfo's word), base_state, flags, cpus, alloc_cpus,
    real_memory, gres, gpus, partitions, reason, reason_set_by (the user who drained it or
    set it down; JSON only), version (JSON only)."""
    if is_json(output):
        return [_node_from_json(node) for node in json_records(output, "nodes")]
    nodes: dict[str, dict[str, Any]] = {}
    for fields in text_rows(output, "nodes"):
        name, state, cpus, memory, gres, partition, reason = fields
        base, flags = _text_state(state)
        alloc, _idle, _other, total = (integer(n) for n in [*cpus.split("/"), "", "", ""][:4])
        node = nodes.setdefault(
            name,
            {
                "name": name,
                "state": _state_word(base, flags),
                "base_state": base,
                "flags": flags,
                "cpus": total,
                "alloc_cpus": alloc,
                "real_memory": integer(memory),
                "gres": none_if_null(gres),
                "gpus": slurm_gres_gpus(none_if_null(gres)),
                "partitions": [],
                "reason": none_if_null(reason),
                "reason_set_by": None,
                "version": None,
            },
        )
        # sinfo -N prints a node once per partition.
        node["partitions"].append(partition.rstrip("*"))
    return list(nodes.values())


def slurm_node_usage(output: str) -> list[dict[str, Any]]:
    """slurm_nodes' records of a `--json` answer, with `alloc_gpus` from each node's
    gres_used and `alloc_memory` (MB; the text forms carry neither)."""
    return [
        {
            **_node_from_json(node),
            "alloc_gpus": slurm_gres_gpus(none_if_null(node.get("gres_used"))),
            "alloc_memory": integer(node.get("alloc_memory")),
        }
        for node in json_records(output, "nodes")
    ]


def slurm_taking_jobs(nodes: list[dict[str, Any]], drain_ok: bool = False) -> list[str]:
    """Names of the nodes slurmctld schedules on now: responding, powered up, idle or running
    jobs. With drain_ok a drained node counts too (it is up; an operator's drain stays)."""
    key = "base_state" if drain_ok else "state"
    return [
        node["name"]
        for node in nodes
        if node[key] in ("idle", "mixed", "allocated")
        and not {"not_responding", *POWER_FLAGS} & set(node["flags"])
    ]


def _state_word(base: str, flags: list[str]) -> str:
    """The word sinfo's %T prints."""
    if "drain" in flags and base not in ("down",):
        return "draining" if base in ("allocated", "mixed") or "completing" in flags else "drained"
    power = next((flag for flag in POWER_FLAGS if flag in flags), None)
    if power is not None and base in ("idle", "allocated", "mixed"):
        return power
    if "completing" in flags and base == "idle":
        return "completing"
    return base


def _text_state(word: str) -> tuple[str, list[str]]:
    """sinfo's %T word: 'idle', 'drained', 'mixed+drain', 'idle*' (not responding), 'idle~'
    (powered down)."""
    stem = word.rstrip("".join(_SUFFIX_FLAGS))
    extra = [_SUFFIX_FLAGS[suffix] for suffix in word[len(stem) :]]
    word = stem.lower()
    if word in _DRAIN_WORDS:
        return _DRAIN_WORDS[word], ["drain", *extra]
    base, *flags = word.split("+")
    if base == "completing":
        return "allocated", ["completing", *extra]
    return base, [*flags, *extra]


def _node_from_json(node: dict[str, Any]) -> dict[str, Any]:
    state = node.get("state")
    if isinstance(state, list):  # 23.02+: ["IDLE", "DRAIN"]
        base = str(state[0]).lower() if state else "unknown"
        flags = [str(flag).lower() for flag in state[1:]]
    else:  # 22.05: "idle" plus state_flags ["DRAIN"]
        base = str(state).lower()
        flags = [str(flag).lower() for flag in node.get("state_flags") or []]
    gres = none_if_null(node.get("gres"))
    return {
        "name": node["name"],
        "state": _state_word(base, flags),
        "base_state": base,
        "flags": flags,
        "cpus": integer(node.get("cpus")),
        "alloc_cpus": integer(node.get("alloc_cpus")),
        "real_memory": integer(node.get("real_memory")),
        "gres": gres,
        "gpus": slurm_gres_gpus(gres),
        "partitions": list(node.get("partitions") or []),
        "reason": none_if_null(node.get("reason")),
        "reason_set_by": none_if_null(node.get("reason_set_by_user")),
        "version": node.get("version") or node.get("slurmd_version"),
    }
