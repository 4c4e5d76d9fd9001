"""No step run by every host reads every host's variables.

Ansible answers `hostvars[host]` by building that host's variables anew in its top level, one
core (about 0.8 ms a host on the bench machine: bench/reports/control-side-cost.md, "A condition
that read every member's variables, for each member"). A step that reads every member's
variables and runs on every member costs N² such builds: 5 million at 1,000 workers for one
condition. Such a read (a scan) belongs in a `run_once` step, or in a play of one host (the
controller, the monitoring host, the portal). The walk follows every playbook's plays into the
roles and task files they include, and every role variable or play variable that holds a scan
into the steps that use it."""

import re
from pathlib import Path

import yaml
from conftest import ROOT
from test_phases import _action, _role_file

# A member's variables taken for each of a list: `map('extract', hostvars...)`, or
# `hostvars[name]` with a name that is not one fixed host (the controller, a group's first).
SCAN = re.compile(
    r"map\(\s*'extract'\s*,\s*hostvars"
    r"|hostvars\[(?!slurm_common_controller_host\]|groups\b|['\"])\w+\]"
)
# The groups of one host: the driver's inventory puts one host in each.
ONE_HOST_PLAYS = {
    "slurm_controller", "slurm_controller:&slurm_app_answered", "monitoring", "open_ondemand",
    "{{ groups['slurm_app_lease_holder'] | default([]) }}",
}  # fmt: skip
BLOCK_PARTS = ("block", "rescue", "always")


def _scanning_variables(values: dict | None) -> set[str]:
    return {name for name, value in (values or {}).items() if SCAN.search(yaml.safe_dump(value))}


ROLE_SCANS = {
    role.name: _scanning_variables(yaml.safe_load((role / "vars" / "main.yml").read_text()))
    | _scanning_variables(yaml.safe_load((role / "defaults" / "main.yml").read_text()))
    for role in (ROOT / "roles").iterdir()
    if (role / "tasks").is_dir()
}


def _scans_per_host() -> list[str]:
    found: list[str] = []
    walked: set[tuple[Path, bool, frozenset[str]]] = set()

    def step_text(task: dict) -> str:
        return yaml.safe_dump({k: v for k, v in task.items() if k not in BLOCK_PARTS})

    def walk(path: Path, tasks, once: bool, scans: frozenset[str]) -> None:
        for task in tasks or []:
            task_once = once or task.get("run_once") is True
            if any(part in task for part in BLOCK_PARTS):
                for part in BLOCK_PARTS:
                    walk(path, task.get(part), task_once, scans)
                continue
            text = step_text(task)
            if not task_once and (
                SCAN.search(text) or any(re.search(rf"\b{name}\b", text) for name in scans)
            ):
                found.append(f"{path.relative_to(ROOT)}: {task.get('name')}")
            action = _action(task)
            spec = task[next(key for key in task if key.endswith(action))]
            # an include's own run_once picks the host that includes; its steps still run on
            # every host of the play, so it is not passed on
            if action in ("include_role", "import_role"):
                role_file = _role_file(spec["name"], spec.get("tasks_from", "main"))
                follow(role_file, spec["name"], once, scans)
            elif action in ("include_tasks", "import_tasks"):
                target = spec["file"] if isinstance(spec, dict) else spec
                follow(path.parent / target, None, once, scans)

    def follow(path: Path, role: str | None, once: bool, scans: frozenset[str]) -> None:
        scans = scans | ROLE_SCANS.get(role or "", set())
        if (path, once, scans) in walked:
            return
        walked.add((path, once, scans))
        walk(path, yaml.safe_load(path.read_text()), once, scans)

    for playbook in sorted((ROOT / "playbooks").glob("*.yml")):
        for play in yaml.safe_load(playbook.read_text()) or []:
            if "hosts" not in play:
                continue
            one_host = str(play["hosts"]).strip() in ONE_HOST_PLAYS
            scans = frozenset(_scanning_variables(play.get("vars")))
            for entry in play.get("roles", []):
                name = entry["role"] if isinstance(entry, dict) else entry
                follow(_role_file(name), name, one_host, scans)
            for part in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                walk(playbook, play.get(part), one_host, scans)
    return sorted(set(found))


def test_the_walk_reaches_the_scans_it_must_judge():
    # the worker's play nodes are read in run_once steps; a walk that never reached them
    # would pass for the wrong reason
    assert "__slurm_worker_play_nodes" in ROLE_SCANS["slurm_worker"]
    assert SCAN.search("ansible_play_hosts | map('extract', hostvars, 'x')")
    assert SCAN.search("{% for host in hosts %}{{ hostvars[host].x }}{% endfor %}")
    assert not SCAN.search("hostvars[groups['slurm_controller'][0]].x")


def test_no_step_run_by_every_host_reads_every_hosts_variables():
    assert _scans_per_host() == []
