"""The storage models (allocation_local, platform_mount): what the driver passes to the roles,
how a decommission's preview and its kept data read in the result, and the role filters that
decide where homes are. The hosts' side runs in the e2e modules (platform_mount labs)."""

import json
import re

import yaml
from conftest import ROOT, example
from test_outcome import _outcome, _plan, _statuses

from driver.apps.shared import teardown_data
from driver.apps.slurm.access import access_bundle
from driver.documents import load_json
from driver.request_check import check_request
from driver.role_code import role_filters
from driver.runner.plan import RunPlan


def _plan_of(request: dict) -> RunPlan:
    checked = check_request(load_json(json.dumps(request)))
    assert checked.request is not None and checked.version is not None, checked.findings
    return RunPlan.of(checked.request, checked.version)


def test_the_roles_get_the_platform_mount_and_default_to_allocation_local():
    mounted = _plan("deploy-platform-mount").inventory.group_vars
    assert (
        mounted["slurm_common_storage_model"],
        mounted["slurm_common_storage_mount_path"],
        mounted["slurm_common_storage_holds"],
    ) == ("platform_mount", "/workspace", "homes")
    request = example("slurm-reference/deploy")
    del request["instance"]["config"]["storage"]
    local = _plan_of(request).inventory.group_vars
    assert local["slurm_common_storage_model"] == "allocation_local"


def test_the_portal_gets_the_clusters_storage():
    request = example("open-ondemand/deploy")
    request["linked_instances"][0]["config"]["storage"] = {
        "model": "platform_mount",
        "mount_path": "/data/tenant",
        "holds": "job_directories",
    }
    group_vars = _plan_of(request).inventory.group_vars
    assert group_vars["slurm_common_storage_model"] == "platform_mount"
    assert group_vars["slurm_common_storage_mount_path"] == "/data/tenant"
    assert group_vars["slurm_common_storage_holds"] == "job_directories"


def test_the_manifest_admits_exactly_the_mount_paths_the_role_does():
    manifest = yaml.safe_load((ROOT / "manifests/slurm-reference/manifest.yaml").read_text())
    schema = manifest["versions"][0]["config_schema"]["properties"]["storage"]["properties"]
    role_vars = yaml.safe_load((ROOT / "roles/slurm_common/vars/main.yml").read_text())
    assert schema["mount_path"]["pattern"] == role_vars["__slurm_common_storage_mount_pattern"]
    pattern = re.compile(schema["mount_path"]["pattern"])
    for good in ("/workspace", "/mnt/tenant-7", "/data/a/b", "/scratch/x.y"):
        assert pattern.fullmatch(good), good
    for bad in ("/", "/etc", "/home", "/root", "/var/x", "/workspace/..", "/workspace/./x", "x"):
        assert not pattern.fullmatch(bad), bad


def test_a_preview_changes_no_member_and_no_instance_status():
    plan = _plan("decommission-preview")
    result = _outcome(plan)
    assert set(_statuses(result).values()) == {"ready"}
    assert result.instance is not None and result.instance.status == "unchanged"
    # the same request without preview removes them
    assert set(_statuses(_outcome(_plan("decommission"))).values()) == {"removed"}


def test_preview_and_teardown_name_what_goes_and_what_stays():
    reported = {
        "slurm_app_destroyed": {"ctl": [{"path": "/home/alice", "bytes": 10}]},
        "slurm_app_kept": {
            "ctl": [
                {"path": "/workspace/home/bob", "bytes": 20},
                {"path": "/workspace/jobs/bob", "bytes": 30},
            ]
        },
    }
    done = teardown_data(reported, preview=False)
    assert set(done) == {"destroyed", "kept"}
    assert done["destroyed"]["ctl"][0]["held"].startswith("home directory")
    assert [e["held"].split(":")[0] for e in done["kept"]["ctl"]] == [
        "home directory on the platform's storage",
        "job directory on the platform's storage",
    ]
    preview = teardown_data(reported, preview=True)
    assert preview["preview"] is True
    assert preview["would_destroy"] == done["destroyed"]
    assert preview["would_keep"] == done["kept"]


def test_a_teardown_names_the_hosts_it_left_behind_and_why():
    reported = {
        "slurm_app_destroyed": {"ctl": [{"path": "/etc/munge", "bytes": 1}]},
        "slurm_app_not_reached": {"w2": "no route to host", "w1": "timed out"},
    }
    for preview in (False, True):
        assert teardown_data(reported, preview)["not_cleaned"] == [
            {"host": "w1", "reason": "timed out"},
            {"host": "w2", "reason": "no route to host"},
        ]
    assert "not_cleaned" not in teardown_data({"slurm_app_destroyed": {}}, preview=False)


def test_the_access_bundle_says_where_files_live_and_submits_there():
    plan = _plan("deploy-platform-mount")
    bundle = access_bundle(plan.request, {"cluster_name": "c"}, {}, "alice")
    assert bundle["storage"]["model"] == "platform_mount"
    assert bundle["storage"]["homes"] == "/workspace/home"
    assert "-D /workspace/home/alice" in bundle["commands"]["submit_example"]
    assert any("never delete" in note for note in bundle["notes"])
    local = access_bundle(_plan("deploy").request, {"cluster_name": "c"}, {}, "alice")
    assert local["storage"]["model"] == "allocation_local"
    assert any("destroyed by decommission" in note for note in local["notes"])


PASSWD = [
    "alice:x:2000:2000::/home/alice:/bin/bash",
    "bob:x:2001:2001::/workspace/home/bob:/bin/bash",
    "carol:x:2002:2002::/home/someone-else:/bin/bash",
]


def test_only_a_home_that_is_the_hosts_own_goes_with_its_user():
    places = role_filters("slurm_users").homes_by_place(PASSWD)
    assert places == {
        "local": ["alice"],
        "elsewhere": ["/workspace/home/bob", "/home/someone-else"],
    }


def test_a_storage_change_that_would_move_homes_is_named():
    moved = role_filters("slurm_users").moved_homes(PASSWD, "/workspace/home")
    assert moved == ["alice (home /home/alice)", "carol (home /home/someone-else)"]
    assert role_filters("slurm_users").moved_homes(PASSWD[:1], "/home") == []
