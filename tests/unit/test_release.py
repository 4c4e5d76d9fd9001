"""One version for the bundle, and a record of which commit each release is."""

import re
import subprocess
from importlib.metadata import version as installed_version

import yaml
from conftest import ROOT, console_script

from driver import __version__

CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
# "## 1.1.0 (unreleased)", "## 1.0" with "Commit <40 hex>" in its text
RELEASES = re.findall(r"^## (\S+)(.*?)(?=^## |\Z)", CHANGELOG, re.MULTILINE | re.DOTALL)


def _entries() -> dict[str, dict]:
    return {
        path.parent.name: yaml.safe_load(path.read_text())
        for path in (ROOT / "manifests").glob("*/manifest.yaml")
    }


def test_the_driver_the_package_and_every_catalog_entry_carry_one_version():
    assert installed_version("slurm-app-bundle") == __version__
    ran = console_script("--version", env={"PATH": "/usr/bin:/bin"})
    assert ran.stdout.split()[-1] == __version__
    for slug, entry in _entries().items():
        assert entry["versions"][-1]["version"] == __version__, slug
    assert RELEASES[0][0] == __version__


def test_every_release_names_its_commit_and_the_upgrade_test_starts_from_the_last():
    released = {name: re.search(r"Commit ([0-9a-f]{40})", text) for name, text in RELEASES[1:]}
    assert released and all(released.values()), released
    last = next(iter(released.values())).group(1)
    assert (ROOT / "tests" / "upgrade" / "FROM").read_text().strip() == last
    for commit in (m.group(1) for m in released.values()):
        found = subprocess.run(
            ["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"], check=False
        )
        assert found.returncode == 0, f"{commit} is not in this clone's history"


def test_each_version_upgrades_only_from_versions_the_changelog_names():
    for slug, entry in _entries().items():
        for version in entry["versions"]:
            for earlier in version.get("upgrade_from", []):
                assert re.search(rf"\b{slug} {re.escape(earlier)}\b", CHANGELOG), (slug, earlier)
