"""A worker's GPUs as gres: what nvidia-smi names and which device files exist."""

from __future__ import annotations

import re
from typing import Any

# Words in GPU model names that say nothing about the model.
_GPU_NAME_NOISE = {"nvidia", "tesla", "geforce", "quadro"}


def slurm_gpu_type(model: str) -> str:
    """A Slurm gres type from an NVIDIA model name, so users ask for --gres=gpu:h200:1:
    'NVIDIA H200' -> 'h200', 'NVIDIA A100-SXM4-80GB' -> 'a100', 'NVIDIA H100 80GB HBM3' ->
    'h100', 'NVIDIA RTX A6000' -> 'rtxa6000', 'NVIDIA GeForce RTX 4090' -> 'rtx4090'."""
    words = [w for w in re.split(r"\s+", model.strip().lower()) if w and w not in _GPU_NAME_NOISE]
    if not words:
        raise ValueError(f"not a GPU model name: {model!r}")
    first = words[0].split("-")[0]
    if first in ("rtx", "gtx") and len(words) > 1:
        first += words[1].split("-")[0]
    gres_type = re.sub(r"[^a-z0-9]", "", first)
    if not gres_type:
        raise ValueError(f"no gres type in GPU model name {model!r}")
    return gres_type


# What the worker asks nvidia-smi (after `nvidia-smi`, the path is the host's).
NVIDIA_SMI_QUERY = ["--query-gpu=index,name", "--format=csv,noheader"]


def slurm_gpu_query(nvidia_smi: str) -> list[str]:
    """The argv that asks this nvidia-smi what slurm_gpus reads."""
    return [nvidia_smi, *NVIDIA_SMI_QUERY]


# A GPU's device file, matched whole: the names come from a host whose root is the customer,
# and end up in the controller's gres.conf (`$` would let "/dev/nvidia0\n..." through).
GPU_DEVICE_FILE = re.compile(r"/dev/nvidia[0-9]{1,4}")


def slurm_gpus(query_csv: str, device_files: list[str]) -> dict[str, Any]:
    """The node's GPUs for gres, from `nvidia-smi NVIDIA_SMI_QUERY` (empty when nvidia-smi is
    missing) and the /dev/nvidiaN files found (any other name is ignored). The type is given
    only when nvidia-smi named every GPU and all are the same model; otherwise the count is
    untyped."""
    files = sorted(
        (f for f in device_files if GPU_DEVICE_FILE.fullmatch(f)),
        key=lambda f: int(f.removeprefix("/dev/nvidia")),
    )
    models = []
    for line in query_csv.splitlines():
        fields = [field.strip() for field in line.split(",", 1)]
        if len(fields) == 2 and fields[0].isdigit():
            models.append(fields[1])
    kinds = {slurm_gpu_type(model) for model in models}
    return {
        "count": len(files),
        "files": files,
        "models": models,
        "type": kinds.pop() if len(kinds) == 1 and len(models) == len(files) else None,
    }
