"""The deploy playbooks' phases for operators (docs/operations.md, "Phases and dry runs"):
every task a deploy can reach carries its phase, so that `--tags install|configure|run` runs
one of them and the reads each needs, and every task that only reads also reads in a check run
(`--check`). The Molecule scenario `monitoring` runs both on a real cluster."""

import importlib.util
from pathlib import Path

import pytest
import yaml
from ansible.modules.assemble import assemble_from_fragments
from conftest import ROOT

DEPLOY_PLAYBOOKS = ("playbooks/deploy.yml", "playbooks/open_ondemand_deploy.yml")
PHASES = {"install", "configure", "run", "record"}
INCLUDES = ("include_tasks", "include_role")
IMPORTS = ("import_tasks", "import_role")
READ_COMMANDS = ("command", "shell", "uri")
TASK_KEYWORDS = {
    "name", "tags", "when", "register", "loop", "loop_control", "vars", "notify", "changed_when",
    "failed_when", "delegate_to", "run_once", "environment", "no_log", "until", "retries",
    "delay", "check_mode", "ignore_errors", "any_errors_fatal", "args", "become", "become_user",
    "throttle", "delegate_facts",
}  # fmt: skip


def _action(task: dict) -> str:
    return next(key for key in task if key not in TASK_KEYWORDS).split(".")[-1]


def _leaves(tasks: list[dict] | None):
    """Each task with its nesting; blocks are walked, not yielded."""
    for task in tasks or []:
        yield task
        for part in ("block", "rescue", "always"):
            yield from _leaves(task.get(part))


def _role_file(role: str, name: str = "main") -> Path:
    return ROOT / "roles" / role / "tasks" / (name if name.endswith(".yml") else f"{name}.yml")


def _reachable() -> dict[Path, str]:
    """Every task file a deploy can run, to the role it belongs to ('' for the playbooks')."""
    found: dict[Path, str] = {}

    def follow(path: Path, role: str) -> None:
        if path in found:
            return
        found[path] = role
        for item in yaml.safe_load(path.read_text()) or []:
            if "ansible.builtin.import_playbook" in item:
                follow(path.parent / item["ansible.builtin.import_playbook"], "")
                continue
            tasks = item.get("tasks", []) + item.get("pre_tasks", []) if "hosts" in item else [item]
            for entry in item.get("roles", []) if "hosts" in item else []:
                name = entry["role"] if isinstance(entry, dict) else entry
                follow(_role_file(name), name)
            for task in _leaves(tasks):
                action = _action(task)
                spec = task[next(key for key in task if key.endswith(action))]
                if action in ("include_role", "import_role"):
                    follow(_role_file(spec["name"], spec.get("tasks_from", "main")), spec["name"])
                elif action in ("include_tasks", "import_tasks"):
                    target = spec["file"] if isinstance(spec, dict) else spec
                    follow(path.parent / target, role)

    for playbook in DEPLOY_PLAYBOOKS:
        follow(ROOT / playbook, "")
    return found


REACHABLE = _reachable()


def _tasks_of(path: Path):
    data = yaml.safe_load(path.read_text()) or []
    if path.parent.name == "playbooks":
        for play in data:
            yield from _leaves(play.get("pre_tasks", []) + play.get("tasks", []))
    else:
        yield from _leaves(data)


def test_the_walk_finds_every_role_of_the_deploys():
    roles = {role for role in REACHABLE.values() if role}
    assert roles == {p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir()}
    assert len(REACHABLE) > 60


@pytest.mark.parametrize("path", sorted(REACHABLE), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_task_a_deploy_runs_carries_its_phase(path: Path):
    role = REACHABLE[path]
    for task in _tasks_of(path):
        action, tags = _action(task), task.get("tags")
        where = f"{path.relative_to(ROOT)}: {task['name']}"
        if action == "block" or action in IMPORTS:
            # a block's or an import's tags would become every inner task's
            assert tags is None, where
        elif action in INCLUDES or tags == "always":
            # an include must be reached for its tasks to be chosen by their own tags
            assert tags == "always", where
        else:
            phases = [tag for tag in tags or [] if tag in PHASES]
            # each phase also under the role's name (`--tags slurm_controller_configure`)
            expected = phases + ([f"{role}_{phase}" for phase in phases] if role else [])
            assert phases and tags == expected, where


@pytest.mark.parametrize("path", sorted(REACHABLE), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_read_runs_in_a_check_run(path: Path):
    """A command is skipped in check mode unless told otherwise: what it reads would be missing."""
    for task in _tasks_of(path):
        if task.get("tags") == "always" and _action(task) in READ_COMMANDS:
            assert task.get("check_mode") is False, f"{path.relative_to(ROOT)}: {task['name']}"


def _slurm_assembled():
    plugin = ROOT / "roles/slurm_common/filter_plugins/slurm_fragments.py"
    spec = importlib.util.spec_from_file_location("slurm_fragments", plugin)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.slurm_assembled


@pytest.mark.parametrize(
    "fragments",
    [
        {"00-base.conf": "A=1\n", "50-node-b.conf": "NodeName=b\n", "90-p.conf": "P=1\n"},
        {"00-base.conf": "A=1", "50-node-a.conf": "NodeName=a", "90-p.conf": "P=1"},
        {"00-base.conf": "", "10-x.conf": "\n\nX=1\n\n", "20-y.conf": "Y"},
        {"only.conf": "NodeName=a\n"},
    ],
)
def test_the_file_assembled_in_memory_is_the_one_assemble_writes(tmp_path, fragments):
    """Compared with Ansible's own assemble, which writes the file in a real run."""
    folder = tmp_path / "slurm.conf.d"
    folder.mkdir()
    for name, content in fragments.items():
        (folder / name).write_text(content)
    written = Path(assemble_from_fragments(str(folder), tmpdir=str(tmp_path))).read_text()
    on_host = {f"slurm.conf.d/{name}": content for name, content in fragments.items()}
    assert _slurm_assembled()(on_host, {}, "slurm.conf.d/") == written


def test_this_runs_fragments_replace_and_remove_the_hosts():
    on_host = {
        "slurm.conf.d/00-base.conf": "A=1\n",
        "slurm.conf.d/50-node-a.conf": "NodeName=a\n",
        "gres.conf.d/a.conf": "NodeName=a Name=gpu\n",
    }
    rendered = {
        "slurm.conf.d/00-base.conf": "A=2\n",
        "slurm.conf.d/50-node-b.conf": "NodeName=b\n",
        "gres.conf.d/a.conf": None,
    }
    assembled = _slurm_assembled()
    assert assembled(on_host, rendered, "slurm.conf.d/") == "A=2\nNodeName=a\nNodeName=b\n"
    assert assembled(on_host, rendered, "gres.conf.d/") == ""
