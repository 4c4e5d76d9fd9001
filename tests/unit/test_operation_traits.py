"""driver/apps/slurm/operations.py, one declaration per operation, held against the manifest
(the same operations) and against each operation's playbook and every playbook and task file
it imports or includes (its closure): each trait is true exactly where the playbook shows it."""

import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from driver.apps.slurm.operations import OPERATIONS, OperationTraits

MANIFEST = yaml.safe_load((ROOT / "manifests/slurm-reference/manifest.yaml").read_text())
PLAYBOOKS = {
    operation["type"]: ROOT / operation["playbook"]
    for version in MANIFEST["versions"]
    for operation in version["operations"]
}
ROLE_ACTIONS = ("ansible.builtin.include_role", "ansible.builtin.import_role")
# What the role task files that read the driver host's backup folder and limits name.
BACKUP_VARIABLE = "slurm_controller_backup_fetch_"
# A report that names these parts reads the monitoring role's variables.
MONITORING_PARTS = {"monitoring", "exporters"}


def closure(playbook: Path) -> list[Path]:
    """The playbook and every file it imports or includes, transitively."""
    seen: list[Path] = []
    todo = [playbook]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.append(path)
        for name in re.findall(
            r"(?:import_playbook|include_tasks|import_tasks):\s*(\S+\.yml)", path.read_text()
        ):
            target = (path.parent / name).resolve()
            if target.is_file():
                todo.append(target)
    return seen


def found(data, key: str) -> list:
    """Every value of `key` in a parsed YAML document, however deep."""
    values = []
    if isinstance(data, dict):
        values += [data[key]] if key in data else []
        for value in data.values():
            values += found(value, key)
    elif isinstance(data, list):
        for item in data:
            values += found(item, key)
    return values


def role_files(entries: set[tuple[str, str]]) -> list[Path]:
    """The task files the role entry points run, following the roles' own includes and their
    includes of other roles."""
    seen: list[Path] = []
    todo = [ROOT / "roles" / role / "tasks" / f"{entry}.yml" for role, entry in entries]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        document = yaml.safe_load(path.read_text())
        for key in ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks"):
            todo += [path.parent / name for name in found(document, key) if isinstance(name, str)]
        for action in ROLE_ACTIONS:
            for include in found(document, action):
                tasks_from = include.get("tasks_from", "main")
                todo.append(ROOT / "roles" / include["name"] / "tasks" / f"{tasks_from}.yml")
    return seen


def installs_software(path: Path) -> bool:
    """A task file with a step that installs: apt with any state but absent, slurm_install."""
    document = yaml.safe_load(path.read_text())
    if found(document, "slurm_install"):
        return True
    return any(
        isinstance(apt, dict) and apt.get("state", "present") != "absent"
        for apt in found(document, "ansible.builtin.apt")
    )


def shown(playbook: Path) -> OperationTraits:
    files = closure(playbook)
    # member_report.yml reads whichever parts its caller names: the caller's parts count
    documents = [yaml.safe_load(path.read_text()) for path in files]
    own = [
        doc for doc, path in zip(documents, files, strict=True) if path.name != "member_report.yml"
    ]
    roles = {
        (include["name"], include.get("tasks_from", "main"))
        for document in own
        for action in ROLE_ACTIONS
        for include in found(document, action)
    }
    parts = {
        part
        for document in own
        for listed in found(document, "member_report_parts")
        for part in listed
    }
    plays = {
        str(play.get("hosts"))
        for doc in documents
        if isinstance(doc, list)
        for play in doc
        if isinstance(play, dict)
    }
    return OperationTraits(
        monitoring=any(role == "monitoring" for role, _ in roles) or bool(MONITORING_PARTS & parts),
        prepares_workers=("slurm_worker", "join") in roles,
        backup=any(BACKUP_VARIABLE in path.read_text() for path in role_files(roles)),
        # the joined workers' plays run over the group of those prepared in this run
        reports_joined_workers="slurm_app_prepared" in plays,
        leaves_workers_behind=ROOT / "playbooks" / "lifecycle.yml" in files,
        installs=any(installs_software(path) for path in [*files, *role_files(roles)]),
    )


def test_every_operation_of_the_manifest_is_declared_once():
    assert set(OPERATIONS) == set(PLAYBOOKS)


@pytest.mark.parametrize("operation", sorted(PLAYBOOKS))
def test_each_trait_is_what_the_playbook_shows(operation: str):
    assert OPERATIONS[operation] == shown(PLAYBOOKS[operation])
