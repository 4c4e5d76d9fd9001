"""The driver as the platform installs it: `pip install .` (runtime dependencies only), called
by its full path with no activated venv and a minimal environment."""

import json
import subprocess
from pathlib import Path

from conftest import EXAMPLES, MANIFESTS, ROOT, console_script

MINIMAL_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


def driver(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return console_script(*args, env=MINIMAL_ENV, venv=venv, cwd=cwd)


def test_runtime_install_has_no_dev_or_lab_dependencies(runtime_venv):
    listed = subprocess.run(
        [str(runtime_venv / "bin" / "pip"), "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"ansible-core", "ansible-runner", "pydantic", "jsonschema"} <= names
    assert not names & {"docker", "molecule", "pytest", "ansible", "ansible-lint"}


def test_runtime_install_carries_the_bundle(runtime_venv):
    bundles = list(runtime_venv.glob("lib/python3*/site-packages/driver/bundle"))
    assert len(bundles) == 1
    bundle = bundles[0]
    for path in ("ansible.cfg", "playbooks/deploy.yml", "roles/slurm_common/tasks/main.yml"):
        assert (bundle / path).is_file(), path
    assert (bundle / "manifests/slurm-reference/dashboards/slurm-overview.json").is_file()
    assert (runtime_venv / "bin" / "ansible-playbook").is_file()


def test_runtime_install_carries_the_license(runtime_venv):
    (licence,) = runtime_venv.glob("lib/python3*/site-packages/slurm_app_bundle-*/licenses/LICENSE")
    assert licence.read_text() == (ROOT / "LICENSE").read_text()
    assert "Apache License" in licence.read_text() and "Version 2.0" in licence.read_text()


def test_lint_schema_validate_and_inventory_work_from_a_runtime_install(runtime_venv, tmp_path):
    # run from an unrelated folder: nothing may depend on the source tree or the cwd
    lint = driver(runtime_venv, "lint", str(MANIFESTS), cwd=tmp_path)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "no findings" in lint.stdout
    for args in (["--help"], ["lab", "--help"], ["--print-completion", "bash"]):
        shown = driver(runtime_venv, *args, cwd=tmp_path)
        assert shown.returncode == 0 and shown.stderr == "", (args, shown.stderr)
    assert "exit codes: 0 ok" in driver(runtime_venv, "--help", cwd=tmp_path).stdout
    schema = driver(runtime_venv, "schema", "operation-request", cwd=tmp_path)
    assert schema.returncode == 0 and json.loads(schema.stdout)["type"] == "object"
    request = str(EXAMPLES / "slurm-reference" / "add_worker.json")
    valid = driver(runtime_venv, "validate-request", request, "--format", "json", cwd=tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert json.loads(valid.stdout)["valid"] is True
    inventory = driver(runtime_venv, "inventory", request, "--format", "json", cwd=tmp_path)
    assert inventory.returncode == 0, inventory.stderr
    assert len(json.loads(inventory.stdout)["all"]["hosts"]) == 2
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    invalid = driver(runtime_venv, "validate-request", str(broken), cwd=tmp_path)
    assert invalid.returncode == 2


def test_lab_without_its_extra_names_the_extra(runtime_venv, tmp_path):
    result = driver(runtime_venv, "lab", "status", cwd=tmp_path)
    assert result.returncode == 2
    assert "slurm-app-bundle[lab]" in result.stderr
    assert "Traceback" not in result.stderr


# A task's own CPUs (inherited from the Mitogen process that runs it) and that process's name.
AFFINITY_PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Read the task's CPUs and the process that runs it
      ansible.builtin.shell: >-
        (grep Cpus_allowed_list /proc/self/status; tr '\\0' ' ' < /proc/$PPID/cmdline) > {read}
      changed_when: false
"""


def test_playbooks_run_on_mitogen_unpinned_from_a_runtime_install(runtime_venv, tmp_path):
    """The strategy the driver names is in the wheel, loads with runtime dependencies only, and
    leaves the CPUs to the kernel: Mitogen's own policy pins a task's process to one CPU on a
    machine of 2 or 3 (bench/README.md)."""
    named = subprocess.run(
        [
            str(runtime_venv / "bin" / "python"),
            "-c",
            "import json; from driver.runner.run import MITOGEN_ENVIRONMENT; "
            "print(json.dumps(MITOGEN_ENVIRONMENT))",
        ],
        capture_output=True,
        text=True,
        env=MINIMAL_ENV,
        cwd=tmp_path,
        check=True,
    )
    strategy = json.loads(named.stdout)
    assert Path(strategy["ANSIBLE_STRATEGY_PLUGINS"]).is_relative_to(runtime_venv)
    playbook, read = tmp_path / "affinity.yml", tmp_path / "read"
    playbook.write_text(AFFINITY_PLAYBOOK.format(read=read))
    command = [str(runtime_venv / "bin" / "ansible-playbook"), "-i", "localhost,", "-c", "local"]
    ran = subprocess.run(
        [*command, str(playbook)],
        capture_output=True,
        text=True,
        env={**MINIMAL_ENV, **strategy, "HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    cpus, runner = read.read_text().splitlines()
    assert "(mitogen:" in runner, runner
    own = next(
        line
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("Cpus_allowed_list")
    )
    assert cpus == own
