#!/usr/bin/python3
"""Ansible module: a role's files, folders and links on a host, in one step."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_files
short_description: A role's files, folders and links on a host, in one step
description:
  - Makes each entry of O(files) as it says, in order, and reports which paths changed.
  - One step instead of a C(copy), C(file) or C(template) task per path. Each task costs the
    control side about 17 ms of CPU per host, whether it changes anything or not.
  - A file is written to a temporary name beside it and renamed over the path, so a reader
    never sees half a file; a link or anything else at the path is replaced, never followed.
  - A folder's missing parents are made root's, mode 0755.
  - Owner, group and mode are given where they differ, also to an entry whose content is
    unchanged.
  - O(files[].src) is read on the control node by the module's action plugin (from the role's
    C(files) folder, as C(copy) reads it) and sent with the module's arguments.
  - Then brings each unit of O(services) up, as C(systemd_service) would with masked false,
    enabled true, and state restarted where an entry of this step changed (or the unit says
    restart), else state started. systemd reloads its units first where an entry under its unit
    folders (/etc/systemd, /run/systemd, /lib/systemd, /usr/lib/systemd) changed. A
    daemon's files and its restart are one step, one task per daemon less on every host.
  - Supports check mode and diff mode (the text of a changed file up to 64 KiB, unless the
    entry says C(diff=false)).
  - O(converged) is run by the action plugin before the entries, in the same step (the member's
    reading and the record of it, which a read step of its own then a file step made before).
options:
  converged:
    description:
      - Also record the member's converged state (slurm_common's converge check). The action
        plugin runs O(converged.command) with bash on the host, as a C(shell) step would, and
        where it exits 0 makes the record's folder (0700) and file (0600), holding the
        fingerprint slurm_common's filter C(slurm_converge_reading) makes of the output, the
        first entries of O(files). A reading that fails records nothing (the next deploy
        converges); a check run reads nothing and records nothing.
      - The output is not returned (the reading holds the munge key's checksum).
    type: dict
    suboptions:
      command:
        description: The reading (slurm_common's probe script).
        type: str
        required: true
      inputs:
        description: The request's and the bundle's digest, the fingerprint's first part.
        type: str
        required: true
      record:
        description: The record's path.
        type: path
        required: true
  files:
    description: The entries, made in this order.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: The absolute path.
        type: path
        required: true
      state:
        description: What the path is to be.
        type: str
        choices: [file, directory, link, absent]
        default: file
      content:
        description: A file's content (or give O(files[].src)).
        type: str
      src:
        description: A file of the role's C(files) folder (or an absolute path on the control
          node) whose bytes are the file's content.
        type: str
      target:
        description: What a link points at.
        type: str
      owner:
        description: The owner's name.
        type: str
        default: root
      group:
        description: The group's name.
        type: str
        default: root
      mode:
        description: The mode, as an octal string (default 0644 for a file, 0755 for a
          folder).
        type: str
      diff:
        description: Whether diff mode may show the file's text (false for what must not be
          shown).
        type: bool
        default: true
      keep:
        description: Where anything is at the path already, leave it as it is (C(copy)'s
          C(force=false)); made only where nothing is.
        type: bool
        default: false
  services:
    description: The systemd units brought up after the entries, in this order.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The unit (C(.service) may be left off).
        type: str
        required: true
      restart:
        description: Restart it even where no entry of this step changed (a change another step
          made, such as a key generated on the host).
        type: bool
        default: false
"""

EXAMPLES = r"""
- name: Install the desktop's VNC front and the GPU job map's folder
  slurm_files:
    files:
      - {path: /usr/local/libexec/slurm-app-vnc, state: directory}
      - {path: /usr/local/libexec/slurm-app-vnc/vncserver, src: vncserver, mode: "0755"}
      - path: /etc/tmpfiles.d/slurm-app-gpu-jobs.conf
        content: "d /run/slurm-app 0755 root root -\n"
      - {path: /usr/local/bin/code-server, state: link, target: /opt/code-server/out/node/entry.js}
      - {path: /usr/local/bin/old-tool, state: absent}

- name: Point slurmd at the controller; restart it where that changed, keep it running
  slurm_files:
    files:
      - path: /etc/default/slurmd
        content: "SLURMD_OPTIONS=--conf-server ctl:6817\n"
    services:
      - name: slurmd
"""

RETURN = r"""
changed_paths:
  description: The paths made, rewritten, given another owner or mode, or removed (in check
    mode, those that would be).
  type: list
  elements: str
  returned: always
services_changed:
  description: The units unmasked, enabled, started or restarted (in check mode, those that
    would be).
  type: list
  elements: str
  returned: always
converged_read_rc:
  description: The exit status of O(converged.command) (absent in a check run, or without
    O(converged)).
  type: int
  returned: when O(converged) is given
"""

import base64  # noqa: E402
import grp  # noqa: E402
import os  # noqa: E402
import pwd  # noqa: E402
import shutil  # noqa: E402
import stat  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

DIFF_LIMIT = 65536
DEFAULT_MODES = {"file": "0644", "directory": "0755"}
# Where a changed entry is systemd's own (a unit, a drop-in): daemon-reload before the services.
UNIT_FOLDERS = ("/etc/systemd/", "/run/systemd/", "/lib/systemd/", "/usr/lib/systemd/")
# What `systemctl is-enabled` calls enabled (it exits 0 for these): nothing to enable.
ENABLED_STATES = {"enabled", "enabled-runtime", "static", "alias", "indirect", "generated"}
RUNNING_STATES = {"active", "reloading"}


def wanted_bytes(entry: dict) -> bytes:
    if entry.get("content_b64") is not None:
        return base64.b64decode(entry["content_b64"])
    return (entry.get("content") or "").encode()


def current_bytes(path: Path) -> bytes | None:
    """The file's bytes, or None where the path is not a regular file (a link is not)."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return path.read_bytes()


def ids(entry: dict) -> tuple[int, int]:
    return pwd.getpwnam(entry["owner"]).pw_uid, grp.getgrnam(entry["group"]).gr_gid


def attributes_differ(path: Path, uid: int, gid: int, mode: int) -> bool:
    info = path.lstat()
    return (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) != (uid, gid, mode)


def is_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def clear(path: Path) -> None:
    """Remove whatever is at the path; a link is removed, not followed."""
    if is_folder(path):
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()


def make_parents(path: Path) -> None:
    if not path.parent.is_dir():
        path.parent.mkdir(mode=0o755, parents=True)


def ensure_file(entry: dict, check: bool, diffs: list[dict]) -> bool:
    path = Path(entry["path"])
    uid, gid = ids(entry)
    mode = int(entry["mode"] or DEFAULT_MODES["file"], 8)
    wanted = wanted_bytes(entry)
    before = current_bytes(path)
    if before == wanted:
        if not attributes_differ(path, uid, gid, mode):
            return False
        if not check:
            os.chown(path, uid, gid)
            path.chmod(mode)
        return True
    if entry["diff"] and len(wanted) <= DIFF_LIMIT and len(before or b"") <= DIFF_LIMIT:
        diffs.append(
            {
                "before_header": str(path),
                "after_header": str(path),
                "before": (before or b"").decode(errors="replace"),
                "after": wanted.decode(errors="replace"),
            }
        )
    if check:
        return True
    make_parents(path)
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=".slurm_files.")
    temporary = Path(name)
    try:
        os.fchown(handle, uid, gid)
        os.fchmod(handle, mode)
        os.write(handle, wanted)
        os.fsync(handle)
        os.close(handle)
        if is_folder(path):
            shutil.rmtree(path)
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return True


def ensure_directory(entry: dict, check: bool) -> bool:
    path = Path(entry["path"])
    uid, gid = ids(entry)
    mode = int(entry["mode"] or DEFAULT_MODES["directory"], 8)
    if is_folder(path) and not attributes_differ(path, uid, gid, mode):
        return False
    if check:
        return True
    if not is_folder(path):
        clear(path)
        make_parents(path)
        path.mkdir(mode=0o700)
    os.chown(path, uid, gid)
    path.chmod(mode)
    return True


def ensure_link(entry: dict, check: bool) -> bool:
    path, target = Path(entry["path"]), entry["target"]
    if path.is_symlink() and str(path.readlink()) == target:
        return False
    if check:
        return True
    make_parents(path)
    if is_folder(path):
        shutil.rmtree(path)
    temporary = path.parent / f".slurm_files.{os.getpid()}.link"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(target)
    temporary.replace(path)
    return True


def ensure_absent(entry: dict, check: bool) -> bool:
    path = Path(entry["path"])
    if not (path.is_symlink() or path.exists()):
        return False
    if not check:
        clear(path)
    return True


def ensure(entries: list[dict], check: bool) -> dict:
    """Make every entry; {changed, changed_paths, diff}."""
    changed_paths: list[str] = []
    diffs: list[dict] = []
    for entry in entries:
        state = entry["state"]
        there = Path(entry["path"])
        if entry.get("keep") and (there.is_symlink() or there.exists()):
            continue
        if state == "file":
            changed = ensure_file(entry, check, diffs)
        elif state == "directory":
            changed = ensure_directory(entry, check)
        elif state == "link":
            changed = ensure_link(entry, check)
        else:
            changed = ensure_absent(entry, check)
        if changed:
            changed_paths.append(entry["path"])
    return {"changed": bool(changed_paths), "changed_paths": changed_paths, "diff": diffs}


def unit_steps(unit_file_state: str, active_state: str, restart: bool) -> list[str]:
    """The systemctl verbs that bring a unit up from the state `systemctl show` gave, in order
    (systemd's reload, which the whole step shares, is not one of them)."""
    steps = ["unmask"] if unit_file_state == "masked" else []
    if unit_file_state not in ENABLED_STATES:
        steps.append("enable")
    if restart:
        steps.append("restart")
    elif active_state not in RUNNING_STATES:
        steps.append("start")
    return steps


def bring_up(module: AnsibleModule, services: list[dict], changed_paths: list[str]) -> list[str]:
    """Each unit unmasked, enabled, and restarted or started; the names of those changed."""
    files_changed = bool(changed_paths)
    planned: list[tuple[str, list[str]]] = []
    for service in services:
        unit = service["name"] if "." in service["name"] else f"{service['name']}.service"
        rc, out, err = module.run_command(
            ["systemctl", "show", "-p", "LoadState,UnitFileState,ActiveState", "--", unit]
        )
        state = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
        if rc != 0 or state.get("LoadState") == "not-found":
            module.fail_json(msg=f"Could not find the requested service {unit}: {err.strip()}")
        steps = unit_steps(
            state.get("UnitFileState", ""),
            state.get("ActiveState", ""),
            files_changed or service["restart"],
        )
        planned.append((unit, steps))
    if module.check_mode:
        return [unit for unit, steps in planned if steps]
    # a daemon's own files need no reload: a step that changed none of systemd's (a record, a
    # configuration file) costs the host no daemon-reload
    units_changed = any(path.startswith(UNIT_FOLDERS) for path in changed_paths)
    if units_changed or any("unmask" in steps for _, steps in planned):
        module.run_command(["systemctl", "daemon-reload"], check_rc=True)
    for unit, steps in planned:
        for verb in steps:
            rc, _, err = module.run_command(["systemctl", verb, "--", unit])
            if rc != 0:
                module.fail_json(msg=f"Unable to {verb} service {unit}: {err.strip()}")
    return [unit for unit, steps in planned if steps]


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "files": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "path": {"type": "path", "required": True},
                    "state": {
                        "type": "str",
                        "choices": ["file", "directory", "link", "absent"],
                        "default": "file",
                    },
                    "content": {"type": "str", "no_log": False},
                    # what the action plugin made of src
                    "content_b64": {"type": "str"},
                    "src": {"type": "str"},
                    "target": {"type": "str"},
                    "owner": {"type": "str", "default": "root"},
                    "group": {"type": "str", "default": "root"},
                    "mode": {"type": "str"},
                    "diff": {"type": "bool", "default": True},
                    "keep": {"type": "bool", "default": False},
                },
                "required_if": [("state", "link", ("target",))],
                "mutually_exclusive": [("content", "content_b64")],
            },
            # run by the action plugin, which never passes it on
            "converged": {"type": "dict"},
            "services": {
                "type": "list",
                "elements": "dict",
                "default": [],
                "options": {
                    "name": {"type": "str", "required": True},
                    "restart": {"type": "bool", "default": False},
                },
            },
        },
        supports_check_mode=True,
    )
    for entry in module.params["files"]:
        if not Path(entry["path"]).is_absolute():
            module.fail_json(msg=f"files[].path must be absolute, got {entry['path']!r}")
        if entry["src"] is not None:
            module.fail_json(msg=f"{entry['path']}: src is read by the action plugin, not here")
    result = ensure(module.params["files"], module.check_mode)
    result["services_changed"] = bring_up(
        module, module.params["services"], result["changed_paths"]
    )
    result["changed"] = result["changed"] or bool(result["services_changed"])
    if not module._diff:
        result.pop("diff")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
