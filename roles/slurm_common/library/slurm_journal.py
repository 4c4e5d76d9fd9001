#!/usr/bin/python3
"""Ansible module: an operation's start, end or step in the host's systemd journal."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_journal
short_description: Write an operation's start, end or step in the host's journal
description:
  - Sends one entry to systemd-journald's socket (C(/run/systemd/journal/socket)) carrying the
    operation's identity as fields (C(SLURM_APP_OPERATION_ID), C(SLURM_APP_CORRELATION_ID),
    ...), with C(SYSLOG_IDENTIFIER=slurm-app), so that C(journalctl SLURM_APP_CORRELATION_ID=...)
    finds it. The message and the fields are built here, one way for every caller.
  - A log line is not a change of the host's state, so the module never reports changed, and
    it writes in check mode too. A host without journald gets a warning, never a failure.
  - An empty I(operation) writes nothing (a playbook run by hand carries no identity).
options:
  operation:
    description:
      - The run's identity, as the driver gives it (C(slurm_common_journal)) - operation_id,
        operation, correlation_id, instance_id, app_slug, trace_id.
    type: dict
    required: true
  event:
    description: What the entry marks.
    type: str
    choices: [start, end, step]
    required: true
  outcome:
    description: How the operation ended (I(event=end)); failed and cancelled are warnings.
    type: str
    default: completed
  step:
    description: The step's name (I(event=step)), such as C(slurmctld restart).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Write the restart of slurmctld in the host's journal
  slurm_journal:
    operation: "{{ slurm_common_journal }}"
    event: step
    step: slurmctld restart
"""

RETURN = r"""
written:
  description: Whether journald took the entry.
  type: bool
  returned: always
"""

import socket  # noqa: E402
import struct  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

SOCKET = "/run/systemd/journal/socket"
IDENTITY = {
    "operation_id": "SLURM_APP_OPERATION_ID",
    "operation": "SLURM_APP_OPERATION",
    "correlation_id": "SLURM_APP_CORRELATION_ID",
    "instance_id": "SLURM_APP_INSTANCE_ID",
    "app_slug": "SLURM_APP_APP",
    "trace_id": "SLURM_APP_TRACE_ID",
}
WARNING_OUTCOMES = ("failed", "cancelled")


def _datagram(fields: dict[str, str]) -> bytes:
    """journald's native protocol: NAME=value lines; a value holding a newline is sent in the
    binary form (the name, a newline, its length as 64-bit little endian, the bytes)."""
    parts = []
    for name, value in fields.items():
        data = value.encode("utf-8", errors="replace")
        if b"\n" in data:
            parts.append(name.encode() + b"\n" + struct.pack("<Q", len(data)) + data + b"\n")
        else:
            parts.append(name.encode() + b"=" + data + b"\n")
    return b"".join(parts)


def entry(operation: dict[str, str], event: str, outcome: str, step: str) -> dict[str, str]:
    """The journal entry of one event of the operation, its identity in fields."""
    said = {"start": "started", "end": f"ended: {outcome}", "step": step}[event]
    ended_badly = event == "end" and outcome in WARNING_OUTCOMES
    return {
        "MESSAGE": (
            f"slurm-app {operation['operation']} {said} (operation {operation['operation_id']},"
            f" correlation {operation['correlation_id']})"
        ),
        "PRIORITY": "4" if ended_badly else "6",
        "SYSLOG_IDENTIFIER": "slurm-app",
        "SLURM_APP_EVENT": event,
        **{field: str(operation[key]) for key, field in IDENTITY.items()},
        **({"SLURM_APP_OUTCOME": outcome} if event == "end" else {}),
        **({"SLURM_APP_STEP": step} if event == "step" else {}),
    }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "operation": {"type": "dict", "required": True},
            "event": {"type": "str", "required": True, "choices": ["start", "end", "step"]},
            "outcome": {"type": "str", "default": "completed"},
            "step": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    operation = module.params["operation"]
    if not operation:
        module.exit_json(changed=False, written=False)
    missing = sorted(key for key in IDENTITY if not operation.get(key))
    if missing:
        module.fail_json(msg=f"operation: the run's identity lacks {', '.join(missing)}")
    if module.params["event"] == "step" and not module.params["step"]:
        module.fail_json(msg="step: a step entry needs the step's name")
    params = module.params
    written = entry(operation, params["event"], params["outcome"], params["step"])
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as journal:
            journal.sendto(_datagram(written), SOCKET)
    except OSError as error:
        module.warn(f"journald did not take the entry: {error}")
        module.exit_json(changed=False, written=False)
    module.exit_json(changed=False, written=True)


if __name__ == "__main__":
    main()
