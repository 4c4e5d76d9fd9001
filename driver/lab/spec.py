"""What a lab is: its spec (hosts, distro, placement, storage, GPUs), names and folders."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from driver.catalog import instance_credentials_dir, state_dir
from driver.lab.distros import distro
from driver.lab.errors import LabError

if TYPE_CHECKING:  # the lab's hosts need docker, which neither the spec nor a request does
    from driver.lab.hosts import LabHost

LAB_PROJECT = "lab-project"
LAB_NAMESPACE = uuid.UUID("8a7d6f3e-52c1-4b8e-9f0a-3d2c1b0a9e8f")
LAB_USER = {"name": "labuser", "uid": 2000, "gid": 2000}
LAB_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
STORAGE_MODELS = ("allocation_local", "platform_mount")
# Where a platform_mount lab's storage volume is mounted on every host (the config's default).
LAB_MOUNT = "/workspace"


MAX_LAB_GPUS = 8
# the 24-worker bench (bench/large_lab.py) and its adds; every host is a container here
MAX_LAB_WORKERS = 32


@dataclass(frozen=True)
class LabSpec:
    name: str = "lab"
    workers: int = 2
    distro: str = "trixie"
    placement: str = "separate"
    # allocation_local, or platform_mount: one volume mounted at LAB_MOUNT on every host
    storage: str = "allocation_local"
    # what Open OnDemand's sessions start on the workers (the config's interactive_runtimes)
    interactive_runtimes: tuple[str, ...] = ()
    # GPU device files on each host that runs slurmd: the separate workers, or same_node's
    # controller (no GPU behind them: see add_host)
    gpus: int = 0

    def validate(self) -> None:
        if not LAB_NAME.fullmatch(self.name):
            raise LabError("lab name: 1-12 lower-case letters and digits, starting with a letter")
        distro(self.distro)
        if self.placement not in ("separate", "same_node"):
            raise LabError("placement: separate or same_node")
        if self.placement == "separate" and not 1 <= self.workers <= MAX_LAB_WORKERS:
            raise LabError(f"workers: 1 to {MAX_LAB_WORKERS} for separate placement")
        if self.storage not in STORAGE_MODELS:
            raise LabError(f"storage: {' or '.join(STORAGE_MODELS)}")
        if not 0 <= self.gpus <= MAX_LAB_GPUS:
            raise LabError(f"gpus: 0 to {MAX_LAB_GPUS}")

    @property
    def mount_path(self) -> str | None:
        return LAB_MOUNT if self.storage == "platform_mount" else None


def lab_dir(name: str) -> Path:
    return state_dir() / "labs" / name


def key_dir(name: str) -> Path:
    """The lab cluster's credentials folder, where the platform keeps an instance's:
    <credentials root>/<project>/<instance id>/ (the driver refuses files anywhere else)."""
    return instance_credentials_dir(
        LAB_PROJECT, uuid.UUID(lab_uuid(LabSpec(name=name), "instance"))
    )


def lab_uuid(spec: LabSpec, what: str) -> str:
    return str(uuid.uuid5(LAB_NAMESPACE, f"{spec.name}/{what}"))


def host_names(spec: LabSpec) -> list[str]:
    workers = (
        []
        if spec.placement == "same_node"
        else [f"{spec.name}-w{index:02d}" for index in range(1, spec.workers + 1)]
    )
    return [f"{spec.name}-ctl", *workers]


def host_gpus(spec: LabSpec, hosts: list[LabHost], host: LabHost) -> int:
    """The GPU device files `host` gets: the spec's on every host that runs slurmd."""
    runs_slurmd = spec.placement == "same_node" or host in hosts[1:]
    return spec.gpus if runs_slurmd else 0
