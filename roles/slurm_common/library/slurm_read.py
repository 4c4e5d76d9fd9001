#!/usr/bin/python3
"""Ansible module: a host's read-only evidence for the driver's report, in one task."""

from __future__ import annotations

DOCUMENTATION = r"""
module: slurm_read
short_description: Run read-only commands and GET local endpoints on a host, all in one task
description:
  - Runs every command (no shell) and fetches every URL side by side, and returns each one's
    outcome; a command that fails or an endpoint that does not answer is evidence, not an
    error, so the module itself never fails on them.
  - One task instead of one per command, so a status or a report costs a host one round trip.
  - Reads only; check mode runs it too.
options:
  commands:
    description:
      - Name to argv (a list of strings, run without a shell), or to a slurm_command filter's
        answer, C(argv) and C(environment) (variables added to the command's environment,
        where other users of the host cannot read them, unlike a command line).
    type: dict
    default: {}
  urls:
    description: Name to an http(s) URL, fetched with GET; a JSON answer is decoded.
    type: dict
    default: {}
  timeout:
    description: Seconds each command and each request may take.
    type: int
    default: 20
"""

EXAMPLES = r"""
- name: Read the daemons' versions and Prometheus's targets in one round trip
  slurm_read:
    commands:
      slurmctld: [slurmctld, -V]
      nodes: [scontrol, show, nodes, --json]
      jobs: "{{ 'jobs' | slurm_command(nodes=['w01']) }}"
    urls:
      targets: http://127.0.0.1:9090/api/v1/targets
    timeout: 10
  register: read

- name: Use an answer
  ansible.builtin.debug:
    msg: "{{ read.commands.slurmctld.stdout if read.commands.slurmctld.rc == 0 else 'absent' }}"
"""

RETURN = r"""
commands:
  description: Name to C(rc) (-1 when it could not run or timed out), C(stdout) and C(stderr).
  type: dict
  returned: always
urls:
  description: Name to C(status) (-1 when nothing answered) and C(json) (null unless JSON).
  type: dict
  returned: always
"""

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import urllib.error  # noqa: E402
import urllib.parse  # noqa: E402
import urllib.request  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from typing import Any  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402


def run_command(argv: list[str], environment: dict[str, str], timeout: int) -> dict[str, Any]:
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **environment},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"rc": -1, "stdout": "", "stderr": str(exc)}
    return {"rc": done.returncode, "stdout": done.stdout, "stderr": done.stderr}


def fetch(url: str, timeout: int) -> dict[str, Any]:
    # urllib would also open file:// and ftp:// addresses: endpoints are HTTP only
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        return {"status": -1, "json": None}
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            status, body = answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    except (OSError, ValueError):
        return {"status": -1, "json": None}
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    return {"status": status, "json": decoded}


def as_command(given: Any) -> tuple[list[str], dict[str, str]] | None:
    """An argv, or a slurm_command's {argv, environment}; None where it is neither."""
    argv, environment = given, {}
    if isinstance(given, dict) and set(given) == {"argv", "environment"}:
        argv, environment = given["argv"], given["environment"]
    strings = isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
    named = isinstance(environment, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    )
    return (argv, environment) if strings and named else None


def read_all(commands: dict[str, Any], urls: dict[str, str], timeout: int) -> dict[str, dict]:
    """Every read at once (`commands`: each as_command's): a host's answer takes as long as its
    slowest read, not their sum."""
    parts = {name: as_command(given) for name, given in commands.items()}
    with ThreadPoolExecutor(max_workers=max(1, len(commands) + len(urls))) as pool:
        ran = {
            name: pool.submit(run_command, *command, timeout)
            for name, command in parts.items()
            if command is not None
        }
        fetched = {name: pool.submit(fetch, url, timeout) for name, url in urls.items()}
        return {
            "commands": {name: future.result() for name, future in ran.items()},
            "urls": {name: future.result() for name, future in fetched.items()},
        }


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "commands": {"type": "dict", "default": {}},
            "urls": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "default": 20},
        },
        supports_check_mode=True,
    )
    commands = module.params["commands"]
    for name, given in commands.items():
        if as_command(given) is None:
            module.fail_json(
                msg=f"commands.{name}: expected a non-empty list of strings, or argv and "
                "environment (a slurm_command)"
            )
    module.exit_json(
        changed=False, **read_all(commands, module.params["urls"], module.params["timeout"])
    )


if __name__ == "__main__":
    main()
