"""Run one task file of a role with real ansible-playbook against the control node itself
(twice by default: the second run proves idempotence), for files whose component cannot be installed
here (Grafana, Open OnDemand): the role renders them into a folder the test then reads."""

import json
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import ROOT

from driver.runner.run import MITOGEN_ENVIRONMENT


def run_role_tasks(
    work: Path, role: str, tasks_from: str, extra: dict, address: str, times: int = 2
) -> list[subprocess.CompletedProcess]:
    """`tasks_from` of `role`, with `extra` as extra vars, on a
    local host whose inventory address is `address`, `times` times; every run must succeed
    (the first that fails ends it)."""
    play = [
        {
            "hosts": "target",
            "gather_facts": False,
            "tasks": [
                {"ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from}},
            ],
        }
    ]
    (work / "play.yml").write_text(yaml.safe_dump(play))
    host = {
        "ansible_connection": "local",
        "ansible_host": address,
        "ansible_python_interpreter": sys.executable,
    }
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"target": host}}}))
    (work / "extra.json").write_text(json.dumps(extra))
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(work),
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_FORCE_COLOR": "0",
        **MITOGEN_ENVIRONMENT,
    }
    command = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        "inventory.yml",
        "-e",
        "@extra.json",
        "play.yml",
    ]
    runs = []
    for _ in range(times):
        run = subprocess.run(
            command, cwd=work, capture_output=True, text=True, env=env, check=False, timeout=300
        )
        # a failed run is the answer: running it again would only repeat it
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        runs.append(run)
    return runs
