"""A lost controller, replaced from a backup on the platform's mount (Debian 13, Slurm 24.11):
the driver by its full path, real daemons in systemd containers. The refusals first, with the
old controller still running and nothing changed anywhere; then the old controller's container
is killed and a new host becomes the controller (lab_tools.check_controller_replacement), and
the companion portal attached to the cluster follows it through sackd."""

import json

import portal_lab
import pytest
from lab_tools import (
    check_controller_replacement,
    deploy_lab,
    host_fingerprint,
    lab_operation,
    on_host,
    platform_env,
    wait_on_host,
)

from driver.lab import lab
from driver.lab import spec as lab_spec

pytestmark = pytest.mark.containers
SPEC = lab_spec.LabSpec(
    name="rep", workers=2, distro="trixie", placement="separate", storage="platform_mount"
)
OLD, NEW, WORKERS = "rep-ctl", "rep-c2", ("rep-w01", "rep-w02")
BACKUPS = f"{lab_spec.LAB_MOUNT}/slurm-app-backups"
TEAMS = {
    "accounting": {
        "enabled": True,
        "qos": [{"name": "gpu-small", "max_gpus_per_user": 1, "max_wall": "1-00:00:00"}],
        "accounts": [
            {"name": "vision", "fairshare": 10, "qos": ["gpu-small"], "users": ["labuser"]}
        ],
        "fair_share": {"weight_qos": 2000},
    },
    "backup": {"interval": "1d", "keep": 3},
}


PORTAL = "rep-portal"


@pytest.fixture(scope="module")
def cluster(docker_engine, open_ondemand_upstream, tmp_path_factory):
    env = platform_env(tmp_path_factory.mktemp("driver-state"))
    result = deploy_lab(SPEC, env, TEAMS)
    # an Open OnDemand portal attached to the cluster, without interactive apps: the platform
    # carries it in the replacement's linked_instances
    portal = portal_lab.companion_portal(
        SPEC.name, PORTAL, env, open_ondemand_upstream, tmp_path_factory.mktemp("oidc"), [], []
    )
    code, _, output = portal.operation(PORTAL, "deploy")
    assert code == 0, output[-4000:]
    # the new host starts while the old controller holds its address
    lab.add_host(SPEC.name, NEW)
    yield {"env": env, "instance": result["instance"]["id"], "portal": portal}
    portal.stop()
    lab.down(SPEC.name)


# python3 -c: set one field of the manifest in the current folder
EDIT = (
    "python3 -c \"import json, sys; m = json.load(open('manifest.json')); "
    "m[sys.argv[1]] = sys.argv[2]; json.dump(m, open('manifest.json', 'w'))\""
)


def _plant(instance: str, name: str, source: str, damage: str) -> None:
    """A copy of backup `source` named `name` (its manifest too), damaged by a shell command
    run in it (on a worker: the mount is shared)."""
    folder = f"{BACKUPS}/{instance}"
    on_host(
        SPEC.name,
        WORKERS[0],
        f"cp -a {folder}/{source} {folder}/{name} && cd {folder}/{name} && "
        f"{EDIT} backup_id {name} && {damage}",
    )


def test_a_backups_folder_a_cluster_user_made_first_is_refused_at_the_deploy(cluster):
    """Issue 65 (6): the deploy makes the mount's backups folder (root's, 0700) through
    slurm_folder. One a cluster user made first on a scratch mount is refused by the deploy
    as storage_conflict naming it, rather than failing every backup after."""
    user, mount = lab_spec.LAB_USER, lab_spec.LAB_MOUNT
    assert on_host(SPEC.name, OLD, f"stat -c '%U %a' {BACKUPS}").split() == ["root", "700"]
    mode = on_host(SPEC.name, OLD, f"stat -c %a {mount}").strip()
    on_host(SPEC.name, OLD, f"chmod 1777 {mount} && mv {BACKUPS} {BACKUPS}.kept")
    # a deploy that converges (one the last deploy's record does not cover): another keep
    deploy = lab_spec.lab_dir(SPEC.name) / "deploy.json"
    sent = deploy.read_text()
    request = json.loads(sent)
    request["instance"]["config"]["backup"]["keep"] = 4
    deploy.write_text(json.dumps(request))
    try:
        on_host(SPEC.name, OLD, f"runuser -u {user['name']} -- mkdir -m 0777 {BACKUPS}")
        code, result = lab_operation(SPEC.name, cluster["env"], "deploy")
        assert code == 1 and result["error"]["code"] == "storage_conflict", result["error"]
        said = f"{BACKUPS} belongs to uid {user['uid']}, not to uid 0"
        assert said in result["error"]["message"], result["error"]
    finally:
        deploy.write_text(sent)
        on_host(SPEC.name, OLD, f"rm -rf {BACKUPS} && mv {BACKUPS}.kept {BACKUPS}")
        on_host(SPEC.name, OLD, f"chmod {mode} {mount}")


def test_a_backup_that_cannot_be_restored_is_refused_before_any_host_changes(cluster):
    env, instance = cluster["env"], cluster["instance"]
    code, taken = lab_operation(SPEC.name, env, "backup")
    assert code == 0, taken
    real = taken["adapter_detail"]["backup"]["backup_id"]
    cases = {
        "20300101T000001Z": (
            f"{EDIT} cluster_name elsewhere",
            "backup_mismatch",
            "cluster_name 'elsewhere', this cluster's is 'rep'",
        ),
        "20300101T000002Z": (
            f"{EDIT} instance_id 00000000-0000-4000-8000-000000000000",
            "backup_mismatch",
            "instance_id",
        ),
        "20300101T000003Z": ("printf x >> state.tar.gz", "backup_corrupt", "state.tar.gz"),
        "20300101T000004Z": (
            f"{EDIT} slurm_version 22.05.8",
            "backup_incompatible",
            "Slurm 22.05.8",
        ),
    }
    for name, (damage, _, _) in cases.items():
        _plant(instance, name, real, damage)
    cases["20300101T000009Z"] = ("", "backup_missing", "no backup 20300101T000009Z")
    hosts = (OLD, NEW, *WORKERS)
    before = {host: host_fingerprint(SPEC.name, host) for host in hosts}
    try:
        for name, (_, code_expected, says) in cases.items():
            code, result = lab_operation(
                SPEC.name, env, "replace_controller", OLD, replacement=NEW, backup_id=name
            )
            assert code == 1, result
            assert result["error"]["code"] == code_expected, result["error"]
            assert says in result["error"]["message"], result["error"]
            statuses = {m["member_id"]: m["status"] for m in result["members"]}
            assert statuses[f"{SPEC.name}-controller-{NEW}"] == "pending", statuses
            assert statuses[f"{SPEC.name}-controller"] == "ready", statuses
    finally:
        on_host(SPEC.name, WORKERS[0], f"rm -rf {BACKUPS}/{instance}/2030*")
    assert {host: host_fingerprint(SPEC.name, host) for host in hosts} == before
    assert (
        on_host(SPEC.name, OLD, "systemctl is-active slurmctld slurmdbd").split() == ["active"] * 2
    )
    assert on_host(SPEC.name, NEW, "ls /var/lib/slurm-app-restore 2>&1 || true").startswith("ls:")


# Issue 69 (1): where a driver killed mid-replacement leaves the most half-done, one kill each:
# the database loaded (slurmdbd not started on it), slurmdbd answering on it (slurmctld not
# started), slurmctld started from the backup's state (not yet recorded as made from it).
KILLED_AT = (
    "Load the accounting database from the backup",
    "Wait until slurmdbd answers",
    "Start slurmctld",
)


def test_the_lost_controller_is_replaced_from_the_mount_and_the_cluster_goes_on(cluster):
    """The platform's driver is killed (SIGKILL) at each of KILLED_AT in turn, and the same
    request sent again each time: the run that ends converges with nothing lost. Issue 69 (2)
    on Debian 13: the companion portal follows, its sackd fetching the configuration from the
    new controller; its user's job and OOD's job library reach the new controller."""
    result = check_controller_replacement(
        SPEC.name, cluster["env"], OLD, NEW, WORKERS[0], killed_at=KILLED_AT
    )
    assert result["adapter_detail"]["restore"]["source"] == "platform_mount"
    portal = cluster["portal"]
    new_address = portal_lab.check_followed(portal, result, NEW)
    assert f"--conf-server {new_address}:" in portal.on("cat /etc/default/sackd")
    assert portal.on("systemctl is-active sackd").strip() == "active"
    user = lab_spec.LAB_USER["name"]
    job = portal.on(
        f"cd /tmp && runuser -u {user} -- sbatch --parsable --wait -o /dev/null --wrap true"
    ).strip()
    assert on_host(SPEC.name, NEW, f"sacct -n -X -j {job} -o State").strip() == "COMPLETED"
    seen = portal.ruby("ood_core_jobs.rb", portal_lab.CLUSTERS_D, "/tmp")
    assert seen["clusters"] == [SPEC.name] and seen["long"] in seen["listed"], seen
    assert seen["deleted"] == "completed"
    cancelled = on_host(SPEC.name, NEW, f"sacct -n -X -j {seen['long']} -o State")
    assert cancelled.strip().startswith("CANCELLED"), cancelled
    assert on_host(SPEC.name, NEW, "ls -A /var/lib/slurm-app-restore 2>/dev/null || true") == ""
    # backups go on from the new controller, into the same instance's folder
    assert on_host(SPEC.name, NEW, "systemctl is-active slurm-app-backup.timer").strip() == "active"
    on_host(SPEC.name, NEW, "systemctl start slurm-app-backup.service")
    # the backup restarted slurmctld: the nodes register again within seconds
    wait_on_host(SPEC.name, NEW, "test -z \"$(sinfo -h -o %t | grep -E 'unk|[*]')\"")
    code, status = lab_operation(SPEC.name, cluster["env"], "status")
    assert code == 0 and status["instance"]["health"] == "healthy", status["adapter_detail"]
    backup = status["adapter_detail"]["health"]["backup"]
    assert backup["last_success"]["age_s"] < 120, backup
    wait_on_host(SPEC.name, NEW, f"ls {BACKUPS}/{cluster['instance']} | grep -c . | grep -qx 3")
