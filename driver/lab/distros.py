"""The Debian releases the lab builds images of; importable without the docker SDK."""

from dataclasses import dataclass

from driver.lab.errors import LabError


@dataclass(frozen=True)
class Distro:
    codename: str
    debian_version: str
    slurm_series: str
    extra_packages: tuple[str, ...] = ()


DISTROS = {
    "trixie": Distro("trixie", "13", "24.11"),
    "bookworm": Distro("bookworm", "12", "22.05", ("libpmix-dev",)),
}
DEFAULT_DISTRO = "trixie"


def distro(codename: str) -> Distro:
    try:
        return DISTROS[codename]
    except KeyError:
        raise LabError(f"unknown distro {codename!r}; choose one of {', '.join(DISTROS)}") from None
