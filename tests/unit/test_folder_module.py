"""slurm_common's slurm_folder module on this machine's filesystem, as root: the folders it
makes on the platform's mount, and the links and foreign folders a cluster user could plant
there, which it refuses without following them or changing anything (issue 44, 1). The lab
tests plant the same links on a real mount before a deploy, an add_worker and a
decommission."""

import os
import stat
from pathlib import Path

import pytest

from driver.role_code import role_code

slurm_folder = role_code("slurm_common", "library", "slurm_folder")

USER = 2001
OTHER = 2002
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="owners can be given as root only")


def _owner_mode(path: Path) -> tuple[int, int, int]:
    info = path.lstat()
    return info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)


@pytest.fixture
def mount(tmp_path: Path) -> Path:
    """A scratch mount: anyone may write its root, as platforms' scratch mounts often allow."""
    root = tmp_path / "workspace"
    root.mkdir()
    root.chmod(0o1777)
    return root


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """What a planted link points at: a root folder on the host's PATH, with a file in it."""
    folder = tmp_path / "usr-local-bin"
    folder.mkdir()
    (folder / "tool").write_text("#!/bin/sh\n")
    folder.chmod(0o755)
    return folder


def test_makes_the_base_root_s_and_the_users_folder_theirs(mount: Path):
    made = slurm_folder.ensure(str(mount), str(mount / "jobs" / "alice"), USER, USER, 0o700, False)
    assert made == {"changed": True, "created": [str(mount / "jobs"), str(mount / "jobs/alice")]}
    assert _owner_mode(mount / "jobs") == (0, 0, 0o755)
    assert _owner_mode(mount / "jobs" / "alice") == (USER, USER, 0o700)
    again = slurm_folder.ensure(str(mount), str(mount / "jobs" / "alice"), USER, USER, 0o700, False)
    assert again == {"changed": False, "created": []}


def test_an_own_folder_gets_its_mode_and_group_never_another_owner(mount: Path):
    home = mount / "alice"
    home.mkdir(mode=0o755)
    os.chown(home, USER, 0)
    home.chmod(0o755)
    done = slurm_folder.ensure(str(mount), str(home), USER, USER, 0o700, False)
    assert done["changed"] and _owner_mode(home) == (USER, USER, 0o700)


@pytest.mark.parametrize("where", ["base", "folder"])
def test_a_planted_link_is_refused_and_its_target_unchanged(mount: Path, target: Path, where):
    if where == "base":
        (mount / "jobs").symlink_to(target)
    else:
        (mount / "jobs").mkdir()
        (mount / "jobs").chmod(0o755)
        (mount / "jobs" / "alice").symlink_to(target)
    before = (_owner_mode(target), (target / "tool").read_text(), sorted(target.iterdir()))
    for check in (True, False):
        with pytest.raises(slurm_folder.Refused, match="symbolic link or not a folder"):
            slurm_folder.ensure(str(mount), str(mount / "jobs/alice"), USER, USER, 0o700, check)
    after = (_owner_mode(target), (target / "tool").read_text(), sorted(target.iterdir()))
    assert after == before


def test_a_base_a_user_made_is_refused_whatever_is_in_it(mount: Path, target: Path):
    """A user who made jobs/ before the deploy could swap what is in it at any time."""
    base = mount / "jobs"
    base.mkdir()
    os.chown(base, USER, USER)
    with pytest.raises(slurm_folder.Refused, match="not root's alone"):
        slurm_folder.ensure(str(mount), str(base / "alice"), USER, USER, 0o700, False)
    with pytest.raises(slurm_folder.Refused, match="belongs to uid 2001, not to uid 0"):
        slurm_folder.ensure(str(mount), str(base), 0, 0, 0o755, False)
    base.chmod(0o777)
    os.chown(base, 0, 0)
    with pytest.raises(slurm_folder.Refused, match=r"not root's alone \(uid 0, mode 0777\)"):
        slurm_folder.ensure(str(mount), str(base / "alice"), USER, USER, 0o700, True)
    assert _owner_mode(base) == (0, 0, 0o777) and not (base / "alice").exists()


def test_another_clusters_user_of_the_same_name_keeps_their_folder(mount: Path):
    """Two clusters on one mount: the second one's alice (another uid) never takes it."""
    slurm_folder.ensure(str(mount), str(mount / "jobs" / "alice"), OTHER, OTHER, 0o700, False)
    with pytest.raises(slurm_folder.Refused, match="belongs to uid 2002, not to uid 2001"):
        slurm_folder.ensure(str(mount), str(mount / "jobs" / "alice"), USER, USER, 0o700, False)
    assert _owner_mode(mount / "jobs" / "alice") == (OTHER, OTHER, 0o700)


def test_check_mode_changes_nothing(mount: Path):
    seen = slurm_folder.ensure(str(mount), str(mount / "jobs" / "alice"), USER, USER, 0o700, True)
    assert seen == {"changed": True, "created": [str(mount / "jobs")]}
    assert list(mount.iterdir()) == []


@pytest.mark.parametrize("path", ["/etc", "{root}", "{root}/../etc", "{root}/a/../../etc"])
def test_a_path_not_below_the_root_is_refused(mount: Path, path: str):
    with pytest.raises(slurm_folder.Refused, match="is not below"):
        slurm_folder.ensure(str(mount), path.format(root=mount), USER, USER, 0o700, True)
