"""slurm_common's filters for slurm_files' entries: files of the control node placed in a
folder of the host, by their names (`slurm_placed`), and the Slurm readers, which two roles
install beside the code that imports them (`slurm_readers_placed`: the one place that knows
where the readers are)."""

from pathlib import Path
from typing import Any

READERS = Path(__file__).resolve().parent.parent / "files" / "slurm_readers"


def slurm_placed(sources: list[str], folder: str) -> list[dict[str, Any]]:
    """Each source file as a slurm_files entry at folder/<its name>, in the sources' order."""
    return [{"path": f"{folder}/{Path(source).name}", "src": str(source)} for source in sources]


def slurm_readers_placed(folder: str) -> list[dict[str, Any]]:
    """The folder (folder/slurm_readers) and every reader module in it, as slurm_files
    entries."""
    return [
        {"path": f"{folder}/slurm_readers", "state": "directory"},
        *slurm_placed(sorted(str(p) for p in READERS.glob("*.py")), f"{folder}/slurm_readers"),
    ]


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"slurm_placed": slurm_placed, "slurm_readers_placed": slurm_readers_placed}
