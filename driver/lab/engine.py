"""The docker engine the lab and Molecule run on: installed and started when missing."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException
from filelock import FileLock

from driver.lab.errors import LabError

DOCKERD_LOG = Path("/var/log/slurm-app-lab-dockerd.log")


def machine_lock(name: str) -> FileLock:
    """One process of this machine at a time starts the engine or builds an image (parallel
    test workers, two `lab up` at once); the others wait, then find it done."""
    return FileLock(Path(tempfile.gettempdir()) / f"slurm-app-lab-{name}.lock")


def log(message: str) -> None:
    print(f"lab: {message}", file=sys.stderr, flush=True)


def _ping() -> Any | None:
    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except DockerException:
        return None


def _install_engine() -> None:
    """Debian's docker.io, as scripts/setup.sh would install it (root only)."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise LabError("the docker engine is not installed: run ./scripts/setup.sh as root")
    log("installing Debian's docker.io")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "docker.io", "debootstrap"],
    ):
        result = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
        if result.returncode != 0:
            raise LabError(f"{' '.join(argv)} failed: {result.stderr.strip()[-500:]}")


def _engine_path() -> str:
    """The caller's PATH and the system folders: Debian puts dockerd, and the iptables and
    runc it calls, in /usr/sbin, which a plain user's or a cron job's PATH lacks."""
    folders = os.environ.get("PATH", "").split(os.pathsep)
    system = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    return os.pathsep.join([f for f in folders if f] + [f for f in system if f not in folders])


def _start_dockerd() -> None:
    path = _engine_path()
    if shutil.which("dockerd", path=path) is None:
        _install_engine()
    dockerd = shutil.which("dockerd", path=path)
    if dockerd is None:
        raise LabError(f"dockerd is not in {path} after installing docker.io")
    if shutil.which("systemctl", path=path) and Path("/run/systemd/system").is_dir():
        subprocess.run(["systemctl", "start", "docker"], check=False, capture_output=True)
        return
    log(f"starting {dockerd} (log: {DOCKERD_LOG})")
    with DOCKERD_LOG.open("ab") as sink:
        subprocess.Popen(
            [dockerd],
            stdout=sink,
            stderr=sink,
            start_new_session=True,
            env={**os.environ, "PATH": path},
        )


def docker_client() -> Any:
    """A client for a running engine; starts dockerd when it is installed but not running."""
    client = _ping()
    if client is not None:
        return client
    with machine_lock("engine"):
        client = _ping()
        if client is not None:
            return client
        _start_dockerd()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            client = _ping()
            if client is not None:
                return client
            time.sleep(1)
    raise LabError(f"dockerd did not come up within 60 s; see {DOCKERD_LOG}")
