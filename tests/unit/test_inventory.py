"""Placement -> inventory: only the hosts an operation touches, in the right groups."""

import json

import pytest
from conftest import example

from bench.requests import add_worker_request
from driver.documents import load_json
from driver.models.request import OperationRequest
from driver.request_check import check_request
from driver.runner.inventory import apply_defaults, build_inventory
from driver.runner.run import APP_INVENTORY_VARS


def _inventory(name: str, mutate=None):
    data = example(name)
    if mutate:
        mutate(data)
    result = check_request(load_json(json.dumps(data)))
    assert result.valid, result.findings
    assert result.request is not None and result.version is not None
    request: OperationRequest = result.request
    return build_inventory(request, result.version, APP_INVENTORY_VARS[request.instance.app_slug])


def test_deploy_separate_touches_controller_and_initial_workers():
    inventory = _inventory("slurm-reference/deploy")
    assert inventory.groups == {
        "slurm_controller": ["slurm-ctl"],
        "monitoring": ["slurm-ctl"],
        "slurm_workers": ["gpu-01", "gpu-02"],
    }
    host = inventory.hosts["gpu-01"]
    assert (host["ansible_host"], host["ansible_port"], host["ansible_user"]) == (
        "10.40.0.11",
        22,
        "root",
    )
    assert host["ansible_ssh_private_key_file"].endswith("/id_ed25519")


def test_deploy_same_node_makes_the_controller_a_worker():
    inventory = _inventory("slurm-reference/deploy-same-node")
    assert inventory.groups["slurm_controller"] == ["slurm-ctl"]
    assert inventory.groups["slurm_workers"] == ["slurm-ctl"]
    assert list(inventory.hosts) == ["slurm-ctl"]


@pytest.mark.parametrize(
    ("operation", "hosts"),
    [
        ("add_worker", ["slurm-ctl", "gpu-03"]),
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
    inventory = build_inventory(
        result.request, result.version, APP_INVENTORY_VARS[result.request.instance.app_slug]
    )
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
