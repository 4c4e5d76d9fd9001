"""One version for the bundle, and a record of which commit each release is."""

import re
import subprocess
from importlib.metadata import version as installed_version

import yaml
from conftest import ROOT, console_script

from driver import __version__

CHANGELOG = (ROOT / "CHANGELOG.md").read_text()
# Keep a Changelog's headings: "## [1.1.0] - Unreleased", "## [1.0] - 2026-12-02" with
# "Commit <40 hex>" in its text
RELEASES = re.findall(r"^## \[([^]]+)\](.*?)(?=^## |\Z)", CHANGELOG, re.MULTILINE | re.DOTALL)


def _entries() -> dict[str, dict]:
    return {
        path.parent.name: yaml.safe_load(path.read_text())
        for path in (ROOT / "manifests").glob("*/manifest.yaml")
    }


def test_the_driver_the_package_and_every_catalog_entry_carry_one_version():
    assert installed_version("slurm-app-bundle") == __version__
    ran = console_script("--version", env={"PATH": "/usr/bin:/bin"})
    assert ran.stdout.split()[-1] == __version__
    # an entry may also carry a version that this bundle's roles serve with another Slurm
    # (slurm-reference 2.0.0: Slurm 26.05 from the site's source)
    for slug, entry in _entries().items():
        assert __version__ in [version["version"] for version in entry["versions"]], slug
    assert RELEASES[0][0] == __version__


def test_every_release_names_its_commit_and_the_upgrade_test_starts_from_the_last():
    assert RELEASES[0][1].startswith(" - Unreleased")
    # dated as Keep a Changelog dates them
    assert all(re.match(r" - \d{4}-\d{2}-\d{2}\n", text) for _, text in RELEASES[1:]), RELEASES
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


def test_what_an_upgrade_from_release_1_0_reports_keeps_its_contract():
    """A member of release 1.0 recorded no release: the upgrade's `from` is the version alone,
    and a run that stopped half-way names each member's versions as it found them."""
    from driver.apps.release import upgrade_detail
    from driver.details.common import ReleaseChange

    to = {"app_slug": "slurm-reference", "app_version": "1.1.0", "bundle_version": "1.1.0"}
    reported = {
        "slurm_app_upgrade": {
            "from": {"app_version": "1.0"},
            "to": to,
            "backup_id": "20261202T075641Z",
            "slurm_version_before": "24.11.5",
            "slurm_version": "24.11.5",
        },
        "slurm_app_release_found": {
            "u-ctl": {"app_version": "1.0", "slurm_version": "24.11.5"},
            "u-w01": {"app_version": "1.0", "slurm_version": "24.11.5"},
        },
        "slurm_app_releases": {"u-ctl": to},
    }
    change = ReleaseChange.model_validate(upgrade_detail(reported, "upgrade"))
    assert change.from_ is not None and change.from_.app_version == "1.0"
    assert change.from_.app_slug is None and change.completed
    dumped = change.model_dump(mode="json")
    assert dumped["from"] == {"app_slug": None, "app_version": "1.0", "bundle_version": None}
    assert dumped["members"]["u-w01"] == {"app_version": "1.1.0", "slurm_version": "24.11.5"}
    stopped = ReleaseChange.model_validate(
        upgrade_detail({"slurm_app_release_found": reported["slurm_app_release_found"]}, "upgrade")
    )
    assert not stopped.completed and stopped.members["u-w01"].app_version == "1.0"
