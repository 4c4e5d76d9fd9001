"""Real ansible-playbook against the control node itself, the way the driver runs it (its
strategy, the bundle's ansible.cfg), for steps whose effect this machine can show: a role's
task file rendering files for a component that cannot be installed here (Grafana, Open
OnDemand), an action plugin's refusals, the strategy's answers."""

import json
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import ROOT

from driver.runner.run import MITOGEN_ENVIRONMENT


def run_play(
    work: Path,
    play: list[dict] | str,
    *,
    extra: dict | None = None,
    environment: dict[str, str] | None = None,
    address: str = "127.0.0.1",
    times: int = 1,
) -> list[subprocess.CompletedProcess]:
    """`play` (YAML text, or its tasks' plays) on the host `target`, whose inventory address
    is `address`, `times` times; `environment` adds to or overrides the run's. Every run must
    succeed: the first that fails ends it."""
    (work / "play.yml").write_text(play if isinstance(play, str) else yaml.safe_dump(play))
    host = {
        "ansible_connection": "local",
        "ansible_host": address,
        "ansible_python_interpreter": sys.executable,
    }
    (work / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"target": host}}}))
    (work / "extra.json").write_text(json.dumps(extra or {}))
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": str(work),
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_FORCE_COLOR": "0",
        **MITOGEN_ENVIRONMENT,
        **(environment or {}),
    }
    playbook = str(Path(sys.executable).parent / "ansible-playbook")
    command = [playbook, "-i", "inventory.yml", "-e", "@extra.json", "play.yml"]
    runs = []
    for _ in range(times):
        run = subprocess.run(
            command, cwd=work, capture_output=True, text=True, env=env, check=False, timeout=300
        )
        # a failed run is the answer: running it again would only repeat it
        assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
        runs.append(run)
    return runs


def run_role_tasks(
    work: Path, role: str, tasks_from: str, extra: dict, address: str, times: int = 2
) -> list[subprocess.CompletedProcess]:
    """`tasks_from` of `role` with `extra` as extra vars, twice by default: the second run
    proves idempotence. slurm_common's filters are loaded, as in every playbook of the bundle,
    whose first play loads that role."""
    include = {"ansible.builtin.include_role": {"name": role, "tasks_from": tasks_from}}
    play = [{"hosts": "target", "gather_facts": False, "tasks": [include]}]
    filters = {"ANSIBLE_FILTER_PLUGINS": str(ROOT / "roles/slurm_common/filter_plugins")}
    return run_play(work, play, extra=extra, address=address, times=times, environment=filters)
