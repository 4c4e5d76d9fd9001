"""Systemd base images for the lab and Molecule, built from Debian's packages (no registry).

debootstrap a minimal Debian, pre-download (not install) the Slurm, MariaDB and Prometheus
packages so the roles' real `apt` installs run from the local cache, then `docker import`.
Images are cached by a tag that hashes the recipe, so a changed recipe builds a new image and an
unchanged one is reused.
"""

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from driver.lab.distros import DEFAULT_DISTRO, distro
from driver.lab.engine import docker_client, log, machine_lock
from driver.lab.errors import LabError

IMAGE_REPOSITORY = "slurm-app-lab"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "python3",
    "python3-apt",
    "sudo",
    "openssh-server",
    "iproute2",
    "procps",
    "ca-certificates",
)
# Fetched into /var/cache/apt/archives only: the roles install them for real.
PRELOADED_PACKAGES = (
    "munge",
    "slurmctld",
    "slurmd",
    "slurmdbd",
    "slurm-client",
    "mariadb-server",
    "prometheus",
    "prometheus-alertmanager",
    "prometheus-node-exporter",
    # the system bus node_exporter's systemd collector reads the units through
    "dbus",
    "python3-prometheus-client",
    "python3-jsonschema",
)


def image_tag(codename: str) -> str:
    recipe = "|".join((codename, MIRROR, *BASE_PACKAGES, "+", *_preloaded(codename), "r3"))
    digest = hashlib.sha256(recipe.encode()).hexdigest()[:10]
    return f"{IMAGE_REPOSITORY}:{codename}-{digest}"


def _preloaded(codename: str) -> tuple[str, ...]:
    return (*PRELOADED_PACKAGES, *distro(codename).extra_packages)


def _run(argv: list[str], what: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = (result.stdout + result.stderr).strip().splitlines()[-15:]
        raise LabError(f"{what} failed ({result.returncode}):\n" + "\n".join(tail))


def _prepare_rootfs(rootfs: Path, codename: str) -> None:
    # systemd creates a fresh machine-id per container when the file is empty.
    (rootfs / "etc/machine-id").write_text("")
    (rootfs / "etc/hostname").write_text("localhost\n")
    # No daemon may start inside the chroot while we pre-download.
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    _run(["chroot", str(rootfs), "apt-get", "update", "-qq"], "apt-get update in the image")
    _run(
        [
            "chroot",
            str(rootfs),
            "env",
            "DEBIAN_FRONTEND=noninteractive",
            "apt-get",
            "install",
            "-y",
            "-qq",
            "--download-only",
            "--no-install-recommends",
            *_preloaded(codename),
        ],
        "pre-downloading the Slurm and monitoring packages",
    )
    policy.unlink()
    # The roles' apt installs must keep the downloaded packages for the next container.
    (rootfs / "etc/apt/apt.conf.d/docker-clean").unlink(missing_ok=True)


def build_image(codename: str, *, force: bool = False) -> str:
    """Return the tag of the lab image for `codename`, building it when missing."""
    tag = image_tag(codename)
    client = docker_client()
    if not force and client.images.list(name=tag):
        return tag
    with machine_lock(f"image-{codename}"):
        if not force and client.images.list(name=tag):
            return tag
        _build(codename, tag)
    return tag


def _build(codename: str, tag: str) -> None:
    for tool in ("debootstrap", "chroot"):
        if shutil.which(tool) is None:
            raise LabError(f"{tool} is missing: run ./scripts/setup.sh (as root)")
    log(f"building image {tag} (debootstrap {codename}, about a minute)")
    with tempfile.TemporaryDirectory(prefix="slurm-app-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                codename,
                str(rootfs),
                MIRROR,
            ],
            f"debootstrap {codename}",
        )
        _prepare_rootfs(rootfs, codename)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(
            [
                "docker",
                "import",
                "-c",
                'CMD ["/lib/systemd/systemd"]',
                "-c",
                "ENV container=docker",
                "-",
                tag,
            ],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
            check=False,
        )
        tar.wait()
        if imported.returncode != 0 or tar.returncode != 0:
            raise LabError(f"docker import failed: {imported.stderr.strip()}")


if __name__ == "__main__":
    import sys

    print(build_image(sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DISTRO))
