"""slurm_common's filters for slurm_files' entries: files of the control node placed in a
folder of the host, by their names (`slurm_placed`), and a Python package of slurm_common's
(the Slurm readers, the typed tasks), installed beside the code that imports it
(`slurm_package_placed`: the one place that knows where the packages are)."""

from pathlib import Path
from typing import Any

PACKAGES = Path(__file__).resolve().parent.parent / "files"
# What ships to hosts: a package's modules, not the declarations or tests beside them.
SHIPPED = ("slurm_readers", "slurm_tasks")


def slurm_placed(sources: list[str], folder: str) -> list[dict[str, Any]]:
    """Each source file as a slurm_files entry at folder/<its name>, in the sources' order."""
    return [{"path": f"{folder}/{Path(source).name}", "src": str(source)} for source in sources]


def slurm_package_placed(folder: str, package: str) -> list[dict[str, Any]]:
    """The folder folder/<package> and every module of the package in it, as slurm_files
    entries."""
    if package not in SHIPPED:
        raise ValueError(f"slurm_package_placed: {package!r} is not one of {', '.join(SHIPPED)}")
    modules = sorted(str(path) for path in (PACKAGES / package).glob("*.py"))
    return [
        {"path": f"{folder}/{package}", "state": "directory"},
        *slurm_placed(modules, f"{folder}/{package}"),
    ]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"slurm_placed": slurm_placed, "slurm_package_placed": slurm_package_placed}
