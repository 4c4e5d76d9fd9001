"""slurm_common's slurm_files module on this machine's filesystem, as root: each kind of
entry made, left alone when it is as asked, reported in check mode without a change, and a
link at a file's path replaced, never followed."""

import base64
import os
import stat
from pathlib import Path

import pytest

from driver.role_code import role_code

slurm_files = role_code("slurm_common", "library", "slurm_files")

SCRIPT = b"#!/bin/sh\n"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="owners can be given as root only")


def entry(path: Path, **given) -> dict:
    """An entry as AnsibleModule hands it over, its defaults filled in."""
    made = {"path": str(path), "state": "file", "content": None, "content_b64": None}
    made |= {"target": None, "owner": "root", "group": "root", "mode": None, "diff": True}
    made |= {"keep": False}
    return made | given


def owner_mode(path: Path) -> tuple[int, int, int]:
    info = path.lstat()
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)


def test_makes_each_kind_then_finds_nothing_to_change(tmp_path: Path):
    folder = tmp_path / "a" / "b"
    entries = [
        entry(folder, state="directory", mode="0750"),
        entry(folder / "script", content_b64=base64.b64encode(SCRIPT).decode(), mode="0755"),
        entry(folder / "conf", content="x = 1\n"),
        entry(tmp_path / "link", state="link", target=str(folder / "script")),
    ]
    made = slurm_files.ensure(entries, check=False)
    assert made["changed_paths"] == [e["path"] for e in entries]
    assert owner_mode(folder) == (0, 0, 0o750)
    assert owner_mode(folder.parent) == (0, 0, 0o755)
    assert (folder / "script").read_bytes() == SCRIPT
    assert owner_mode(folder / "script") == (0, 0, 0o755)
    assert owner_mode(folder / "conf") == (0, 0, 0o644)
    assert str((tmp_path / "link").readlink()) == str(folder / "script")
    assert slurm_files.ensure(entries, check=False) == {
        "changed": False,
        "changed_paths": [],
        "diff": [],
    }


def test_check_mode_reports_and_changes_nothing(tmp_path: Path):
    (tmp_path / "conf").write_text("old\n")
    entries = [
        entry(tmp_path / "conf", content="new\n"),
        entry(tmp_path / "new" / "file", content="x\n"),
        entry(tmp_path / "gone", state="absent"),
    ]
    made = slurm_files.ensure(entries, check=True)
    assert made["changed_paths"] == [str(tmp_path / "conf"), str(tmp_path / "new" / "file")]
    assert made["diff"][0]["before"] == "old\n" and made["diff"][0]["after"] == "new\n"
    assert (tmp_path / "conf").read_text() == "old\n"
    assert not (tmp_path / "new").exists()


def test_a_link_at_a_files_path_is_replaced_not_followed(tmp_path: Path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    planted = tmp_path / "conf"
    planted.symlink_to(victim)
    slurm_files.ensure([entry(planted, content="ours\n")], check=False)
    assert victim.read_text() == "keep\n"
    assert not planted.is_symlink() and planted.read_text() == "ours\n"


def test_only_attributes_that_differ_are_a_change(tmp_path: Path):
    conf = tmp_path / "conf"
    conf.write_text("same\n")
    conf.chmod(0o600)
    made = slurm_files.ensure([entry(conf, content="same\n", mode="0644")], check=False)
    assert made["changed_paths"] == [str(conf)] and made["diff"] == []
    assert owner_mode(conf) == (0, 0, 0o644)


def test_absent_removes_a_folder_tree_and_a_link_without_its_target(tmp_path: Path):
    tree = tmp_path / "tree"
    (tree / "deep").mkdir(parents=True)
    (tree / "deep" / "file").write_text("x")
    target = tmp_path / "target"
    target.write_text("stays\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    made = slurm_files.ensure(
        [entry(tree, state="absent"), entry(link, state="absent")], check=False
    )
    assert made["changed_paths"] == [str(tree), str(link)]
    assert not tree.exists() and not link.is_symlink() and target.read_text() == "stays\n"


def test_a_secret_entry_shows_no_diff(tmp_path: Path):
    made = slurm_files.ensure([entry(tmp_path / "key", content="s3cret", diff=False)], check=True)
    assert made["changed_paths"] == [str(tmp_path / "key")] and made["diff"] == []


@pytest.mark.parametrize(
    ("unit_file_state", "active_state", "restart", "steps"),
    [
        ("enabled", "active", False, []),
        ("enabled", "active", True, ["restart"]),
        ("static", "inactive", False, ["start"]),
        ("disabled", "failed", False, ["enable", "start"]),
        ("masked", "inactive", False, ["unmask", "enable", "start"]),
        ("masked", "inactive", True, ["unmask", "enable", "restart"]),
        ("enabled", "reloading", False, []),
        ("enabled", "activating", False, ["start"]),
    ],
)
def test_a_unit_is_brought_up_as_systemd_service_would(
    unit_file_state, active_state, restart, steps
):
    """masked=false, enabled=true, and state restarted where this step changed a file (or the
    unit says restart), else started: the systemctl verbs for each state `systemctl show` gives.
    The deploys run them against real systemd in the container tests."""
    assert slurm_files.unit_steps(unit_file_state, active_state, restart) == steps


def test_a_kept_entry_is_made_where_nothing_is_and_left_where_something_is(tmp_path: Path):
    """keep: copy's force=false. Debian 12's PMIx link is made where the host has none; one
    already there (libpmix-dev's) stays as it is, whatever it points at."""
    made = tmp_path / "libpmix.so"
    kept = tmp_path / "other" / "libpmix.so"
    kept.parent.mkdir()
    kept.symlink_to("libpmix.so.2.9")
    entries = [
        entry(made, state="link", target="libpmix.so.2", keep=True),
        entry(kept, state="link", target="libpmix.so.2", keep=True),
    ]
    assert slurm_files.ensure(entries, check=False)["changed_paths"] == [str(made)]
    assert made.readlink() == Path("libpmix.so.2")
    assert kept.readlink() == Path("libpmix.so.2.9")
    assert slurm_files.ensure(entries, check=False)["changed"] is False
