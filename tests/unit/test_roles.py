"""Role hygiene checked in CI: specs match defaults, prefixes, no_log where secrets pass."""

from pathlib import Path

import pytest
import yaml
from conftest import ROOT

ROLES = sorted(p for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
# Task fragments that mean the task handles key material.
SECRET_MARKERS = ("munge.key", "munge_key", "__slurm_common_cluster_key", "munge -n", "unmunge")


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_argument_specs_match_defaults(role: Path):
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())
    options = specs["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    for name, spec in options.items():
        assert name.startswith(f"{role.name}_"), name
        assert spec.get("description"), name
        assert spec.get("default") == defaults[name], name


def _tasks(role: Path):
    for path in sorted((role / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            yield path, task


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_tasks_touching_key_material_hide_their_output(role: Path):
    checked = 0
    for path, task in _tasks(role):
        body = yaml.safe_dump({k: v for k, v in task.items() if k not in ("name", "when")})
        if any(marker in body for marker in SECRET_MARKERS) and not any(
            module in task
            for module in (
                "ansible.builtin.stat",
                "ansible.builtin.include_role",
                "ansible.builtin.include_tasks",
                "ansible.builtin.systemd_service",
            )
        ):
            assert task.get("no_log") is True, f"{path.name}: {task['name']}"
            checked += 1
    assert checked, "every Slurm role handles the munge key or a credential somewhere"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_internal_variables_are_double_underscored(role: Path):
    for vars_file in (role / "vars").glob("*.yml"):
        for name in yaml.safe_load(vars_file.read_text()) or {}:
            assert name.startswith(f"__{role.name}_"), name
