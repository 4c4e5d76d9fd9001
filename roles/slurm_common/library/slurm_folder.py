#!/usr/bin/python3
"""Ansible module: a folder below a trusted root, made or checked without following a link."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_folder
short_description: A folder below a trusted root, made or checked without following any link
description:
  - Walks from O(root) to O(path) one component at a time with C(O_NOFOLLOW), so that no
    symbolic link below O(root) is ever followed, by the walk or by what it changes; a cluster
    user who can write the platform's mount cannot plant C(jobs/alice -> /usr/local/bin) and
    have the deploy give the link's target to anyone.
  - A missing component is made by root (mode 0700) and only then given its owner and mode,
    through the open folder. Each folder between O(root) and O(path) must be root's and
    writable by root alone (otherwise what is in it could change under the walk); O(path)
    itself, when it exists, must belong to O(uid). Either refusal fails naming the path, with
    C(refusal=storage_conflict), before anything is changed there; the role's C(fail) task
    reports it.
  - O(path) is given O(gid) and O(mode) when they differ; its owner is never changed.
  - Supports check mode (reports what it would make and refuses what it would refuse).
options:
  root:
    description: The trusted folder (the platform's mount, C(/home)); it may be reached
      through links, nothing below it may.
    type: path
    required: true
  path:
    description: The folder, below O(root).
    type: path
    required: true
  uid:
    description: Its owner.
    type: int
    required: true
  gid:
    description: Its group.
    type: int
    required: true
  mode:
    description: Its mode, as an octal string.
    type: str
    required: true
  look_only:
    description: Change nothing whatever the run's mode, as in check mode (a guard that only
      asks what would be refused before any member changes).
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Make a user's folder on the platform's mount, following no link below it
  slurm_folder:
    root: /workspace
    path: /workspace/home/alice
    uid: 20001
    gid: 20001
    mode: "0700"
"""

RETURN = r"""
created:
  description: The folders it made (in check mode, the first it would make).
  type: list
  returned: always
refusal:
  description: C(storage_conflict) when the path was refused.
  type: str
  returned: failure
"""

import errno  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402
from pathlib import PurePosixPath  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

REFUSAL = "storage_conflict"
# Whatever else could write a folder on the way: a group's or anyone's write bit.
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


class Refused(Exception):
    pass


def components(root: str, path: str) -> list[str]:
    """The names from root down to path; a path not strictly below root is refused."""
    top, below = PurePosixPath(os.path.normpath(root)), PurePosixPath(os.path.normpath(path))
    if not below.is_absolute() or top not in below.parents:
        raise Refused(f"{below} is not below {top}")
    return list(below.relative_to(top).parts)


def open_below(parent: int, name: str, shown: str) -> int | None:
    """The folder `name` in `parent`, never through a link; None when it does not exist."""
    try:
        return os.open(
            name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent
        )
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(
                f"{shown} is a symbolic link or not a folder; it is never followed"
            ) from error
        raise


def ensure(root: str, path: str, uid: int, gid: int, mode: int, check: bool) -> dict:
    names = components(root, path)
    created: list[str] = []
    changed = False
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    shown = os.path.normpath(root)
    try:
        for index, name in enumerate(names):
            last = index == len(names) - 1
            shown = str(PurePosixPath(shown) / name)
            child = open_below(folder, name, shown)
            if child is None:
                if check:
                    return {"changed": True, "created": [shown]}
                try:
                    os.mkdir(name, 0o700, dir_fd=folder)
                except FileExistsError:  # made meanwhile by someone else: looked at as theirs
                    child = open_below(folder, name, shown)
                else:
                    child = open_below(folder, name, shown)
                    if child is not None and os.fstat(child).st_uid == 0:
                        created.append(shown)
                        changed = True
                        os.fchown(child, *((uid, gid) if last else (0, 0)))
                        os.fchmod(child, mode if last else 0o755)
                if child is None:
                    raise Refused(f"{shown} went away while it was made")
            os.close(folder)
            folder = child
            info = os.fstat(folder)
            if shown in created:
                continue
            if not last and (info.st_uid != 0 or info.st_mode & OTHERS_WRITE):
                raise Refused(
                    f"{shown} is not root's alone (uid {info.st_uid}, mode "
                    f"{stat.S_IMODE(info.st_mode):04o}): what is in it could change under the "
                    "run"
                )
            if last and info.st_uid != uid:
                raise Refused(f"{shown} belongs to uid {info.st_uid}, not to uid {uid}")
            if last and (info.st_gid != gid or stat.S_IMODE(info.st_mode) != mode):
                changed = True
                if not check:
                    os.fchown(folder, -1, gid)
                    os.fchmod(folder, mode)
    finally:
        os.close(folder)
    return {"changed": changed, "created": created}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "required": True},
            "path": {"type": "path", "required": True},
            "uid": {"type": "int", "required": True},
            "gid": {"type": "int", "required": True},
            "mode": {"type": "str", "required": True},
            "look_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        mode = int(params["mode"], 8)
    except ValueError:
        module.fail_json(msg=f"mode {params['mode']!r} is not an octal mode")
    try:
        result = ensure(
            params["root"],
            params["path"],
            params["uid"],
            params["gid"],
            mode,
            module.check_mode or params["look_only"],
        )
    except Refused as refused:
        module.fail_json(msg=str(refused), refusal=REFUSAL, created=[])
    module.exit_json(path=params["path"], **result)


if __name__ == "__main__":
    main()
