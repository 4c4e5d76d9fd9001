"""An earlier release of the bundle, to deploy with its own driver in the lab (the upgrade's
end-to-end test and benchmark): its commit checked out with `git worktree`, installed with
`pip install --no-deps --target` beside a venv that gives it its dependencies, as the
platform keeps each published bundle. Cached by the commit."""

import shutil
import subprocess
import tempfile
from pathlib import Path

from filelock import FileLock


def install_release(source: Path, commit: str, venv: Path, cache: Path) -> Path:
    """The release's install folder (`site/` holds its package and `site/bin` its console
    script); `venv` (its pip and its Python) provides the dependencies."""
    target = cache / commit
    cache.mkdir(parents=True, exist_ok=True)
    # Two tests (two xdist workers) may want the same release at once: one installs, the
    # other waits for it, never reading a half-written install.
    # The console script runs on the venv's Python: an install made for another venv (one
    # rebuilt since) is made again.
    made_for = f"{commit} {venv.resolve()}"
    with FileLock(str(cache / f"{commit}.lock")):
        done = target / "ok"
        if done.is_file() and done.read_text() == made_for and (venv / "bin" / "python").exists():
            return target
        shutil.rmtree(target, ignore_errors=True)
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
        done.write_text(made_for)
    return target


def release_command(release: Path, env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """How to call the release's driver by its full path: the argv start and the environment
    (its package found before the venv's own)."""
    return [str(release / "site" / "bin" / "slurm-app-driver")], {
        **env,
        "PYTHONPATH": str(release / "site"),
    }
