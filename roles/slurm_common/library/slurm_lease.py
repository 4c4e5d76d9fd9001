#!/usr/bin/python3
"""Ansible module: the instance's lease on its controller, taken and given back by operations."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_lease
short_description: Take or give back the instance's lease, kept on one of its hosts
description:
  - One operation at a time changes an instance, whichever driver host runs it. The lease is a
    file on the host (the controller, or the portal's host) that names its holder - the
    operation's id and type, its correlation id, the driver that runs it - and when it expires.
  - I(state=held) takes it when it is free, expired, already this operation's (a playbook
    that reaches the preflight twice, replace_worker) or held by another operation of the same
    driver (the driver takes the lease only while it holds its own instance lock, so that
    operation's run is over - a driver killed, then run again); then its expiry starts again.
    Held by another driver's operation, nothing is written and C(held_by) names the holder.
  - I(state=released) removes it when this operation holds it, and nothing else.
  - The lease lives in C(/run), so a reboot of its host frees it, and nothing of it stays in the
    host's state (a refused operation leaves the host's files as they were). Two runs at once
    on the host are serialised by an flock on the lease's folder (no lock file); the lease is
    replaced by a rename, never half-written. The host's clock decides expiry.
  - Bookkeeping, like the journal - never reported changed, and it acts in check mode too (a
    dry run also keeps another operation out).
options:
  path:
    description: The lease file (its folder is made, root's alone, where missing).
    type: path
    required: true
  state:
    description: held or released.
    type: str
    choices: [held, released]
    required: true
  holder:
    description: This operation - operation_id, operation, correlation_id, driver.
    type: dict
    required: true
  expiry_s:
    description: How long the lease holds without being given back (held).
    type: int
    default: 7200
"""

EXAMPLES = r"""
- name: Take the instance's lease
  slurm_lease:
    path: /var/lib/slurm-app/lease.json
    state: held
    holder: {operation_id: op-12, operation: deploy, correlation_id: corr-7, driver: driver-a}
    expiry_s: 7200
"""

RETURN = r"""
held_by:
  description: The other operation's lease (its holder, taken_at, expires_at), or null.
  type: dict
  returned: always
lease:
  description: The lease as this call left it, or null when none is held.
  type: dict
  returned: always
"""

import contextlib  # noqa: E402
import fcntl  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

HOLDER_FIELDS = ("operation_id", "operation", "correlation_id", "driver")
STAMP = "%Y-%m-%dT%H:%M:%SZ"


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    """Held while the lease is read and written: two operations' preflights may reach the host
    at once. The lock is the folder's own, so that no lock file is left behind."""
    descriptor = os.open(Path(path).parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)


def _read(path: str) -> dict[str, Any] | None:
    """The lease on the host; None when there is none or it cannot be read as one (a torn or
    hand-edited file gives way rather than blocking the instance for good)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(descriptor) as handle:
        try:
            lease = json.load(handle)
        except ValueError:
            return None
    return lease if isinstance(lease, dict) and "expires_epoch" in lease else None


def _write(path: str, lease: dict[str, Any]) -> None:
    descriptor, staged = tempfile.mkstemp(dir=Path(path).parent, prefix=".lease-")
    try:
        with os.fdopen(descriptor, "w") as handle:
            json.dump(lease, handle, indent=2, sort_keys=True)
            handle.write("\n")
        Path(staged).rename(path)
    except BaseException:
        Path(staged).unlink(missing_ok=True)
        raise


def take(path: str, holder: dict[str, str], expiry_s: int, now: float) -> dict[str, Any]:
    """{held_by, lease}: the lease taken (or renewed) for `holder`, or the other holder's. The
    folder is made root's alone where a first deploy has not made it yet."""
    Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _locked(path):
        current = _read(path)
        held = current.get("holder", {}) if current is not None else {}
        if (
            current is not None
            and current["expires_epoch"] > now
            and held.get("operation_id") != holder["operation_id"]
            and held.get("driver") != holder["driver"]
        ):
            return {"held_by": current, "lease": current}
        lease = {
            "holder": holder,
            "taken_at": time.strftime(STAMP, time.gmtime(now)),
            "expires_at": time.strftime(STAMP, time.gmtime(now + expiry_s)),
            "expires_epoch": int(now + expiry_s),
        }
        _write(path, lease)
        return {"held_by": None, "lease": lease}


def give_back(path: str, holder: dict[str, str]) -> dict[str, Any]:
    """{held_by, lease}: the lease removed when `holder` held it (nothing to give back where
    its folder is gone: a reboot, or a host torn down)."""
    if not Path(path).parent.is_dir():
        return {"held_by": None, "lease": None}
    with _locked(path):
        current = _read(path)
        if (
            current is not None
            and current.get("holder", {}).get("operation_id") == holder["operation_id"]
        ):
            Path(path).unlink()
            return {"held_by": None, "lease": None}
        return {"held_by": None, "lease": current}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "state": {"type": "str", "choices": ["held", "released"], "required": True},
            "holder": {"type": "dict", "required": True},
            "expiry_s": {"type": "int", "default": 7200},
        },
        supports_check_mode=True,
    )
    params = module.params
    holder = {field: str(params["holder"].get(field) or "") for field in HOLDER_FIELDS}
    if not holder["operation_id"]:
        module.fail_json(msg="holder.operation_id is empty")
    if params["expiry_s"] < 1:
        module.fail_json(msg=f"expiry_s must be 1 or more, not {params['expiry_s']}")
    if params["state"] == "held":
        answer = take(params["path"], holder, params["expiry_s"], time.time())
    else:
        answer = give_back(params["path"], holder)
    module.exit_json(changed=False, **answer)


if __name__ == "__main__":
    main()
