"""Config changes through deploy, on a running cluster (a same_node lab that started without
accounting): partitions, users and accounting applied; an unchanged re-run skips the converge
until a member drifts; monitoring turned off and on again; a monitoring failure degrading the
deploy, and the next deploy repairing it; a new cluster_name refused."""

import json

import pytest
from lab_tools import check_typed_tasks, on_host, platform_env, run_request

from driver.lab import lab

pytestmark = pytest.mark.containers
SPEC = lab.LabSpec(name="cfg", workers=1, distro="trixie", placement="same_node")


def _on_controller(command: str) -> str:
    return on_host(SPEC.name, f"{SPEC.name}-ctl", command)


@pytest.fixture(scope="module")
def cluster(docker_engine, tmp_path_factory):
    env = platform_env(tmp_path_factory.mktemp("driver-state"))
    lab.down(SPEC.name)
    path = lab.up(SPEC)
    request = json.loads(path.read_text())
    request["instance"]["config"]["accounting"] = {"enabled": False}
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 0, result
    assert result["adapter_detail"]["accounting"] is False
    yield path, env
    lab.down(SPEC.name)


def test_partitions_users_and_accounting_change_on_a_running_cluster(cluster):
    path, env = cluster
    request = json.loads(path.read_text())
    config = request["instance"]["config"]
    config["partitions"] = [
        {"name": "batch", "default": True, "max_time": "1-00:00:00"},
        {"name": "debug", "max_time": "30:00"},
    ]
    config["users"].append({"name": "newbie", "uid": 2001})
    config["accounting"] = {"enabled": True}
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 0, result
    assert result["adapter_detail"]["accounting"] is True
    partitions = _on_controller("scontrol show partition -o")
    limits = {
        line.split()[0]: next(f for f in line.split() if f.startswith("MaxTime="))
        for line in partitions.splitlines()
    }
    # "30:00" is 30 minutes: it must reach slurm.conf as written, not as YAML's 1800
    assert limits == {
        "PartitionName=batch": "MaxTime=1-00:00:00",
        "PartitionName=debug": "MaxTime=00:30:00",
    }
    assert _on_controller("sacctmgr -n -P show cluster format=cluster").split() == ["cfg"]
    associations = _on_controller("sacctmgr -n -P show assoc where cluster=cfg format=user")
    assert {"labuser", "newbie"} <= set(associations.split())
    assert _on_controller("getent passwd newbie").startswith("newbie:x:2001:")
    log = _on_controller("cat /var/log/slurm/slurmctld.log")
    assert "CLUSTER ID MISMATCH" not in log
    # the readiness job of this deploy is in the new accounting database
    readiness = result["adapter_detail"]["readiness"]
    assert any(r["state"] == "COMPLETED" for r in readiness["accounting_record"])


def test_the_jobs_and_nodes_tabs_typed_tasks_on_24_11(cluster):
    """Issue 23 on Slurm 24.11, through `slurm-app-driver task` as the node agent would: the
    lab user's job submitted, listed, refused to another cluster user, cancelled, then listed
    as cancelled from accounting."""
    _, env = cluster
    check_typed_tasks(SPEC.name, env, "/home/labuser", other="newbie")


def test_a_rerun_skips_the_converge_until_a_member_drifts(cluster):
    """The same request again skips to the readiness check; after hand edits on the host (a
    config file, an association) the next run converges and undoes them."""
    path, env = cluster
    code, result = run_request(path, env)
    assert code == 0 and result["changed"] == 0, result
    assert result["adapter_detail"]["readiness"]["reused"] is True
    cgroup = _on_controller("cat /etc/slurm/cgroup.conf")
    _on_controller("echo '# edited by hand' >> /etc/slurm/cgroup.conf")
    _on_controller("sacctmgr -i delete user name=newbie")
    code, result = run_request(path, env)
    assert code == 0, result
    assert result["changed"] > 0
    assert _on_controller("cat /etc/slurm/cgroup.conf") == cgroup
    associations = _on_controller("sacctmgr -n -P show assoc where cluster=cfg format=user")
    assert "newbie" in associations.split()
    code, result = run_request(path, env)
    assert code == 0 and result["changed"] == 0, result


MONITORING_PACKAGES = "dpkg -l | grep -E 'prometheus' || true"


def test_monitoring_turned_off_removes_the_stack_and_on_brings_it_back(cluster):
    path, env = cluster
    request = json.loads(path.read_text())
    request["instance"]["config"]["monitoring"] = {"enabled": False}
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 0, result
    assert _on_controller(MONITORING_PACKAGES).strip() == ""
    assert _on_controller("ls -d /etc/prometheus /var/lib/prometheus 2>/dev/null || true") == ""
    destroyed = {e["path"]: e["held"] for e in result["adapter_detail"]["destroyed"]["cfg-ctl"]}
    assert destroyed["/var/lib/prometheus"] == "Prometheus's metrics history"
    assert "monitoring" not in result["adapter_detail"]
    assert result["adapter_detail"]["health"]["classification"] == "healthy"
    # the cluster itself was left alone: no readiness job needed a new proof
    assert result["adapter_detail"]["readiness"]["reused"] is True

    request["instance"]["config"]["monitoring"] = {"enabled": True}
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 0, result
    monitoring = result["adapter_detail"]["monitoring"]
    assert monitoring["services"] == {
        "prometheus": "running",
        "prometheus-alertmanager": "running",
        "slurm-app-exporter": "running",
    }
    assert sorted(t["job"] for t in monitoring["targets"]) == ["node", "prometheus", "slurm"]


def test_a_monitoring_failure_degrades_the_deploy_and_the_next_deploy_repairs_it(cluster):
    """promtool broken on the controller, the rules file edited by hand (so the deploy
    converges): the stack fails, the cluster still deploys and proves itself, the instance is
    degraded with the reason; nothing is recorded as converged, so the next deploy repairs."""
    path, env = cluster
    _on_controller(
        "mv /usr/bin/promtool /usr/bin/promtool.real"
        " && printf '#!/bin/sh\\necho broken on purpose >&2\\nexit 1\\n' > /usr/bin/promtool"
        " && chmod 755 /usr/bin/promtool"
        " && echo '# edited by hand' >> /etc/prometheus/slurm-app-rules.yml"
    )
    try:
        code, result = run_request(path, env)
    finally:
        _on_controller("mv /usr/bin/promtool.real /usr/bin/promtool")
    assert code == 0 and result["status"] == "succeeded", result
    problems = result["adapter_detail"]["health"]["problems"]
    assert result["instance"]["health"] == "degraded", (result["changed"], problems)
    assert problems[0].startswith("monitoring: cfg-ctl: Write the alert rules"), problems
    assert "broken on purpose" in problems[0], problems
    assert result["adapter_detail"]["readiness"]["job_id"], result["adapter_detail"]
    code, result = run_request(path, env)
    assert code == 0 and result["instance"]["health"] == "healthy", result
    assert "# edited by hand" not in _on_controller("cat /etc/prometheus/slurm-app-rules.yml")
    assert result["adapter_detail"]["readiness"]["reused"] is True  # slurm.conf never changed


def test_a_new_cluster_name_is_refused_before_anything_changes(cluster):
    path, env = cluster
    before = _on_controller("sha256sum /etc/slurm/slurm.conf")
    request = json.loads(path.read_text())
    request["instance"]["config"]["cluster_name"] = "renamed"
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 1
    assert result["error"]["code"] == "config_refused", result["error"]
    assert 'runs as "cfg"' in result["error"]["message"]
    assert result["changed"] == 0
    assert result["instance"]["status"] == "running"
    assert _on_controller("sha256sum /etc/slurm/slurm.conf") == before


def test_a_user_named_like_an_account_the_host_had_is_refused(cluster):
    """Issue 18 (4): the host's own account (a service account made by hand here, like a cloud
    image's login user) is never taken over: no new uid, no new group, nothing changed."""
    path, env = cluster
    _on_controller("id opsuser >/dev/null 2>&1 || useradd -u 3100 -U -m opsuser")
    before = _on_controller(
        "getent passwd opsuser; getent group opsuser; sha256sum /etc/slurm/*.conf"
    )
    request = json.loads(path.read_text())
    request["instance"]["config"]["cluster_name"] = "cfg"
    request["instance"]["config"]["users"].append({"name": "opsuser", "uid": 2100})
    hostile = path.with_name("deploy-opsuser.json")
    hostile.write_text(json.dumps(request))
    code, result = run_request(hostile, env)
    assert code == 1, result
    assert result["error"]["code"] == "account_exists", result["error"]
    assert "opsuser" in result["error"]["message"]
    assert result["changed"] == 0
    assert (
        _on_controller("getent passwd opsuser; getent group opsuser; sha256sum /etc/slurm/*.conf")
        == before
    )
    recorded = _on_controller("cat /var/lib/slurm-app/accounts").split()
    assert "opsuser" not in recorded and "labuser" in recorded
