"""Config changes through deploy, on a running cluster (a same_node lab with two H100s that
started without accounting): partitions, users and accounting applied; teams sharing the GPUs
through QoS, AllowAccounts and a partition of the H100 nodes; an unchanged re-run skips the converge
until a member drifts; monitoring turned off and on again; a monitoring failure degrading the
deploy, and the next deploy repairing it; a new cluster_name refused; last, the lost host
replaced by one that is controller and worker (issue 69)."""

import json
import re

import pytest
from job_checks import check_job_detail_output_and_usage, print_for_the_note
from lab_tools import (
    check_typed_tasks,
    lab_operation,
    name_the_gpus,
    on_host,
    platform_env,
    run_request,
    wait_on_host,
)

from driver.lab import lab
from driver.lab import spec as lab_spec

pytestmark = pytest.mark.containers
SPEC = lab_spec.LabSpec(name="cfg", workers=1, distro="trixie", placement="same_node", gpus=2)


def _on_controller(command: str) -> str:
    return on_host(SPEC.name, f"{SPEC.name}-ctl", command)


@pytest.fixture(scope="module")
def cluster(docker_engine, tmp_path_factory):
    env = platform_env(tmp_path_factory.mktemp("driver-state"))
    lab.down(SPEC.name)
    path = lab.up(SPEC)
    name_the_gpus(SPEC.name, f"{SPEC.name}-ctl", "NVIDIA H100 80GB HBM3", SPEC.gpus)
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
    # how long slurmdbd keeps its records: two given, the others the manifest's defaults
    config["accounting"] = {"enabled": True, "retention": {"jobs": "400days", "usage": "720hours"}}
    # what a user cannot see of another's: one more than the default jobs and usage
    config["scheduler"] = {"max_job_count": 50000, "private_data": ["jobs", "usage", "users"]}
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 0, result
    assert result["adapter_detail"]["accounting"] is True
    shown = _on_controller("sacctmgr show configuration")
    purge = dict(re.findall(r"^(Purge\w+After)\s*=\s*(.+?)\s*$", shown, re.MULTILINE))
    assert purge == {
        "PurgeEventAfter": "12 months",
        "PurgeJobAfter": "400 days",
        "PurgeResvAfter": "3 months",
        "PurgeStepAfter": "3 months",
        "PurgeSuspendAfter": "3 months",
        "PurgeTXNAfter": "12 months",
        "PurgeUsageAfter": "720 hours",
    }, shown
    # slurm.conf's as slurmdbd's client reads it, then slurmdbd's own beside its purge settings
    assert (
        re.findall(r"^PrivateData\s*=\s*(\S+)\s*$", shown, re.MULTILINE) == ["jobs,usage,users"] * 2
    ), shown
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
    shown = _on_controller("scontrol show config")
    assert re.search(r"^MaxJobCount\s*=\s*50000$", shown, re.MULTILINE), shown
    assert re.search(r"^PrivateData\s*=\s*jobs,usage,users$", shown, re.MULTILINE), shown
    assert _on_controller("sacctmgr -n -P show cluster format=cluster").split() == ["cfg"]
    associations = _on_controller("sacctmgr -n -P show assoc where cluster=cfg format=user")
    assert {"labuser", "newbie"} <= set(associations.split())
    assert _on_controller("getent passwd newbie").startswith("newbie:x:2001:")
    log = _on_controller("cat /var/log/slurm/slurmctld.log")
    assert "CLUSTER ID MISMATCH" not in log
    # the readiness job of this deploy is in the new accounting database
    readiness = result["adapter_detail"]["readiness"]
    assert any(r["state"] == "COMPLETED" for r in readiness["accounting_record"])


def _submit(user: str, *flags: str) -> str:
    return _on_controller(
        f"cd /tmp && runuser -u {user} -- sbatch --parsable -o /dev/null {' '.join(flags)} "
        "--wrap 'sleep 120'"
    ).strip()


def test_teams_share_the_gpus_through_qos_accounts_and_a_partition_of_h100_nodes(cluster):
    """Issue 24 point 5: a team account with a QoS capping each user at one GPU, a partition
    of the nodes whose GPUs are H100s open to that team only, multifactor priority; a second
    GPU job of the same user waits with QOSMaxGRESPerUser, another team's user is refused at
    submit, and the same request again changes nothing."""
    path, env = cluster
    request = json.loads(path.read_text())
    config = request["instance"]["config"]
    config["partitions"].append(
        {"name": "h100", "node_feature": "h100", "allow_accounts": ["vision"]}
    )
    config["accounting"] = {
        "enabled": True,
        "qos": [{"name": "gpu-small", "priority": 10, "max_gpus_per_user": 1, "max_wall": "2-0"}],
        "accounts": [
            {"name": "vision", "fairshare": 10, "qos": ["gpu-small"], "users": ["labuser"]}
        ],
        "fair_share": {"weight_qos": 2000},
    }
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 0, result
    ctl = f"{SPEC.name}-ctl"
    assert _on_controller(f"sinfo -h -N -n {ctl} -o '%G %f'").split("\n")[0] == "gpu:h100:2 h100"
    assert _on_controller("sinfo -h -p h100 -o %N").strip() == ctl
    assert "AllowAccounts=vision " in _on_controller("scontrol show partition h100")
    config_lines = _on_controller("scontrol show config")
    assert re.search(r"^PriorityType\s+= priority/multifactor$", config_lines, re.M)
    assert re.search(r"^PriorityWeightQOS\s+= 2000$", config_lines, re.M)
    assert _on_controller(
        "sacctmgr -n -P show assoc where cluster=cfg format=account,user,fairshare,qos"
    ).split() == [
        "root||1|normal",
        "root|root|1|normal",
        "default||1|normal",
        "default|newbie|1|normal",
        "vision||10|gpu-small",
        "vision|labuser|1|gpu-small",
    ]
    assert "labuser|vision" in _on_controller("sacctmgr -n -P show user format=user,defaultaccount")

    first = _submit("labuser", "-p h100 --gres=gpu:1")
    second = _submit("labuser", "-p h100 --gres=gpu:1")
    try:
        states = _on_controller(
            f"for i in $(seq 30); do s=$(squeue -h -j {first},{second} -o '%i %q %T %r' | sort); "
            f'echo "$s" | grep -q QOSMaxGRESPerUser && break; sleep 1; done; echo "$s"'
        )
        assert states.splitlines() == sorted(
            [f"{first} gpu-small RUNNING None", f"{second} gpu-small PENDING QOSMaxGRESPerUser"]
        ), states
        refused = lab.host_container(SPEC.name, ctl).exec_run(
            ["runuser", "-u", "newbie", "--", "sbatch", "-p", "h100", "--wrap", "true"],
            workdir="/tmp",
        )
        assert refused.exit_code == 1
        assert b"Invalid account or account/partition combination" in refused.output
    finally:
        _on_controller(f"scancel {first} {second}")

    code, again = run_request(path, env)
    assert code == 0 and again["changed"] == 0, again["hosts"]

    # a changed share and limit are modified in place, a limit left out is cleared
    config["accounting"]["qos"][0] = {"name": "gpu-small", "max_gpus_per_user": 2}
    config["accounting"]["accounts"][0]["fairshare"] = 20
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 0, result
    qos = _on_controller(
        "sacctmgr -n -P show qos where name=gpu-small format=priority,maxtrespu,maxwall"
    )
    assert qos.strip() == "0|gres/gpu=2|"
    vision = (
        "sacctmgr -n -P show assoc where cluster=cfg account=vision format=account,user,fairshare"
    )
    assert _on_controller(vision).split() == ["vision||20", "vision|labuser|1"]


def test_the_jobs_and_nodes_tabs_typed_tasks_on_24_11(cluster):
    """Issue 23 on Slurm 24.11, through `slurm-app-driver task` as the node agent would: the
    lab user's job submitted, listed, refused to another cluster user, cancelled, then listed
    as cancelled from accounting."""
    _, env = cluster
    check_typed_tasks(SPEC.name, env, "/home/labuser", other="newbie")


def test_a_jobs_detail_output_and_usage_on_24_11(cluster):
    """Issue 49 on Slurm 24.11, allocation-local homes: a CPU job of labuser and a GPU job
    (an h100) of newbie's on the one node."""
    _, env = cluster
    ctl = f"{SPEC.name}-ctl"
    shown = check_job_detail_output_and_usage(
        SPEC.name, env, "newbie", ctl, ctl, shared=False, gpu_type="h100"
    )
    print_for_the_note(shown)


def test_a_rerun_skips_the_converge_until_a_member_drifts(cluster):
    """The same request again skips to the readiness check; after hand edits on the host (a
    config file, an association, a QoS limit) the next run converges and undoes them."""
    path, env = cluster
    code, result = run_request(path, env)
    assert code == 0 and result["changed"] == 0, result
    assert result["adapter_detail"]["readiness"]["reused"] is True
    cgroup = _on_controller("cat /etc/slurm/cgroup.conf")
    _on_controller("echo '# edited by hand' >> /etc/slurm/cgroup.conf")
    _on_controller("sacctmgr -i delete user name=newbie")
    _on_controller("sacctmgr -i modify qos where name=gpu-small set MaxTRESPerUser=gres/gpu=9")
    code, result = run_request(path, env)
    assert code == 0, result
    assert result["changed"] > 0
    assert _on_controller("cat /etc/slurm/cgroup.conf") == cgroup
    associations = _on_controller("sacctmgr -n -P show assoc where cluster=cfg format=user")
    assert "newbie" in associations.split()
    qos = "sacctmgr -n -P show qos where name=gpu-small format=maxtrespu"
    assert _on_controller(qos).strip() == "gres/gpu=2"
    code, result = run_request(path, env)
    assert code == 0 and result["changed"] == 0, result


MONITORING_PACKAGES = "dpkg -l | grep -E 'prometheus' || true"
# An APT pin that leaves the package without an installation candidate.
NO_ALERTMANAGER = "Package: prometheus-alertmanager\\nPin: release *\\nPin-Priority: -1\\n"


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

    # Back on, with Alertmanager unavailable from the controller's repositories: the member's
    # packages install in one apt transaction, which then fails; the required ones install
    # without monitoring's, node_exporter installs alone, and monitoring degrades, naming apt's
    # reason. The cluster is untouched.
    request["instance"]["config"]["monitoring"] = {"enabled": True}
    path.write_text(json.dumps(request))
    _on_controller(f"printf '{NO_ALERTMANAGER}' > /etc/apt/preferences.d/no-alertmanager")
    try:
        code, result = run_request(path, env)
    finally:
        _on_controller("rm /etc/apt/preferences.d/no-alertmanager")
    assert code == 0 and result["instance"]["health"] == "degraded", result
    problems = result["adapter_detail"]["health"]["problems"]
    assert problems[0].startswith("monitoring: cfg-ctl: Install the packages"), problems
    assert "prometheus-alertmanager" in problems[0], problems
    assert _on_controller("systemctl is-active prometheus-node-exporter").strip() == "active"
    assert result["adapter_detail"]["readiness"]["reused"] is True

    code, result = run_request(path, env)
    assert code == 0, result
    assert result["instance"]["health"] == "healthy", result["adapter_detail"]["health"]
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


NEW_CONTROLLER = f"{SPEC.name}-c2"


def test_a_same_node_controller_is_replaced_by_a_host_that_runs_both(cluster):
    """Last (the lab's first host is the cluster's no more). Issue 69: the same_node cluster's one
    host is replaced with a job running on it, while it still answers; replace_controller onto
    a new host from the control plane's backup makes it the controller and the worker (the
    lab's platform gives it a pending member of each). The old host is stopped first (slurmd
    too) and cleaned last, as a worker and as the controller; the old node is gone from the
    cluster, the job it ran is requeued (its cut run recorded REQUEUED), the job finished
    before is still there, and a new job runs on the new host. (A lost host's replacement is
    the same but for the stop and the clean: test_controller_replacement.)"""
    path, env = cluster
    old = f"{SPEC.name}-ctl"
    request = json.loads(path.read_text())
    request["instance"]["config"]["cluster_name"] = SPEC.name  # the refused rename's request
    path.write_text(json.dumps(request))
    user = f"cd /tmp && runuser -u {lab_spec.LAB_USER['name']} --"
    finished = _on_controller(f"{user} sbatch --parsable -W -o /dev/null --wrap true").strip()
    lost = _on_controller(f"{user} sbatch --parsable -o /dev/null --wrap 'sleep 600'").strip()
    wait_on_host(SPEC.name, old, f"squeue -h -j {lost} -t R | grep -q .")
    code, backup = lab_operation(SPEC.name, env, "backup")
    assert code == 0, backup
    lab.add_host(SPEC.name, NEW_CONTROLLER)
    name_the_gpus(SPEC.name, NEW_CONTROLLER, "NVIDIA H100 80GB HBM3", SPEC.gpus)

    code, result = lab_operation(
        SPEC.name, env, "replace_controller", old, replacement=NEW_CONTROLLER
    )
    assert code == 0, result
    assert {m["member_id"]: m["status"] for m in result["members"]} == {
        f"{SPEC.name}-controller": "removed",
        f"{SPEC.name}-worker-ctl": "removed",
        f"{SPEC.name}-controller-{NEW_CONTROLLER}": "ready",
        f"{SPEC.name}-worker-{NEW_CONTROLLER}": "ready",
    }
    detail = result["adapter_detail"]
    new_allocation = next(m["allocation_id"] for m in result["members"] if m["status"] == "ready")
    assert detail["placement_intent"]["worker_placement"] == "same_node"
    assert detail["placement_intent"]["controller_allocation_id"] == new_allocation
    assert "not_cleaned" not in detail and old in detail["destroyed"], detail
    left = "dpkg -l | grep -E 'slurm|munge|mariadb|prometheus' || true; pgrep -a slurm || true"
    assert on_host(SPEC.name, old, left).strip() == ""
    assert [node["name"] for node in detail["nodes"]] == [NEW_CONTROLLER]
    assert result["instance"]["health"] == "healthy", result["instance"]

    def runs(job: str) -> list[str]:
        return on_host(SPEC.name, NEW_CONTROLLER, f"sacct -n -X -D -j {job} -o State").split()

    assert runs(finished) == ["COMPLETED"]
    # Slurm requeues the lost batch job (JobRequeue=1): its cut run is recorded REQUEUED
    lost_runs = runs(lost)
    assert lost_runs[0] == "REQUEUED" and lost_runs[1:] in (["PENDING"], ["RUNNING"]), lost_runs
    on_host(SPEC.name, NEW_CONTROLLER, f"scancel {lost}")
    ran = on_host(SPEC.name, NEW_CONTROLLER, f"{user} srun -N1 -t 1 hostname").strip()
    assert ran == NEW_CONTROLLER
