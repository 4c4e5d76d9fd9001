"""An earlier release of the bundle, to deploy with its own driver in the lab (the upgrade's
end-to-end test and benchmark): its commit checked out with `git worktree`, installed with
`pip install --no-deps --target` beside a venv that gives it its dependencies, as the
platform keeps each published bundle. Cached by the commit."""

import subprocess
import tempfile
from pathlib import Path


def install_release(source: Path, commit: str, venv: Path, cache: Path) -> Path:
    """The release's install folder (`site/` holds its package and `site/bin` its console
    script); `venv` (its pip and its Python) provides the dependencies."""
    target = cache / commit
    if (target / "ok").is_file():
        return target
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder) / "tree"
        git = ["git", "-C", str(source), "worktree"]
        subprocess.run([*git, "add", "--detach", str(tree), commit], check=True)
        try:
            pip = [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check"]
            into = ["--quiet", "--no-deps", "--target", str(target / "site")]
            subprocess.run([*pip, *into, str(tree)], check=True)
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=True)
    (target / "ok").write_text(commit)
    return target


def release_command(release: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """How to call the release's driver by its full path: the argv start and the environment
    (its package found before the venv's own)."""
    return [str(release / "site" / "bin" / "slurm-app-driver")], {
        **env,
        "PYTHONPATH": str(release / "site"),
    }
