"""Placement -> inventory: only the hosts an operation touches, in the right groups."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import example

from bench.requests import add_worker_request
from driver.documents import load_json
from driver.inventory import apply_defaults, inventory_yaml
from driver.models.request import OperationRequest
from driver.request_check import check_request
from driver.runner.plan import RunPlan


def _inventory(name: str, mutate=None):
    data = example(name)
    if mutate:
        mutate(data)
    result = check_request(load_json(json.dumps(data)))
    assert result.valid, result.findings
    assert result.request is not None and result.version is not None
    request: OperationRequest = result.request
    return RunPlan.of(request, result.version).inventory


def test_deploy_separate_touches_controller_and_initial_workers():
    inventory = _inventory("slurm-reference/deploy")
    assert inventory.groups == {
        "slurm_controller": ["slurm-ctl"],
        "monitoring": ["slurm-ctl"],
        "slurm_workers": ["gpu-01", "gpu-02"],
        "slurm_app_lease_holder": ["slurm-ctl"],
    }
    host = inventory.hosts["gpu-01"]
    assert (host["ansible_host"], host["ansible_port"], host["ansible_user"]) == (
        "10.40.0.11",
        22,
        "root",
    )
    assert host["ansible_ssh_private_key_file"].endswith("/id_ed25519")
    # the e2e test reads the name the host's process gets from it: no user or host of the driver
    assert host["mitogen_mask_remote_name"] is True


def test_deploy_same_node_makes_the_controller_a_worker():
    inventory = _inventory("slurm-reference/deploy-same-node")
    assert inventory.groups["slurm_controller"] == ["slurm-ctl"]
    assert inventory.groups["slurm_workers"] == ["slurm-ctl"]
    assert list(inventory.hosts) == ["slurm-ctl"]


def test_a_deploy_reaches_every_worker_joined_since_and_none_removed():
    """A config change must reach a worker that add_worker joined after the first deploy (its
    new users, its runtimes), and never an initial worker a remove took out, though the
    platform's placement intent still names it."""
    joined = example("slurm-reference/add_worker")

    def later(request):
        request["allocations"] = joined["allocations"]
        request["members"] = [
            {**member, "status": "removed" if member["member_id"] == "m-w1" else "ready"}
            for member in joined["members"]
        ]

    inventory = _inventory("slurm-reference/deploy", later)
    assert list(inventory.hosts) == ["slurm-ctl", "gpu-02", "gpu-03"]
    assert inventory.groups["slurm_workers"] == ["gpu-02", "gpu-03"]


@pytest.mark.parametrize(
    ("operation", "hosts"),
    [
        ("add_worker", ["slurm-ctl", "gpu-03"]),
        ("add_workers", ["slurm-ctl", "gpu-03", "gpu-04", "gpu-05"]),
        ("replace_worker", ["slurm-ctl", "gpu-02", "gpu-03"]),
        ("drain_worker", ["slurm-ctl"]),
        ("resume_worker", ["slurm-ctl"]),
        ("remove_worker", ["slurm-ctl", "gpu-02"]),
        ("status", ["slurm-ctl", "gpu-01", "gpu-02"]),
    ],
)
def test_member_operations_touch_only_their_hosts(operation, hosts):
    inventory = _inventory(f"slurm-reference/{operation}")
    assert list(inventory.hosts) == hosts


def test_adding_a_worker_to_a_10000_worker_cluster_touches_two_hosts():
    result = check_request(load_json(json.dumps(add_worker_request(10000))))
    assert result.valid, result.findings[:3]
    assert result.request is not None and result.version is not None
    inventory = RunPlan.of(result.request, result.version).inventory
    assert list(inventory.hosts) == ["slurm-ctl", "gpu-03"]
    assert inventory.groups["slurm_workers"] == ["gpu-03"]


def test_config_defaults_reach_the_roles():
    inventory = _inventory("slurm-reference/deploy-same-node")
    assert inventory.group_vars["slurm_controller_cluster_name"] == "dev"
    assert inventory.group_vars["slurm_controller_partitions"] == [
        {"name": "batch", "default": True, "max_time": "UNLIMITED"}
    ]
    assert inventory.group_vars["slurm_controller_accounting_enabled"] is True
    assert inventory.group_vars["slurm_common_users"] == []


def test_grafana_login_settings_reach_the_monitoring_role():
    def proxied(request):
        grafana = request["instance"]["config"]["monitoring"]["grafana"]
        grafana["root_url"] = "https://console.example.com/i/7f3a/grafana/"
        grafana["oidc"]["claims_from"] = "id_token"

    default = _inventory("slurm-reference/deploy").group_vars
    assert "monitoring_grafana_root_url" not in default  # the role's: the controller's address
    assert default["monitoring_grafana_oidc"]["claims_from"] == "access_token"
    group_vars = _inventory("slurm-reference/deploy", proxied).group_vars
    assert (
        group_vars["monitoring_grafana_root_url"] == "https://console.example.com/i/7f3a/grafana/"
    )
    assert group_vars["monitoring_grafana_oidc"]["claims_from"] == "id_token"


def test_alert_receivers_reach_the_monitoring_role_with_secrets_as_files():
    def receivers(request):
        request["instance"]["config"]["monitoring"]["alerting"] = {
            "webhook": {"url": "https://alerts.example.com/hook", "bearer_token_secret_ref": "t"},
            "email": {
                "to": ["ops@example.org"],
                "from": "slurm@example.org",
                "smarthost": "smtp.example.org:587",
                "auth_username": "slurm",
                "auth_password_secret_ref": "smtp",
            },
            "group_wait": "10s",
        }

    default = _inventory("slurm-reference/deploy").group_vars
    assert "monitoring_alertmanager_webhook" not in default
    assert default["monitoring_alertmanager_group_interval"] == "5m"  # the schema's default
    group_vars = _inventory("slurm-reference/deploy", receivers).group_vars
    secrets = Path(example("slurm-reference/deploy")["credentials"]["secrets_dir"])
    assert group_vars["monitoring_alertmanager_webhook"] == {
        "url": "https://alerts.example.com/hook",
        "bearer_token_src": str(secrets / "t"),
    }
    assert group_vars["monitoring_alertmanager_email"] == {
        "to": ["ops@example.org"],
        "from": "slurm@example.org",
        "smarthost": "smtp.example.org:587",
        "require_tls": True,
        "auth_username": "slurm",
        "auth_password_src": str(secrets / "smtp"),
    }
    assert group_vars["monitoring_alertmanager_group_wait"] == "10s"


def test_apply_defaults_fills_nested_objects_only_where_missing():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "default": {}, "properties": {"b": {"default": 1}}},
            "c": {"default": "x"},
        },
    }
    assert apply_defaults(schema, {}) == {"a": {"b": 1}, "c": "x"}
    assert apply_defaults(schema, {"a": {"b": 2}, "c": "y"}) == {"a": {"b": 2}, "c": "y"}


def test_apply_defaults_fills_each_object_of_an_array():
    item = {"type": "object", "properties": {"max_time": {"default": "UNLIMITED"}, "tags": {}}}
    schema = {"type": "object", "properties": {"parts": {"type": "array", "items": item}}}
    given = {"parts": [{"name": "a"}, {"name": "b", "max_time": "1:00:00"}, "not an object"]}
    assert apply_defaults(schema, given) == {
        "parts": [
            {"name": "a", "max_time": "UNLIMITED"},
            {"name": "b", "max_time": "1:00:00"},
            "not an object",
        ]
    }


PLAYBOOK_BINARY = str(Path(sys.executable).parent / "ansible-playbook")


NUMBER_TAG, BOOL_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:bool"


def _string_scalars(node, is_key=False):
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from _string_scalars(key, True)
            yield from _string_scalars(value)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            yield from _string_scalars(item)
    # ansible-core 2.19 types `!unsafe` text as YAML would ('' -> None, '30:00' -> 1800):
    # such strings are left plainly quoted (they hold no template: no `{`)
    elif (
        not is_key
        and node.tag not in (NUMBER_TAG, BOOL_TAG)
        and yaml.resolver.Resolver().resolve(yaml.ScalarNode, node.value, (True, False))
        == "tag:yaml.org,2002:str"
        and node.value != ""
    ):
        yield node


@pytest.mark.parametrize("name", ["slurm-reference/deploy", "slurm-reference/add_worker"])
def test_every_string_in_the_inventory_is_marked_unsafe(name):
    inventory = _inventory(name)
    scalars = list(_string_scalars(yaml.compose(inventory_yaml(inventory.as_runner_inventory()))))
    assert scalars
    assert {node.tag for node in scalars} == {"!unsafe"}


def test_request_strings_reach_ansible_unevaluated(tmp_path):
    """Real ansible-playbook, local connection: a template in any inventory string stays text."""
    marker = tmp_path / "pwned"
    payload = "{{ lookup('pipe', 'touch " + str(marker) + "') }}"
    body = {
        "all": {
            "hosts": {
                "target": {
                    "ansible_connection": "local",
                    "ansible_python_interpreter": sys.executable,
                    "label": payload,
                }
            },
            "vars": {
                "config": {"users": [{"name": payload}], "cluster_name": payload},
                "empty": "",
                # strings YAML 1.1 would read as other types: a partition's MaxTime of 30
                # minutes must not become 1800 (which Slurm reads as 1800 minutes)
                "look_alikes": ["30:00", "1:00:00", "yes", "0123", "1e3", "null", "~"],
            },
        }
    }
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(inventory_yaml(body))
    out = tmp_path / "out.txt"
    playbook = tmp_path / "play.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "all",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "ansible.builtin.copy": {
                                "content": "{{ label }}\n{{ config.users[0].name }}\n"
                                "{{ config.cluster_name }}\n{{ empty | length }}\n"
                                "{{ look_alikes | join('|') }}\n",
                                "dest": str(out),
                                "mode": "0600",
                            }
                        }
                    ],
                }
            ]
        )
    )
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            str(inventory),
            str(playbook),
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(tmp_path)},
        check=False,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert not marker.exists()
    assert out.read_text() == f"{payload}\n" * 3 + "0\n" + "30:00|1:00:00|yes|0123|1e3|null|~\n"
