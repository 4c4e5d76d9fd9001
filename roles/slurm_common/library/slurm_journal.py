#!/usr/bin/python3
"""Ansible module: one entry in the host's systemd journal, with structured fields."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_journal
short_description: Write one entry in the host's journal with structured fields
description:
  - Sends one entry to systemd-journald's socket (C(/run/systemd/journal/socket)) with the
    message, its priority, C(SYSLOG_IDENTIFIER=slurm-app) and the given fields, so that
    C(journalctl SLURM_APP_CORRELATION_ID=...) finds it.
  - A log line is not a change of the host's state, so the module never reports changed, and
    it writes in check mode too. A host without journald gets a warning, never a failure.
options:
  message:
    description: The entry's text (MESSAGE).
    type: str
    required: true
  fields:
    description: Field name (upper case letters, digits, underscores) to value.
    type: dict
    default: {}
  priority:
    description: syslog priority, 0 (emerg) to 7 (debug).
    type: int
    default: 6
"""

EXAMPLES = r"""
- name: Note the operation's start
  slurm_journal:
    message: "slurm-app deploy started (operation op-12)"
    fields:
      SLURM_APP_OPERATION_ID: op-12
      SLURM_APP_CORRELATION_ID: corr-7
"""

RETURN = r"""
written:
  description: Whether journald took the entry.
  type: bool
  returned: always
"""

import re  # noqa: E402
import socket  # noqa: E402
import struct  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402

SOCKET = "/run/systemd/journal/socket"
FIELD_NAME = re.compile(r"^[A-Z0-9][A-Z0-9_]{0,63}$")


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


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "message": {"type": "str", "required": True},
            "fields": {"type": "dict", "default": {}},
            "priority": {"type": "int", "default": 6, "choices": list(range(8))},
        },
        supports_check_mode=True,
    )
    given = {str(name): str(value) for name, value in module.params["fields"].items()}
    wrong = sorted(name for name in given if not FIELD_NAME.match(name))
    if wrong:
        module.fail_json(msg=f"fields: not a journal field name: {', '.join(wrong)}")
    entry = {
        "MESSAGE": module.params["message"],
        "PRIORITY": str(module.params["priority"]),
        "SYSLOG_IDENTIFIER": "slurm-app",
        **given,
    }
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as journal:
            journal.sendto(_datagram(entry), SOCKET)
    except OSError as error:
        module.warn(f"journald did not take the entry: {error}")
        module.exit_json(changed=False, written=False)
    module.exit_json(changed=False, written=True)


if __name__ == "__main__":
    main()
