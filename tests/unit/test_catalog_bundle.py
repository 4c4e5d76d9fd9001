"""The catalog and the bundle agree: what a manifest declares, the bundle can run, and every
variable the driver hands to Ansible is one a role of that playbook declares."""

import ast
import json

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters
from conftest import EXAMPLES, MANIFESTS, ROOT

from driver.apps import ADAPTERS, adapter_for
from driver.apps.open_ondemand import APP_RUNTIMES
from driver.apps.open_ondemand.adapter import _app_runtime_rules
from driver.apps.slurm.adapter import OPERATION_OPTION_VARS, OPTION_VARS, PENDING_OPTIONS
from driver.catalog import CatalogError
from driver.documents import load_json
from driver.models.manifest import CatalogEntry
from driver.request_check import check_request
from driver.role_code import role_filters
from driver.runner.plan import RunPlan

ENTRIES = [
    CatalogEntry.model_validate(yaml.safe_load(path.read_text()))
    for path in sorted(MANIFESTS.glob("*/manifest.yaml"))
]
# Operations declared in the catalog whose playbooks are still to come, and the issue that
# brings each. A playbook that lands must leave this list (the test below insists).
# (app, operation) -> why its playbook is not in the bundle yet
PENDING_PLAYBOOKS: dict[tuple[str, str], str] = {}


def _operations():
    for entry in ENTRIES:
        for version in entry.versions:
            for operation in version.operations:
                yield entry.slug, version, operation


@pytest.mark.parametrize(
    ("slug", "operation"),
    [(slug, op) for slug, _, op in _operations()],
    ids=lambda v: v if isinstance(v, str) else v.type,
)
def test_every_declared_operation_has_its_playbook(slug, operation):
    playbook = ROOT / operation.playbook
    if (slug, operation.type) in PENDING_PLAYBOOKS:
        assert not playbook.exists(), f"{playbook} landed: take it off PENDING_PLAYBOOKS"
    else:
        assert playbook.is_file(), f"{slug} declares {operation.type} but {playbook} is missing"


def _roles_of(playbook) -> set[str]:
    """The roles a playbook runs: play `roles`, include_role/import_role, imported playbooks."""
    roles: set[str] = set()
    for play in yaml.safe_load(playbook.read_text()):
        if "ansible.builtin.import_playbook" in play:
            roles |= _roles_of(playbook.parent / play["ansible.builtin.import_playbook"])
            continue
        entries = [
            (role if isinstance(role, str) else role.get("role") or role["name"], "main")
            for role in play.get("roles", [])
        ]
        for section in ("pre_tasks", "tasks", "post_tasks"):
            for task in _playbook_tasks(playbook, play.get(section, [])):
                for action in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
                    if action in task:
                        include = task[action]
                        entries.append((include["name"], include.get("tasks_from", "main")))
        for role, tasks_from in entries:
            roles.add(role)
            # and the roles those task files include in turn (clean includes slurm_common's)
            roles |= {included for included, _ in _task_files(role, tasks_from)}
    return roles


TASK_FILE_ACTIONS = ("ansible.builtin.include_tasks", "ansible.builtin.import_tasks")
ROLE_ACTIONS = ("ansible.builtin.include_role", "ansible.builtin.import_role")


def _playbook_tasks(playbook, tasks: list) -> list:
    """A play's tasks, blocks opened and the playbooks' own task files (included or imported)
    followed."""
    flat = []
    for task in _flat(tasks):
        flat.append(task)
        for action in TASK_FILE_ACTIONS:
            if action in task:
                included = playbook.parent / task[action]
                flat += _playbook_tasks(included, yaml.safe_load(included.read_text()))
    return flat


def _flat(tasks: list) -> list:
    """Tasks with blocks (block, rescue, always) opened."""
    flat = []
    for task in tasks:
        flat.append(task)
        for part in ("block", "rescue", "always"):
            flat += _flat(task.get(part, []))
    return flat


def _role_options(role: str) -> set[str]:
    specs = yaml.safe_load((ROOT / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return {name for spec in specs["argument_specs"].values() for name in spec["options"]}


EXAMPLES_WITH_PLAYBOOKS = [
    path
    for path in sorted(EXAMPLES.glob("*/*.json"))
    if (path.parent.name, json.loads(path.read_text())["operation"]["type"])
    not in PENDING_PLAYBOOKS
]


@pytest.mark.parametrize("path", EXAMPLES_WITH_PLAYBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_variable_the_driver_emits_is_a_role_option(path):
    checked = check_request(load_json(path.read_text()))
    assert checked.request is not None and checked.version is not None, checked.findings
    plan = RunPlan.of(checked.request, checked.version)
    emitted = set(plan.inventory.group_vars)
    for host_vars in plan.inventory.hosts.values():
        # connection variables, Ansible's and Mitogen's, are no role's
        emitted |= {name for name in host_vars if not name.startswith(("ansible_", "mitogen_"))}
    options = set().union(*(_role_options(role) for role in _roles_of(plan.playbook)))
    assert emitted, "the adapter passes nothing on"
    assert emitted <= options, emitted - options


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.slug)
def test_every_bundled_app_has_an_adapter_covering_its_config(entry):
    adapter = ADAPTERS[entry.slug]
    assert adapter_for(entry.slug) is adapter
    for version in entry.versions:
        fields = set(version.config_schema.get("properties", {}))
        assert not adapter.config_fields & set(adapter.pending_config)
        assert adapter.config_fields | set(adapter.pending_config) == fields


def test_every_option_of_slurm_reference_is_passed_on_or_pending():
    options = {
        name
        for slug, _, operation in _operations()
        if slug == "slurm-reference"
        for name in operation.options_schema.get("properties", {})
    }
    by_operation = {option for _, option in OPERATION_OPTION_VARS}
    assert options == set(OPTION_VARS) | by_operation | set(PENDING_OPTIONS)


def _role_defaults() -> dict:
    defaults: dict = {}
    for path in sorted((ROOT / "roles").glob("*/defaults/main.yml")):
        defaults |= yaml.safe_load(path.read_text()) or {}
    return defaults


def test_a_request_without_config_gives_the_roles_their_own_defaults(monkeypatch, tmp_path):
    """A manifest's config default and the role default it feeds are one fact: an operator
    running the playbook without the driver gets what the catalog promises."""
    monkeypatch.setenv("SLURM_APP_SITE", str(tmp_path / "no-site.yaml"))
    example = EXAMPLES / "slurm-reference" / "deploy.json"
    data = json.loads(example.read_text())
    for name in ("cluster_name", "partitions", "accounting", "monitoring"):
        data["instance"]["config"].pop(name, None)
    checked = check_request(load_json(json.dumps(data)))
    assert checked.request is not None and checked.version is not None, checked.findings
    emitted = RunPlan.of(checked.request, checked.version).inventory.group_vars
    defaults = _role_defaults()
    compared = {name: value for name, value in emitted.items() if name in defaults}
    assert {
        "slurm_controller_cluster_name",
        "slurm_controller_partitions",
        "slurm_controller_accounting_enabled",
        "slurm_controller_default_account",
        "monitoring_enabled",
        "monitoring_prometheus_retention_time",
        "monitoring_prometheus_retention_size",
        "monitoring_prometheus_scrape_interval",
    } <= set(compared)
    for name, value in compared.items():
        # what the request itself says: its users, its key, which instance, which release
        if name not in (
            "slurm_common_users",
            "slurm_common_munge_key_src",
            "slurm_controller_instance_id",
            "slurm_common_release",
            "slurm_common_journal",
            # the driver's own: its lease's settings
            "slurm_common_lease",
        ):
            assert value == defaults[name], name


def _portal_plan(
    monkeypatch, tmp_path, operation: str = "deploy", cohosted: bool = False, upper: bool = False
):
    monkeypatch.setenv("SLURM_APP_SITE", str(tmp_path / "no-site.yaml"))
    data = json.loads((EXAMPLES / "open-ondemand" / "deploy.json").read_text())
    if upper:  # another spelling of the same UUIDs
        placement = data["instance"]["placement_intent"]
        placement["slurm_instance_id"] = placement["slurm_instance_id"].upper()
        data["linked_instances"][0]["id"] = data["linked_instances"][0]["id"].upper()
    for name in ("portal_title", "interactive_apps"):
        data["instance"]["config"].pop(name)
    data["operation"]["type"] = operation
    if cohosted:
        controller = data["linked_instances"][0]["members"][0]["allocation_id"]
        data["instance"]["placement_intent"]["host_allocation_id"] = controller
        data["members"][0]["allocation_id"] = controller
    checked = check_request(load_json(json.dumps(data)))
    assert checked.request is not None and checked.version is not None, checked.findings
    return RunPlan.of(checked.request, checked.version).inventory


def test_a_portal_request_without_config_gives_the_role_its_own_defaults(monkeypatch, tmp_path):
    emitted = _portal_plan(monkeypatch, tmp_path).group_vars
    defaults = _role_defaults()
    for name in ("open_ondemand_portal_title", "open_ondemand_interactive_apps"):
        assert emitted[name] == defaults[name], name
    oidc = emitted["open_ondemand_oidc"]
    for name in ("client_id", "remote_user_claim", "scopes"):
        assert oidc[name] == defaults["open_ondemand_oidc"][name], name
    # the secret is a file inside secrets_dir, never a value
    assert oidc["client_secret_src"] == (
        "/var/lib/gpuaas/credentials/proj-7f3a/6c1f9b63-4d2e-4a6f-8b32-8e5d3c2f1b02/secrets/"
        "ood-oidc-client-secret"
    )
    assert emitted["open_ondemand_source"] == defaults["open_ondemand_source"]
    # no site file: the sessions' idle stop at the role's own default
    assert (
        emitted["open_ondemand_session_idle_minutes"]
        == defaults["open_ondemand_session_idle_minutes"]
        == 60
    )


def test_the_sites_idle_stop_reaches_the_portal(monkeypatch, tmp_path):
    """The sessions' idle limit is the platform's (site.yaml `sessions.idle_minutes`), never
    the request's; 0 turns it off, a negative one is refused with the file named."""
    site = tmp_path / "no-site.yaml"
    site.write_text("sessions: {idle_minutes: 0}\n")
    assert _portal_plan(monkeypatch, tmp_path).group_vars["open_ondemand_session_idle_minutes"] == 0
    site.write_text("sessions: {idle_minutes: -5}\n")
    with pytest.raises(CatalogError, match=r"no-site\.yaml: invalid site settings"):
        _portal_plan(monkeypatch, tmp_path)


def test_a_companion_portal_reads_the_controller_on_deploy_only(monkeypatch, tmp_path):
    deploy = _portal_plan(monkeypatch, tmp_path)
    # the portal's own lease is on its host
    assert deploy.groups == {
        "open_ondemand": ["ood-01"],
        "slurm_controller": ["slurm-ctl"],
        "slurm_app_lease_holder": ["ood-01"],
    }
    assert deploy.group_vars["open_ondemand_cohosted"] is False
    assert deploy.group_vars["open_ondemand_cluster_name"] == "research"
    assert deploy.group_vars["open_ondemand_login_host"] == "10.40.0.10"
    assert deploy.group_vars["open_ondemand_server_name"] == "ood.research.example.com"
    assert _portal_plan(monkeypatch, tmp_path, "status").groups == {"open_ondemand": ["ood-01"]}
    for operation in ("restart", "decommission"):
        assert _portal_plan(monkeypatch, tmp_path, operation).groups == {
            "open_ondemand": ["ood-01"],
            "slurm_app_lease_holder": ["ood-01"],
        }
    # the /node/ proxy reaches the cluster's workers only: not the controller (no slurmd in
    # separate placement), not the portal itself
    assert deploy.group_vars["open_ondemand_node_addresses"] == ["10.40.0.11", "10.40.0.12"]


@pytest.mark.parametrize("upper", [False, True], ids=["canonical-ids", "upper-case-ids"])
def test_a_cohosted_portal_is_the_controller(monkeypatch, tmp_path, upper):
    """However the ids are spelled, a portal on the controller's allocation is co-hosted: its
    decommission never runs the companion's teardown there."""
    deploy = _portal_plan(monkeypatch, tmp_path, cohosted=True, upper=upper)
    assert deploy.groups == {
        "open_ondemand": ["slurm-ctl"],
        "slurm_controller": ["slurm-ctl"],
        "slurm_app_lease_holder": ["slurm-ctl"],
    }
    assert deploy.group_vars["open_ondemand_cohosted"] is True
    assert deploy.group_vars["open_ondemand_cluster_name"] == "research"
    for operation in ("decommission", "restart"):
        plan = _portal_plan(monkeypatch, tmp_path, operation, cohosted=True, upper=upper)
        assert plan.group_vars["open_ondemand_cohosted"] is True, operation


READ_ONLY_ACTIONS = {
    *TASK_FILE_ACTIONS,
    *ROLE_ACTIONS,
    "ansible.builtin.include_vars",
    "ansible.builtin.set_fact",
    "ansible.builtin.set_stats",
    "ansible.builtin.group_by",  # the control node's inventory, in memory
    "slurm_journal",  # a log line in the host's journal, never a change
    "ansible.builtin.service_facts",
    "ansible.builtin.setup",
    "ansible.builtin.meta",
    "ansible.builtin.assert",
    "ansible.builtin.command",
    "ansible.builtin.shell",  # like command: declares that it changes nothing
    "ansible.builtin.uri",  # GET only: checked below
    "slurm_read",  # the bundle's own: runs commands without a shell, GETs, changes nothing
}


def _task_files(role: str, tasks_from: str):
    path = ROOT / "roles" / role / "tasks" / f"{tasks_from}.yml"
    for task in _flat(yaml.safe_load(path.read_text()) or []):
        yield role, task
        for action in TASK_FILE_ACTIONS:
            if action in task:
                yield from _task_files(role, task[action].removesuffix(".yml"))
        yield from _role_task_files(task)


def _role_task_files(task: dict):
    """The role task files a task includes or imports, followed."""
    for action in ROLE_ACTIONS:
        if action in task:
            yield from _task_files(task[action]["name"], task[action].get("tasks_from", "main"))


@pytest.mark.parametrize("playbook", ["status.yml", "open_ondemand_status.yml"])
def test_status_only_reads(playbook):
    """Every task status runs, its role task files followed: no package, file or service task,
    and every command declares that it changes nothing."""
    seen = 0
    path = ROOT / "playbooks" / playbook
    plays = yaml.safe_load(path.read_text())
    for play in plays:
        imported = play.get("ansible.builtin.import_playbook")
        if imported:  # the journal's end: a log line (slurm_journal never changes anything)
            plays += yaml.safe_load((path.parent / imported).read_text())
            continue
        for task in _playbook_tasks(path, play["tasks"]):
            tasks = [(None, task), *_role_task_files(task)]
            for role, each in tasks:
                if "block" in each:
                    continue  # its tasks follow, opened by _flat
                action = next(
                    k
                    for k in each
                    if k.startswith("ansible.builtin.") or k in ("slurm_read", "slurm_journal")
                )
                assert action in READ_ONLY_ACTIONS, (role, each["name"], action)
                if action in ("ansible.builtin.command", "ansible.builtin.shell"):
                    assert each.get("changed_when") is False, (role, each["name"])
                if action == "ansible.builtin.uri":
                    assert each[action].get("method", "GET") == "GET", (role, each["name"])
                seen += 1
    assert seen >= 5


# What a member report may run on a host: each a read (slurm_read runs them without a shell).
READ_ONLY_COMMANDS = {
    ("scontrol", "ping"),
    ("scontrol", "show"),
    ("sinfo",),
    ("slurmctld", "-V"),
    ("slurmdbd", "-V"),
    ("slurmd", "-V"),
    ("munged", "--version"),
    ("sacctmgr", "-n", "-P", "show"),
    ("systemctl", "show"),
    ("df", "-B1"),
    ("/usr/local/libexec/slurm-app/backup", "status"),
}


@pytest.mark.parametrize("accounting", [True, False])
def test_every_report_read_is_a_read(accounting):
    """The commands in the roles' report data (tasks/member_report.yml runs them on every
    member, in status too), rendered with Ansible's filters and the role's: each starts as a
    known read."""
    filters = role_filters("slurm_output").FilterModule().filters()
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    environment.filters.update(CoreFilters().filters(), **filters)
    variables = {
        "slurm_controller_accounting_enabled": accounting,
        # one case with the platform's mount (where backups go), one without
        "slurm_common_facts": {"storage_mount": "/workspace" if accounting else ""},
        # the paths the reads name (the distributions' variables)
        **{
            name: value
            for role in ("slurm_controller", "slurm_worker", "monitoring")
            for name, value in yaml.safe_load(
                (ROOT / "roles" / role / "vars" / "main.yml").read_text()
            ).items()
        },
    }
    commands: dict[str, list[str]] = {}
    for role, name in [
        ("slurm_controller", "__slurm_controller_report_reads"),
        ("slurm_worker", "__slurm_worker_report_reads"),
        ("monitoring", "__monitoring_report_reads"),
        ("monitoring", "__monitoring_node_report_reads"),
    ]:
        reads = yaml.safe_load((ROOT / "roles" / role / "vars" / "main.yml").read_text())[name]

        def render(value):
            if not isinstance(value, str):
                return value
            return ast.literal_eval(environment.from_string(value).render(variables))

        rendered = render(reads["commands"])
        # an argv, or a slurm_command's {argv, environment}
        commands |= {
            name: argv["argv"] if isinstance(argv, dict) else argv
            for name, argv in ((name, render(given)) for name, given in rendered.items())
        }
        commands |= {
            unit_list: filters["slurm_unit_states_command"](["unit"])
            for unit_list in reads["units"]
        }
    assert {"controller_ping", "worker_slurmd", "monitoring_units"} <= commands.keys()
    assert ("controller_clusters" in commands) is accounting
    # the filesystems of the queue's state, and of the accounting database where there is one
    assert ("/var/lib/mysql" in commands["controller_disks"]) is accounting
    # and the platform's mount, where the backups are, when there is one
    assert ("/workspace" in commands["controller_disks"]) is accounting
    assert commands["monitoring_disks"][-1] == "/var/lib/prometheus/metrics2"
    for key, argv in commands.items():
        assert any(tuple(argv[: len(known)]) == known for known in READ_ONLY_COMMANDS), (key, argv)


def _manifest_config(slug: str) -> dict:
    manifest = yaml.safe_load((ROOT / "manifests" / slug / "manifest.yaml").read_text())
    return manifest["versions"][0]["config_schema"]["properties"]


def test_the_portal_role_checks_framing_origins_with_the_manifests_pattern():
    """The role's own check and the request's schema refuse the same origins."""
    role_vars = yaml.safe_load((ROOT / "roles/open_ondemand/vars/main.yml").read_text())
    pattern = _manifest_config("open-ondemand")["embed_origins"]["items"]["pattern"]
    assert pattern == role_vars["__open_ondemand_origin_pattern"]


def test_every_interactive_runtime_is_installable_and_every_app_runtime_exists():
    """The runtimes the cluster's manifest offers, the packages slurm_worker installs for
    them and the runtimes the portal's apps need name the same things."""
    offered = _manifest_config("slurm-reference")["interactive_runtimes"]["items"]["enum"]
    worker_vars = yaml.safe_load((ROOT / "roles/slurm_worker/vars/main.yml").read_text())
    assert sorted(offered) == sorted(worker_vars["__slurm_worker_runtime_packages"])
    assert set(APP_RUNTIMES.values()) <= set(offered)
    apps = _manifest_config("open-ondemand")["interactive_apps"]["items"]["enum"]
    assert set(APP_RUNTIMES) <= set(apps)


def test_an_app_without_a_runtime_is_refused_with_its_reason():
    """Issue 51 (5): RStudio is refused saying why (no package on these distributions); the
    desktop and VS Code only where the linked cluster's workers have their runtimes."""
    refused = {
        violation.path[-1]: violation.message
        for violation in _app_runtime_rules(
            {"interactive_apps": ["jupyter", "rstudio", "desktop", "vscode"]},
            {"interactive_runtimes": ["jupyter"]},
        )
    }
    assert sorted(refused) == [1, 2, 3]
    assert "RStudio Server is in no Debian 12 or 13 package" in refused[1]
    assert "list 'desktop' in its interactive_runtimes (its workers have jupyter)" in refused[2]
    assert "list 'vscode' in its interactive_runtimes" in refused[3]


def test_the_portal_names_the_workers_vncserver_and_idle_stop_where_they_install_them():
    common = yaml.safe_load((ROOT / "roles/slurm_common/vars/main.yml").read_text())
    portal = yaml.safe_load((ROOT / "roles/open_ondemand/vars/main.yml").read_text())
    assert portal["__open_ondemand_vnc_front_dir"] == common["__slurm_common_vnc_front_dir"]
    assert (
        portal["__open_ondemand_session_idle_command"]
        == common["__slurm_common_session_idle_command"]
    )


def test_the_prolog_reads_and_writes_where_slurm_common_says():
    """The nodes' Prolog and Epilog are a plain file (slurmd runs it as is): the GPU job
    mapping folder dcgm-exporter reads and the converged record the session audit names the
    instance from are written in it, and must stay slurm_common's."""
    common = yaml.safe_load((ROOT / "roles/slurm_common/vars/main.yml").read_text())
    script = (ROOT / "roles/slurm_common/files/slurm-app-gpu-job-map").read_text()
    assert f"\nmap_dir={common['__slurm_common_gpu_job_map_dir']}\n" in script
    assert f"' {common['__slurm_common_converged_by_record']} 2>/dev/null)" in script
