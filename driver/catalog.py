"""Where the bundle's manifests, playbooks and roles live, and reading catalog entries."""

import os
from dataclasses import dataclass
from pathlib import Path
from uuid import UUID

from pydantic import ValidationError

from driver.documents import Document, DocumentError, load_path
from driver.models.manifest import CatalogEntry

MANIFEST_NAMES = ("manifest.yaml", "manifest.yml")


class CatalogError(Exception):
    """The bundle itself is broken (missing or invalid manifest): not the caller's fault."""


def bundle_root() -> Path:
    """Manifests, playbooks, roles and ansible.cfg: inside the installed package (a wheel
    carries them as driver/bundle), else the source tree the package sits in (pip install -e).
    SLURM_APP_BUNDLE points elsewhere for tests."""
    override = os.environ.get("SLURM_APP_BUNDLE")
    if override:
        root = Path(override)
    else:
        package = Path(__file__).resolve().parent
        installed = package / "bundle"
        root = installed if (installed / "manifests").is_dir() else package.parent
    if not (root / "manifests").is_dir():
        raise CatalogError(
            f"no manifests/ folder under {root}: install the bundle with pip (pip install .) "
            "or from its source tree (pip install -e .), or set SLURM_APP_BUNDLE"
        )
    return root


def state_dir() -> Path:
    """Where the driver keeps instance locks and lab files: never inside its installation."""
    override = os.environ.get("SLURM_APP_STATE_DIR")
    if override:
        return Path(override)
    if os.geteuid() == 0:
        return Path("/var/lib/slurm-app-driver")
    return Path.home() / ".local" / "state" / "slurm-app-driver"


def credentials_root() -> Path:
    """The only folder request credentials may name files in (SSH key, munge key,
    secrets_dir): the driver copies such files to hosts the customer controls."""
    override = os.environ.get("SLURM_APP_CREDENTIALS_ROOT")
    return Path(override) if override else state_dir() / "credentials"


def instance_credentials_dir(project_id: str, instance_id: UUID) -> Path:
    """The one folder an instance's request may name credential files in: a request can
    reach no other tenant's or instance's key, however the paths are spelled. The instance id
    is written canonically, so every spelling of one UUID names one folder."""
    return credentials_root() / project_id / str(instance_id)


def manifest_file(folder: Path) -> Path | None:
    return next((folder / n for n in MANIFEST_NAMES if (folder / n).is_file()), None)


@dataclass(frozen=True)
class LoadedEntry:
    document: Document
    entry: CatalogEntry


def load_entry(slug: str, manifests_dir: Path | None = None) -> LoadedEntry | None:
    """The catalog entry for `slug`, or None when the catalog has no such app."""
    folder = (manifests_dir or bundle_root() / "manifests") / slug
    path = manifest_file(folder) if folder.is_dir() else None
    if path is None:
        return None
    try:
        document = load_path(path)
        return LoadedEntry(document, CatalogEntry.model_validate(document.data))
    except (DocumentError, ValidationError) as exc:
        raise CatalogError(f"{path} is invalid; run `slurm-app-driver lint {path}`") from exc
