"""Large requests, generated from the shipped examples (used by the benchmarks and the tests)."""

import base64
import json
from pathlib import Path
from typing import Any

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _host_key(index: int) -> str:
    """An ed25519 public key in OpenSSH's wire format, one per host (the driver refuses two
    allocations with one key)."""
    blob = b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + index.to_bytes(32, "big")
    return f"ssh-ed25519 {base64.b64encode(blob).decode()}"


def add_worker_request(workers: int) -> dict[str, Any]:
    """The add_worker example on a cluster of `workers` ready workers (the example's own
    included), every one on its own allocation; the worker being added comes on top."""
    data: dict[str, Any] = json.loads(
        (EXAMPLES / "slurm-reference" / "add_worker.json").read_text()
    )
    existing = sum(m["component_key"] == "worker" for m in data["members"])
    for index in range(workers - existing):
        allocation_id = f"00000000-0000-4000-8000-{index:012d}"
        data["allocations"].append(
            {
                "id": allocation_id,
                "project_id": data["project_id"],
                "hostname": f"node-{index:05d}",
                "address": f"10.{1 + index // 62500}.{index // 250 % 250}.{1 + index % 250}",
                "ssh_user": "root",
                "ssh_port": 22,
                "cpus": 64,
                "memory_mb": 256000,
                "gpus": 0,
                "ssh_host_keys": [_host_key(index)],
            }
        )
        data["members"].append(
            {
                "member_id": f"worker-{index:05d}",
                "component_key": "worker",
                "allocation_id": allocation_id,
                "status": "ready",
            }
        )
    return data


def one_host_key_request(workers: int) -> dict[str, Any]:
    """add_worker_request with a plausible platform bug: every allocation carries the first
    one's SSH host key, so every allocation but the first is a finding."""
    data = add_worker_request(workers)
    key = data["allocations"][0]["ssh_host_keys"][0]
    for allocation in data["allocations"]:
        allocation["ssh_host_keys"] = [key]
    return data
