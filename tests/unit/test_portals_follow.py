"""Issue 69 item 2: a cluster's replace_controller carries the portals attached to it (in
linked_instances, their placement naming the cluster) and points each one at the new
controller. The request's rules, the inventory and the result's `portals`."""

import json

import pytest
from conftest import example

from driver.apps.slurm.adapter import SlurmReference
from driver.apps.slurm.portals import COHOSTED
from driver.documents import load_json
from driver.request_check import check_request
from driver.runner.plan import RunPlan

PORTAL = example("open-ondemand/deploy")


def _with_portal(operation: str, host_allocation: str | None = None, names: str | None = None):
    """The slurm-reference example `operation` with the example portal in linked_instances
    (on `host_allocation`, else its own), its placement naming `names` (else the cluster)."""
    data = example(f"slurm-reference/{operation}")
    portal = PORTAL["instance"]
    allocation = host_allocation or portal["placement_intent"]["host_allocation_id"]
    placement = {
        "host_allocation_id": allocation,
        "slurm_instance_id": names or data["instance"]["id"],
    }
    data["linked_instances"] = [
        {
            "id": portal["id"],
            "project_id": data["project_id"],
            "app_slug": portal["app_slug"],
            "version": portal["version"],
            "config": portal["config"],
            "placement_intent": placement,
            "members": [{**PORTAL["members"][0], "allocation_id": allocation, "status": "ready"}],
        }
    ]
    if host_allocation is None:
        data["allocations"].append(next(a for a in PORTAL["allocations"] if a["id"] == allocation))
    return data


def _checked(data: dict):
    return check_request(load_json(json.dumps(data)))


def test_replace_controller_carries_an_attached_portal_onto_the_inventory():
    checked = _checked(_with_portal("replace_controller"))
    assert checked.request is not None and checked.version is not None, checked.findings
    inventory = RunPlan.of(checked.request, checked.version).inventory
    assert inventory.groups["slurm_app_portals"] == ["ood-01"]
    assert inventory.hosts["ood-01"]["slurm_app_portal_instance_id"] == PORTAL["instance"]["id"]
    # the portal is only followed: it is neither controller, worker nor monitoring host
    for group in ("slurm_controller", "slurm_workers", "monitoring"):
        assert "ood-01" not in inventory.groups[group]


@pytest.mark.parametrize(
    ("operation", "names", "expected"),
    [
        ("add_worker", None, "expected only instances the placement intent references"),
        (
            "replace_controller",
            "7e6f5d4c-3b2a-4190-8f7e-6d5c4b3a2910",
            "or instances attached to this one (their placement_intent naming "
            "5b0e8a52-3c1d-4f5e-9a21-7d4c2b1e0a01)",
        ),
    ],
    ids=["another operation", "a portal of another cluster"],
)
def test_a_portal_is_carried_only_by_replace_controller_and_only_its_clusters(
    operation, names, expected
):
    checked = _checked(_with_portal(operation, names=names))
    assert checked.request is None
    found = [f for f in checked.findings if f.code == "linked-instance-unexpected"]
    assert [f.path for f in found] == ["$.linked_instances[0].id"], checked.findings
    assert expected in found[0].message


def _detail(data: dict, reported: dict) -> dict:
    checked = _checked(data)
    assert checked.request is not None and checked.version is not None, checked.findings
    plan = RunPlan.of(checked.request, checked.version)
    return SlurmReference().detail(
        checked.request, plan.inventory, {"slurm_app_controller": {}, **reported}, False
    )


def test_the_result_says_whether_each_portal_followed_and_why_not():
    data = _with_portal("replace_controller")
    followed = _detail(data, {"slurm_app_portals_followed": {"ood-01": {"followed": True}}})
    entry = {"instance_id": PORTAL["instance"]["id"], "host": "ood-01"}
    assert followed["portals"] == [{**entry, "followed": True}]

    failed = {"followed": False, "reason": "Prove the Slurm client reaches...: timed out"}
    assert _detail(data, {"slurm_app_portals_followed": {"ood-01": failed}})["portals"] == [
        {**entry, **failed}
    ]

    # a portal that did not answer is the portal's entry, never a host left uncleaned
    gone = _detail(
        data,
        {
            "slurm_app_not_reached": {
                "ood-01": "ssh: connect to host 10.40.0.20 port 22: No route to host",
                "slurm-ctl": "ssh: connect to host 10.40.0.10 port 22: No route to host",
            }
        },
    )
    assert gone["portals"] == [
        {
            **entry,
            "followed": False,
            "reason": "ssh: connect to host 10.40.0.20 port 22: No route to host",
        }
    ]
    assert [h["host"] for h in gone["not_cleaned"]] == ["slurm-ctl"]


def test_a_portal_cohosted_on_the_lost_controller_is_named_to_deploy_again():
    data = _with_portal(
        "replace_controller",
        host_allocation=example("slurm-reference/replace_controller")["operation"]["target"][
            "allocation_id"
        ],
    )
    checked = _checked(data)
    assert checked.request is not None and checked.version is not None, checked.findings
    assert "slurm_app_portals" not in RunPlan.of(checked.request, checked.version).inventory.groups
    assert _detail(data, {})["portals"] == [
        {
            "instance_id": PORTAL["instance"]["id"],
            "host": "slurm-ctl",
            "followed": False,
            "reason": COHOSTED,
        }
    ]
