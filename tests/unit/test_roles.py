"""Role hygiene checked in CI: specs match defaults, prefixes, no_log where secrets pass."""

import hashlib
import importlib.util
import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from driver.role_code import role_filters

ROLES = sorted(p for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
# Task fragments that mean the task handles key material.
SECRET_MARKERS = (
    "munge.key",
    "munge_key",
    "__slurm_common_cluster_key",
    "munge -n",
    "unmunge",
    "/dev/urandom",
)
# The roles that handle key material: the key and the credential check (slurm_common, which the
# other roles include for both).
KEY_HANDLERS = {"slurm_common"}
# Where the key lives is no secret: naming the path alone does not make a task handle the key.
KEY_PATH_NAMES = (
    "__slurm_common_munge_key_path",
    "slurm_common_facts.munge_key",
    "munge_key:",
    "'munge_key':",
)


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


def test_every_roles_readme_is_made_from_its_argument_specs():
    """roles/<role>/README.md is what scripts/role_readmes.py makes of the role's argument
    specs as ansible-doc reads them: a spec changed without its README fails here."""
    check = ROOT / "scripts" / "role_readmes.py"
    done = subprocess.run([sys.executable, str(check), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {p.parent.name for p in ROOT.glob("roles/*/README.md")} == {r.name for r in ROLES}


def _role_includes(data) -> "list[dict]":
    """The arguments of every include_role/import_role in a parsed playbook or task file."""
    found = []
    if isinstance(data, dict):
        found += [data[action] for action in ROLE_ACTIONS if isinstance(data.get(action), dict)]
        for value in data.values():
            found += _role_includes(value)
    elif isinstance(data, list):
        for item in data:
            found += _role_includes(item)
    return found


def _role_entries(data) -> "list[tuple[str, str]]":
    """(role, tasks_from) of every include_role/import_role in a parsed playbook or task file."""
    return [(i["name"], i.get("tasks_from", "main")) for i in _role_includes(data)]


ROLE_ACTIONS = (
    "ansible.builtin.include_role",
    "ansible.builtin.import_role",
    "include_role",
    "import_role",
)


def test_every_entry_point_is_declared_and_every_other_task_file_marked_internal():
    """A tasks_from a playbook or another role uses has its argument_specs entry (Ansible
    checks its variables on the way in); a task file none uses from outside its role starts
    with `_`, so a reader tells the role's interface from its inside."""
    used: set[tuple[str, str]] = set()
    for path in [*(ROOT / "playbooks").rglob("*.yml"), *(ROOT / "roles").glob("*/tasks/*.yml")]:
        for role, tasks_from in _role_entries(yaml.safe_load(path.read_text())):
            if not path.is_relative_to(ROOT / "roles" / role):
                used.add((role, tasks_from.removesuffix(".yml")))
    assert len(used) > 40
    for role in ROLES:
        declared = set(
            yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        )
        assert {e for r, e in used if r == role.name} <= declared, role.name
        for path in (role / "tasks").glob("*.yml"):
            assert (path.stem in declared) != path.stem.startswith("_"), path


def test_an_operation_validates_the_roles_variables_once_per_run():
    """The preflight every changing operation imports validates all roles' main specs in one
    task for the run, a host per item; the playbooks' includes and a role's includes of
    another role's inner entry points validate nothing again (one validation per include and
    host was a fifth of a worker's deploy). A role's main, included by another role, still
    validates where the role runs alone."""
    preflight = yaml.safe_load((ROOT / "playbooks" / "preflight.yml").read_text())
    check = next(
        task
        for play in preflight
        for task in play["tasks"]
        if "validate_argument_spec" in str(task)
    )
    assert (
        check["run_once"] is True and "slurm_role_options" in check["vars"]["__preflight_options"]
    )
    found = importlib.util.spec_from_file_location(
        "slurm_role_options", ROOT / "playbooks" / "filter_plugins" / "slurm_role_options.py"
    )
    assert found is not None and found.loader is not None
    options = importlib.util.module_from_spec(found)
    found.loader.exec_module(options)
    assert set(options.ROLES) == {role.name for role in ROLES}
    playbooks = [*(ROOT / "playbooks").rglob("*.yml")]
    for path in playbooks:
        data = yaml.safe_load(path.read_text())
        assert not any("roles" in play for play in data if isinstance(play, dict)), path
        for include in _role_includes(data):
            assert include.get("rolespec_validate") is False, (path, include)
    inner = 0
    for role in ROLES:
        for path in (role / "tasks").glob("*.yml"):
            for include in _role_includes(yaml.safe_load(path.read_text())):
                if include["name"] != role.name and include.get("tasks_from", "main") != "main":
                    inner += 1
                    assert include.get("rolespec_validate") is False, (path, include)
    assert inner > 20


def _tasks(role: Path):
    for path in sorted((role / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            yield path, task


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_tasks_touching_key_material_hide_their_output(role: Path):
    checked = 0
    for path, task in _tasks(role):
        body = yaml.safe_dump({k: v for k, v in task.items() if k not in ("name", "when")})
        for path_name in KEY_PATH_NAMES:
            body = body.replace(path_name, "")
        if any(marker in body for marker in SECRET_MARKERS) and not any(
            module in task
            for module in (
                "ansible.builtin.stat",
                "ansible.builtin.include_role",
                "ansible.builtin.include_tasks",
                # an import's tasks are in the files this test reads
                "ansible.builtin.import_tasks",
                "ansible.builtin.import_role",
                "ansible.builtin.systemd_service",
            )
        ):
            assert task.get("no_log") is True, f"{path.name}: {task['name']}"
            checked += 1
    if role.name in KEY_HANDLERS:
        assert checked, f"{role.name} handles the munge key or a credential somewhere"


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_no_task_loads_variables_from_a_file(role: Path):
    """The distribution's variables are role variables (vars/main.yml): no include_vars, so
    no host's fact ever names a file the control node reads (issue 44, 9), and no worker pays
    a task per entry point for them (they were 14 of a worker's deploy)."""
    assert [path.name for path in (role / "vars").iterdir()] == ["main.yml"]
    for path in (role / "tasks").glob("*.yml"):
        assert "include_vars" not in path.read_text(), path.name


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_internal_variables_are_double_underscored(role: Path):
    for vars_file in (role / "vars").glob("*.yml"):
        for name in yaml.safe_load(vars_file.read_text()) or {}:
            assert name.startswith(f"__{role.name}_"), name


def _run_validate(
    tmp_path,
    role: str,
    group_vars: dict,
    groups: dict | None = None,
    hosts: dict | None = None,
    tasks_from: str = "validate",
    facts: bool = False,
    extra_vars: dict | None = None,
    then: list[dict] | None = None,
):
    """The role's validation tasks (`tasks_from`) with real ansible-playbook on the control
    node (every host of the inventory is the control node; `facts`: this machine's, gathered);
    `extra_vars` beat the role's own vars; `then`: tasks after it."""
    inventory = {
        "all": {
            "hosts": {
                name: {"ansible_connection": "local", **host_vars}
                for name, host_vars in (hosts or {"ctl": {}}).items()
            },
            "vars": {"ansible_python_interpreter": sys.executable, **group_vars},
            "children": groups
            or {
                "slurm_controller": {"hosts": {"ctl": {}}},
                "slurm_workers": {"hosts": {"ctl": {}}},
            },
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "all",
                    "gather_facts": facts,
                    "tasks": [
                        {
                            "ansible.builtin.include_role": {
                                "name": role,
                                "tasks_from": tasks_from,
                            }
                        },
                        *(then or []),
                    ],
                }
            ]
        )
    )
    return _playbook(tmp_path, *(("-e", json.dumps(extra_vars)) if extra_vars else ()))


def _playbook(
    folder: Path, *arguments: str, environment: dict | None = None
) -> subprocess.CompletedProcess:
    """Real ansible-playbook on `folder`'s play.yml and inventory.yml, with the bundle's roles
    and a minimal environment (`environment` added)."""
    return subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            *("-i", "inventory.yml", "play.yml", *arguments),
        ],
        cwd=folder,
        capture_output=True,
        text=True,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(folder),
            "LANG": "C.UTF-8",
            "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
            **(environment or {}),
        },
        check=False,
        timeout=120,
    )


USERS_OK = [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002, "gid": 3000}]
DEBIAN_HOST = {"ansible_facts": {"os_family": "Debian"}}
RETENTION = yaml.safe_load((ROOT / "roles/slurm_controller/defaults/main.yml").read_text())[
    "slurm_controller_accounting_retention"
]


@pytest.mark.parametrize(
    ("users", "expected"),
    [
        (USERS_OK, None),
        ([{"name": "root", "uid": 2001}], "users[0].name: expected a name that no system"),
        (
            [{"name": "alice", "uid": 2001, "gid": 2002}, {"name": "bob", "uid": 2002}],
            "users[1].uid: gid 2002 is already used by users[0]",
        ),
        ([{"name": "carol", "uid": 1000}], "users[0].uid: 1000 is the first login user"),
        ([{"name": "carol", "uid": 1000, "claim_id_1000": True}], None),
    ],
)
def test_slurm_common_refuses_users_an_operator_gets_wrong(tmp_path, users, expected):
    ran = _run_validate(
        tmp_path, "slurm_common", {"slurm_common_users": users}, extra_vars=DEBIAN_HOST
    )
    if expected is None:
        assert ran.returncode == 0, ran.stdout[-2000:]
    else:
        assert ran.returncode != 0
        assert expected in ran.stdout, ran.stdout[-2000:]


def test_slurm_common_refuses_a_host_of_another_family_before_anything_changes(tmp_path):
    """The roles' distribution variables are the Debian family's, role variables that no task
    loads: a member of another family is refused by name, with what is supported."""
    ran = _run_validate(
        tmp_path,
        "slurm_common",
        {"slurm_common_users": USERS_OK},
        extra_vars={"ansible_facts": {"os_family": "RedHat"}},
    )
    assert ran.returncode != 0
    assert "os_family RedHat is not supported (supported: Debian)" in ran.stdout, ran.stdout


@pytest.mark.parametrize(
    ("group_vars", "groups", "expected"),
    [
        ({}, None, None),
        ({"slurm_controller_partitions": [{"name": "Default", "default": True}]}, None, "DEFAULT"),
        (
            {"slurm_controller_partitions": [{"name": "a"}, {"name": "b"}]},
            None,
            "exactly one with default: true",
        ),
        ({}, {"slurm_controller": {"hosts": {"ctl": {}}}}, "at least one in slurm_workers"),
        (
            {
                "slurm_controller_accounting_enabled": False,
                "slurm_controller_partitions": [
                    {"name": "a", "default": True, "allow_accounts": ["team"]}
                ],
            },
            None,
            "need slurm_controller_accounting_enabled: true",
        ),
        (
            {"slurm_controller_accounting_enabled": False, "slurm_controller_priority": {"x": 1}},
            None,
            "need slurm_controller_accounting_enabled: true",
        ),
        (
            {
                "slurm_controller_qos": [{"name": "gpu", "max_gpus_per_user": 1}],
                "slurm_controller_accounts": [{"name": "team", "qos": ["gpu"]}],
                "slurm_controller_priority": {"weight_qos": 2000},
            },
            None,
            None,
        ),
        (
            {"slurm_controller_accounting_retention": {**RETENTION, "jobs": "1year"}},
            None,
            "each a number of hours, days or months",
        ),
        (
            {"slurm_controller_accounting_retention": {**RETENTION, "jobs": "12months\nX=1"}},
            None,
            "each a number of hours, days or months",
        ),
        (
            {"slurm_controller_accounting_retention": {"jobs": "12months"}},
            None,
            "needs jobs, steps, events",
        ),
    ],
)
def test_slurm_controller_refuses_what_an_operator_gets_wrong(
    tmp_path, group_vars, groups, expected
):
    # slurm_controller's entry point `checks` also reads the running cluster
    ran = _run_validate(tmp_path, "slurm_controller", group_vars, groups, tasks_from="_validate")
    if expected is None:
        assert ran.returncode == 0, ran.stdout[-2000:]
    else:
        assert ran.returncode != 0
        assert expected in ran.stdout, ran.stdout[-2000:]


TWO_WORKERS = {
    "slurm_controller": {"hosts": {"ctl": {}}},
    "slurm_workers": {"hosts": {"w1": {}, "w2": {}}},
}


@pytest.mark.parametrize(
    ("hosts", "groups", "expected"),
    [
        ({"ctl": {}, "w1": {}, "w2": {}}, TWO_WORKERS, None),
        (
            {"w1": {}, "w2": {}},
            {"slurm_workers": {"hosts": {"w1": {}, "w2": {}}}},
            "exactly one host in group slurm_controller",
        ),
        (
            {"ctl": {}, "w1": {"slurm_worker_node_name": "gpu-1"}, "w2": {}},
            TWO_WORKERS,
            None,
        ),
        (
            {"ctl": {}, "w1": {"slurm_worker_node_name": "node_1"}, "w2": {}},
            TWO_WORKERS,
            'slurm_worker_node_name "node_1" must be a host name',
        ),
        (
            {"ctl": {}, "w1": {"slurm_worker_node_name": "w2"}, "w2": {}},
            TWO_WORKERS,
            "slurm_worker_node_name repeats among the workers: w2 (2 times).",
        ),
    ],
)
def test_slurm_worker_refuses_what_an_operator_gets_wrong(tmp_path, hosts, groups, expected):
    ran = _run_validate(tmp_path, "slurm_worker", {}, groups, hosts)
    if expected is None:
        assert ran.returncode == 0, ran.stdout[-2000:]
    else:
        assert ran.returncode != 0
        assert expected in ran.stdout, ran.stdout[-2000:]


# this machine's Debian release, as ansible_facts' distribution_major_version reads it
HOST_RELEASE = platform.freedesktop_os_release()["VERSION_ID"].split(".")[0]


@pytest.mark.parametrize(
    ("releases", "expected"),
    [
        ({HOST_RELEASE: {"version": "4.100.3", "integrity": "sha512-AA=="}}, None),
        (
            {"99": {"version": "4.0.0", "integrity": "sha512-AA=="}},
            "the vscode runtime needs code-server built for this release's Node.js: Debian 99 "
            f"only (this host runs {HOST_RELEASE})",
        ),
    ],
)
def test_slurm_worker_refuses_vscode_where_code_server_has_no_release(tmp_path, releases, expected):
    """Checked with the worker's variables, before the runtime's toolchain is in the host's
    package transaction; the release map laid over the role's for this machine's release."""
    ran = _run_validate(
        tmp_path,
        "slurm_worker",
        {"slurm_worker_interactive_runtimes": ["vscode"]},
        facts=True,
        extra_vars={"__slurm_worker_code_server_releases": releases},
    )
    if expected is None:
        assert ran.returncode == 0, ran.stdout[-2000:]
    else:
        assert ran.returncode != 0
        assert expected in " ".join(ran.stdout.split()), ran.stdout[-2000:]


@pytest.mark.parametrize("target_there", [True, False])
def test_the_converge_reading_reads_a_managed_link_as_the_file_it_names(tmp_path, target_there):
    """The unchanged-deploy check (converged_probe.yml, on this machine): a managed path that
    is a link, as the vscode runtime's command is, is read as the file it names; with that
    file gone the link is not read, so the reading differs and the next deploy converges."""
    target = tmp_path / "code-server" / "entry.js"
    target.parent.mkdir()
    target.write_text("code-server's entry point\n")
    (tmp_path / "command").symlink_to(target)
    if not target_there:
        target.unlink()
    reading = tmp_path / "reading.txt"
    ran = _run_validate(
        tmp_path,
        "slurm_common",
        {},
        tasks_from="converged_probe",
        facts=True,
        extra_vars={
            "__slurm_common_converge": {
                "paths": [str(tmp_path / "command")],
                "packages": [],
                "units": [],
                "record": str(tmp_path / "record"),
            },
            # what converged.yml binds the reading to
            "__slurm_common_converge_inputs": "request-digest",
        },
        then=[
            {
                "ansible.builtin.copy": {
                    "content": "{{ __slurm_common_reading.stdout }}",
                    "dest": str(reading),
                    "mode": "0600",
                }
            }
        ],
    )
    assert ran.returncode == 0, ran.stdout[-2000:]
    digest = hashlib.sha256(b"code-server's entry point\n").hexdigest()
    line = f"{digest}  {tmp_path / 'command'}"
    assert (line in reading.read_text().splitlines()) is target_there, reading.read_text()


def test_the_record_a_converge_writes_is_what_the_next_deploys_reading_gives(tmp_path):
    """A converge's record is read and written in one step (slurm_files' `converged`, on this
    machine) and compared by the next deploy's decision (converged.yml: its own reading step,
    the record after the marker): an unchanged member must be found converged, or every
    deploy would converge again."""
    (tmp_path / "managed").write_text("a managed file\n")
    record = tmp_path / "state" / "converged"
    decision = tmp_path / "decision.json"
    marker = _role_vars("slurm_common")["__slurm_common_probe_marker"]
    ran = _run_validate(
        tmp_path,
        "slurm_common",
        {},
        tasks_from="converged_record",
        facts=True,
        extra_vars={
            "slurm_common_converge_scope": {
                "paths": [str(tmp_path / "managed")],
                "packages": ["dpkg"],
                "units": [],
                "record": str(record),
            },
            "__slurm_common_converge_inputs": "request-digest",
        },
        then=[
            {
                "ansible.builtin.include_role": {"name": "slurm_common", "tasks_from": "converged"},
                "vars": {"slurm_common_converge_check": True},
            },
            {
                "ansible.builtin.copy": {
                    "content": "{{ {'converged': slurm_common_converged, 'reading': "
                    "__slurm_common_reading | slurm_converge_reading('request-digest', "
                    f"{marker!r})}} | to_json }}}}",
                    "dest": str(decision),
                    "mode": "0600",
                }
            },
        ],
    )
    assert ran.returncode == 0, ran.stdout[-2000:]
    decided = json.loads(decision.read_text())
    compared = decided["reading"]
    assert compared["fingerprint"].startswith("request-digest "), compared
    assert compared["fingerprint"] == compared["recorded"] == record.read_text().strip()
    assert decided["converged"] is True
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    assert oct(record.parent.stat().st_mode & 0o777) == "0o700"


def _role_vars(role: str) -> dict:
    return yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text())


def test_a_release_keeps_the_scheduled_backups_units_the_controller_installs():
    """slurm_common's release scope names the controller's backup units, which it cannot read
    from slurm_controller's variables: a unit renamed in one and not the other would be left
    out of an upgrade's snapshot and a rollback's restore."""
    units = _role_vars("slurm_controller")["__slurm_controller_backup_unit_paths"]
    scope = _role_vars("slurm_common")["__slurm_common_release_scope"]
    assert units and all(f"'{path}'" in scope for path in units), units


def test_the_converge_reading_covers_every_package_and_unit_the_roles_install():
    """slurm_common's unchanged-re-run check reads the packages and units it lists: one a role
    installs but the list lacks could be removed by hand and the next deploy would not notice."""
    common = _role_vars("slurm_common")
    managed_packages = set(common["__slurm_common_managed_packages"])
    managed_units = set(common["__slurm_common_managed_units"])
    controller, worker = _role_vars("slurm_controller"), _role_vars("slurm_worker")
    monitoring = _role_vars("monitoring")
    installed = {
        *common["__slurm_common_packages"],
        *(p for packages in common["__slurm_common_release_packages"].values() for p in packages),
        *controller["__slurm_controller_packages"],
        *controller["__slurm_controller_accounting_packages"],
        *worker["__slurm_worker_packages"],
        *(p for packages in worker["__slurm_worker_runtime_packages"].values() for p in packages),
        *monitoring["__monitoring_prometheus_packages"],
        monitoring["__monitoring_node_exporter_package"],
        *monitoring["__monitoring_dcgm_packages"],
    }
    units = {
        *monitoring["__monitoring_prometheus_units"],
        monitoring["__monitoring_node_exporter_unit"],
        monitoring["__monitoring_exporter_unit"],
        monitoring["__monitoring_dcgm_exporter_unit"],
    }
    assert installed - managed_packages == set()
    assert units - managed_units == set()


DPKG = [
    "munge ii ",
    "slurm-client ii ",
    "slurmd un ",  # known to dpkg, never installed
    "prometheus-node-exporter rc ",  # removed, its configuration left
    "jupyter-notebook ii ",  # a runtime no longer asked for, still there
    "xvnc rc ",  # one removed before
]
SETS = [
    {"packages": ["munge", "slurm-client"]},
    {"packages": ["slurmd", "munge"], "units": ["slurmd"], "absent": ["jupyter-notebook", "xvnc"]},
    {
        "packages": ["prometheus-node-exporter"],
        "units": ["prometheus-node-exporter"],
        "optional": True,
    },
]


@pytest.mark.parametrize(
    ("dpkg", "with_optional", "plan"),
    [
        (
            DPKG,
            True,
            {
                "packages": ["slurmd", "prometheus-node-exporter"],
                "units": ["slurmd", "prometheus-node-exporter"],
                "wanted": ["munge", "slurm-client", "slurmd", "prometheus-node-exporter"],
                # of what a set removes where the host holds it, what the host holds
                "held": ["jupyter-notebook"],
            },
        ),
        # an optional set that failed: the others without it
        (
            DPKG,
            False,
            {
                "packages": ["slurmd"],
                "units": ["slurmd"],
                "wanted": ["munge", "slurm-client", "slurmd"],
                "held": ["jupyter-notebook"],
            },
        ),
        # a re-run: nothing to install, and no running daemon's unit is masked
        (
            [*DPKG[:2], "slurmd ii ", "prometheus-node-exporter ii "],
            True,
            {
                "packages": [],
                "units": [],
                "wanted": ["munge", "slurm-client", "slurmd", "prometheus-node-exporter"],
                "held": [],
            },
        ),
        # only the exporter missing: only its unit is masked
        (
            [*DPKG[:2], "slurmd ii "],
            True,
            {
                "packages": ["prometheus-node-exporter"],
                "units": ["prometheus-node-exporter"],
                "wanted": ["munge", "slurm-client", "slurmd", "prometheus-node-exporter"],
                "held": [],
            },
        ),
    ],
)
def test_one_transaction_installs_what_dpkg_lacks_and_masks_only_those_sets_units(
    dpkg, with_optional, plan
):
    packages = role_filters("slurm_packages")
    assert packages.slurm_install_plan(SETS, dpkg, with_optional=with_optional) == plan


@pytest.mark.parametrize(
    ("users", "refused"),
    [([{"name": "alice", "uid": 2001}], False), ("alice", True)],
)
def test_the_preflight_checks_the_given_variables_on_a_host_of_any_role(tmp_path, users, refused):
    """The preflight validates what the inventory gives each host against the roles' specs,
    in one step for the run: a host's own value is checked (the first host's is fine), on a
    portal host too, whose inventory has no slurm_controller group for slurm_common's default
    controller to name (the roles' defaults are not read)."""
    local = {"ansible_connection": "local"}
    inventory = {
        "all": {
            "hosts": {"first": local, "portal": local | {"slurm_common_users": users}},
            "children": {"open_ondemand": {"hosts": {"portal": {}}}},
            "vars": {"ansible_python_interpreter": sys.executable, "slurm_common_users": []},
        }
    }
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(
        yaml.safe_dump([{"ansible.builtin.import_playbook": str(ROOT / "playbooks/preflight.yml")}])
    )
    ran = _playbook(tmp_path, environment={"ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")})
    assert (ran.returncode != 0) is refused, ran.stdout[-2000:]
    if refused:
        assert "(item=portal)" in ran.stdout, ran.stdout[-2000:]
        assert "Elements value for option 'slurm_common_users'" in ran.stdout, ran.stdout[-2000:]
        assert "(item=first)" not in ran.stdout.split("Elements value")[0].split("\n")[-1]


def test_the_converge_decision_reads_a_reading_as_the_record_wrote_it():
    """slurm_converge_reading: the record written after a converge (a reading without the last
    record) holds the fingerprint the next deploy's reading (with the record after the marker)
    gives, so an unchanged member compares equal; a member that could not be read has none."""
    converge = role_filters("slurm_converge")
    marker = "--- the last record ---"
    # as Ansible registers a command's output: without its last newline
    state = "abc  /etc/slurm/slurm.conf\nmunge 0.5 installed"
    after_converge = converge.slurm_converge_reading({"rc": 0, "stdout": state}, "req", marker)
    assert after_converge["recorded"] == ""
    record = after_converge["fingerprint"]
    assert record == f"req {hashlib.sha256(state.encode()).hexdigest()}"
    next_deploy = converge.slurm_converge_reading(
        {"rc": 0, "stdout": f"{state}\n{marker}\n{record}"}, "req", marker
    )
    assert next_deploy == {"fingerprint": record, "recorded": record}
    changed = converge.slurm_converge_reading(
        {"rc": 0, "stdout": f"{state}x\n{marker}\n{record}"}, "req", marker
    )
    assert changed["fingerprint"] != changed["recorded"]
    unread = converge.slurm_converge_reading({"rc": 1, "stdout": state}, "req", marker)
    assert unread["fingerprint"] == ""
