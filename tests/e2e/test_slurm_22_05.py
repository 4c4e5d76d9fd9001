"""Slurm 22.05 (Debian 12) on the platform's storage (storage.model platform_mount: one volume
mounted at /workspace on every lab host), with a team account, a QoS capping GPUs per user,
multifactor priority and a partition of H100 nodes (none here, so an empty NodeSet): a full
converge changes nothing but the converged records and leaves no warning in the daemons'
logs; a host without the mount is refused before anything changes; nodes join and leave
through the slurmctld restart path (a reconfigure after a node-count change kills 22.05's
slurmctld); no slurmd restarts; a removed allocation joins again with a new one in one
operation; scheduled backups land on the mount, root's alone, the newest two kept, and a
failed one degrades status; a desktop session through a companion portal on Debian 12 holds
its GPU node, which no remove_worker or drain takes from it; a job's output on a worker is
read everywhere and outlives the cluster, with the backups."""

import base64
import json
import re
import time

import portal_lab
import pytest
import yaml
from conftest import ROOT, console_script, run_events
from job_checks import check_job_detail_output_and_usage, print_for_the_note
from lab_tools import (
    check_a_hostile_job_name_is_read_as_a_name,
    check_a_running_job_keeps_its_node,
    check_controller_replacement,
    check_gpu_job_mapping,
    check_homes_are_their_users_alone,
    check_no_reader_separator_reaches_another_user,
    check_the_journal_of,
    check_typed_tasks,
    deploy_lab,
    host_fingerprint,
    journal_of,
    lab_operation,
    on_host,
    plant_links_on_the_mount,
    platform_env,
    remove_planted_links,
    teardown_paths,
    wait_on_host,
)

from driver.lab import lab
from driver.lab import spec as lab_spec

pytestmark = pytest.mark.containers
SPEC = lab_spec.LabSpec(
    name="old", workers=1, distro="bookworm", placement="separate", storage="platform_mount"
)
HOME = f"{lab_spec.LAB_MOUNT}/home/{lab_spec.LAB_USER['name']}"
# a user a later deploy adds (test_a_config_change_reaches_every_worker_joined_since)
LATE_USER = {"name": "late", "uid": 2002, "gid": 2002}
LATE_HOME = f"{lab_spec.LAB_MOUNT}/home/late"
BACKUPS = f"{lab_spec.LAB_MOUNT}/slurm-app-backups"
# the host test_a_controller_is_replaced_from_the_mount_on_22_05_... makes the controller
NEW_CONTROLLER = "old-c2"
ARCHIVE = f"{lab_spec.LAB_MOUNT}/slurm-app-archive"
BOTH_IDLE = ["old-w01", "idle", "old-w02", "idle"]
# the workers from test_add_remove_and_add_again_on_22_05 on
WORKERS = ["old-w01", "old-w02", "old-w04"]
# what the planted link's target looked like before (test_links_a_cluster_user_plants_...)
LINK_TARGET_BEFORE: list[str] = []
TEAMS = {
    "partitions": [
        {"name": "batch", "default": True, "max_time": "1-00:00:00"},
        {"name": "h100", "node_feature": "h100", "allow_accounts": ["vision"]},
    ],
    "accounting": {
        "enabled": True,
        "qos": [{"name": "gpu-small", "max_gpus_per_user": 1, "max_wall": "1-00:00:00"}],
        "accounts": [
            {"name": "vision", "fairshare": 10, "qos": ["gpu-small"], "users": ["labuser"]}
        ],
        "fair_share": {"weight_qos": 2000},
        "archive": True,
    },
    "backup": {"interval": "1d", "keep": 2},
    # issue 51: the desktop runtime on Debian 12's TigerVNC, websockify, noVNC and Xfce
    "interactive_runtimes": ["desktop"],
}


def _on(host: str, command: str) -> str:
    return on_host(SPEC.name, host, command)


@pytest.fixture(scope="module")
def cluster(docker_engine, tmp_path_factory):
    env = platform_env(tmp_path_factory.mktemp("driver-state"))
    result = deploy_lab(SPEC, env, TEAMS)
    assert result["adapter_detail"]["daemon_versions"]["slurmctld"].startswith("22.05.")
    yield env
    lab.down(SPEC.name)


def _daemon_log_findings() -> list[str]:
    """Error, warning and PMIx lines in the daemons' logs, less the ones a first start logs
    (the list Molecule's shared verify allows, read from there)."""
    verify = yaml.safe_load((ROOT / "molecule" / "shared" / "verify.yml").read_text())
    allowed = re.compile("|".join(verify[0]["vars"]["verify_first_start_errors"]))
    grep = "grep -ihE 'error|warn|pmix' {} || true"
    lines = _on("old-ctl", grep.format("/var/log/slurm/slurmctld.log /var/log/slurm/slurmdbd.log"))
    found = [line for line in lines.splitlines() if not allowed.search(line)]
    # a worker's slurmd logs nothing of the kind, not even on its first start
    return found + _on("old-w01", grep.format("/var/log/slurm/slurmd.log")).splitlines()


def test_a_full_converge_changes_only_the_records_and_the_teams_are_as_configured(cluster):
    """What Molecule's idempotence proves, through the driver as the platform runs it: with
    the converged records gone, the same request goes through every role task again and the
    only change on each member is its new record (the operation that converged it is
    bookkeeping, never counted as a change)."""
    env = cluster
    assert _daemon_log_findings() == []
    assert _on("old-w01", "stat -c '%U %a' /etc/munge/munge.key").split() == ["munge", "400"]
    assert _on("old-w01", "ls /etc/slurm/slurm.conf 2>/dev/null || true") == ""
    assert _on(
        "old-ctl", "sacctmgr -n -P show assoc where cluster=old format=account,user,fairshare,qos"
    ).split() == [
        "root||1|normal",
        "root|root|1|normal",
        "default||1|normal",
        "vision||10|gpu-small",
        "vision|labuser|1|gpu-small",
    ]
    qos = "sacctmgr -n -P show qos where name=gpu-small format=maxtrespu,maxwall"
    assert _on("old-ctl", qos).strip() == "gres/gpu=1|1-00:00:00"
    partition = _on("old-ctl", "scontrol show partition h100")
    assert "AllowAccounts=vision " in partition and "Nodes=(null)" in partition
    config = _on("old-ctl", "scontrol show config")
    assert re.search(r"^PriorityType\s+= priority/multifactor$", config, re.M)
    assert re.search(r"^PriorityWeightQOS\s+= 2000$", config, re.M)
    # what slurmdbd purges goes to the mount first, into a folder slurmdbd alone can open
    dbd = _on("old-ctl", "sacctmgr show configuration")
    archive = re.search(rf"^ArchiveDir\s+= ({ARCHIVE}/[-0-9a-f]+)$", dbd, re.M)
    assert archive, dbd
    for setting in ("Events", "Jobs", "Resvs", "Steps", "Suspend", "TXN", "Usage"):
        assert re.search(rf"^Archive{setting}\s+= Yes$", dbd, re.M), setting
    modes = _on("old-w01", f"stat -c '%U %a' {ARCHIVE} {archive.group(1)}").split("\n")
    assert modes[:2] == ["root 711", "slurm 700"]

    for host in ("old-ctl", "old-w01"):
        _on(host, "rm /var/lib/slurm-app/converged")
    ran = console_script(
        "run", str(lab_spec.lab_dir(SPEC.name) / "deploy.json"), env=env, timeout=1200
    )
    events = run_events(ran.stdout)
    assert ran.returncode == 0, events[-1]
    changed = {(e["host"], e["task"]) for e in events if e["event"] == "host.changed"}
    # a deploy writes the converged record in the records' one step (release_record)
    record = "Record the state, the release and the operation that converged the member"
    assert changed == {("old-ctl", record), ("old-w01", record)}
    assert events[-1]["result"]["changed"] == 2
    assert _daemon_log_findings() == []


def test_a_member_without_the_platform_mount_is_refused_before_anything_changes(cluster):
    env = cluster
    lab.add_host(SPEC.name, "old-w03", storage=False)
    before = {host: host_fingerprint(SPEC.name, host) for host in ("old-ctl", "old-w01", "old-w03")}
    code, result = lab_operation(SPEC.name, env, "add_worker", "old-w03")
    assert code == 1, result
    assert result["error"]["code"] == "storage_not_shared", result["error"]
    assert "old-w03: /workspace is not a mount point" in result["error"]["message"]
    assert result["changed"] == 0
    assert {host: host_fingerprint(SPEC.name, host) for host in before} == before
    assert _on("old-ctl", "sinfo -h -N -o %N").split() == ["old-w01"]


def test_slurm_26_05_is_refused_before_any_host_changes(cluster):
    """Debian 12's 22.05 is further back than 26.05 takes state from (issue 68): the window is
    judged against the series before the site's source of it is placed anywhere."""
    env = cluster
    hosts = ("old-ctl", "old-w01")
    before = {host: host_fingerprint(SPEC.name, host) for host in hosts}
    code, result = lab_operation(SPEC.name, env, "upgrade", to_version="2.0.0")
    assert code == 1, result
    assert result["error"]["code"] == "upgrade_unsupported", result["error"]
    message = result["error"]["message"]
    for named in ("Slurm 26.05 takes", "24.11, 25.05, 25.11", "22.05.8", "upgrade to one of"):
        assert named in message, message
    assert result["changed"] == 0
    assert {host: host_fingerprint(SPEC.name, host) for host in hosts} == before
    for host in hosts:
        assert "slurm-app" not in _on(host, "ls /etc/apt/sources.list.d /etc/apt/preferences.d")


def _slurmctld_starts() -> int:
    """How many times slurmctld started, from its own log."""
    log = "/var/log/slurm/slurmctld.log"
    return int(_on("old-ctl", f"grep -c 'slurmctld version .* started' {log}"))


def _slurmd_since() -> str:
    return _on("old-w01", "systemctl show -p ActiveEnterTimestamp slurmd").strip()


def test_links_a_cluster_user_plants_on_the_mount_are_never_followed(cluster):
    """Issue 44 (1, 5): both deploys that would follow a planted link are refused, nothing
    changed; the link stays there through the add_worker and the decommission below, which
    never follow it (the last test finds its target as it was). Homes are 0700 on Debian 12."""
    LINK_TARGET_BEFORE.append(plant_links_on_the_mount(SPEC.name, cluster))
    check_homes_are_their_users_alone(SPEC.name, ["old-ctl", "old-w01"], HOME)


def test_add_remove_and_add_again_on_22_05(cluster):
    """old-w02 has a GPU device file: 22.05's slurmd cannot fetch a Prolog, so it runs the
    copy slurm_worker installed, by its path."""
    env = cluster
    lab.add_host(SPEC.name, "old-w02", gpus=1)
    since = _slurmd_since()
    ctl_before = _on("old-ctl", "systemctl show -p ExecMainStartTimestamp slurmctld").strip()
    code, result = lab_operation(SPEC.name, env, "add_worker", "old-w02")
    assert code == 0, result
    # traceable on the hosts: the add's start and end in the controller's and the new
    # worker's journals, and 22.05's slurmctld restart logged beside them
    steps = check_the_journal_of(SPEC.name, "add_worker", ["old-ctl", "old-w02"])
    assert [(s["host"], s["SLURM_APP_STEP"]) for s in steps] == [("old-ctl", "slurmctld restart")]
    # every member read over SSH: the add's record as it is now, not as Prometheus last
    # scraped it; status (read-only) journals nothing on any host either way
    code, status = lab_operation(SPEC.name, env, "status", read="every_member")
    for host in ("old-ctl", "old-w01", "old-w02"):
        assert journal_of(SPEC.name, host, "status")[1] == [], host
    added = json.loads((lab_spec.lab_dir(SPEC.name) / "add_worker.json").read_text())
    converged_by = status["adapter_detail"]["converged_by"]
    assert converged_by["old-w02"]["operation_id"] == added["operation"]["id"]
    assert converged_by["old-ctl"]["operation"] == "deploy", converged_by
    # 22.05's path: slurmctld restarted, no slurmd restarted
    assert (
        _on("old-ctl", "systemctl show -p ExecMainStartTimestamp slurmctld").strip() != ctl_before
    )
    assert _slurmd_since() == since
    assert _on("old-ctl", "sinfo -h -N -o '%N %T'").split() == [
        "old-w01",
        "idle",
        "old-w02",
        "idle",
    ]
    assert "error" not in _on("old-ctl", "scontrol ping").lower()

    code, result = lab_operation(SPEC.name, env, "remove_worker", "old-w02")
    assert code == 0, result
    assert _on("old-ctl", "sinfo -h -N -o %N").split() == ["old-w01"]
    assert _slurmd_since() == since

    # old-w02 joins again with a new host in one operation (k=2; test_lab_deploy joins four on
    # 24.11): one slurmctld restart for both, one readiness job over both
    joining = ["old-w02", "old-w04"]
    for host in joining[1:]:
        lab.add_host(SPEC.name, host)
    starts = _slurmctld_starts()
    code, result = lab_operation(SPEC.name, env, "add_worker", joining)
    assert code == 0, result
    assert _slurmctld_starts() == starts + 1
    assert result["adapter_detail"]["hosts_touched"] == ["old-ctl", *joining]
    assert result["adapter_detail"]["readiness"]["nodes"] == 2
    statuses = {m["member_id"]: m["status"] for m in result["members"]}
    assert [statuses[f"old-worker-{host}"] for host in joining] == ["ready"] * 2
    assert _slurmd_since() == since
    nodes = ["old-w01", *joining]
    assert _on("old-ctl", "sinfo -h -N -o '%N %T'").split() == [
        word for node in nodes for word in (node, "idle")
    ]
    output = lab.test_job(SPEC.name)
    assert sorted(line.split(": ", 1)[1] for line in output.splitlines()) == nodes

    assert _on("old-ctl", "sinfo -h -n old-w02 -o %G").strip() == "gpu:1"
    prolog = "Prolog=/usr/local/libexec/slurm-app/gpu-job-map\n"
    assert prolog in _on("old-ctl", "cat /etc/slurm/slurm.conf")
    check_gpu_job_mapping(SPEC.name, "old-w02")


def test_a_config_change_reaches_every_worker_joined_since(cluster):
    """The first deploy placed old-w01 alone; a deploy with one more user afterwards gives it
    to the two workers add_worker joined since as well, and a job of hers runs on all three."""
    env = cluster
    deploy = lab_spec.lab_dir(SPEC.name) / "deploy.json"
    request = json.loads(deploy.read_text())
    request["instance"]["config"]["users"].append(LATE_USER)
    deploy.write_text(json.dumps(request))
    code, result = lab_operation(SPEC.name, env, "deploy")
    assert code == 0, result
    assert result["adapter_detail"]["hosts_touched"] == ["old-ctl", *WORKERS]
    assert {m["status"] for m in result["members"]} == {"ready"}
    for host in WORKERS:
        assert _on(host, "getent passwd late").startswith("late:x:2002:2002:"), host
    check_homes_are_their_users_alone(SPEC.name, ["old-ctl", "old-w04"], LATE_HOME, "labuser")
    ran = _on("old-ctl", "cd /tmp && runuser -u late -- srun -N3 -t1 hostname")
    assert sorted(ran.split()) == WORKERS


def test_the_jobs_and_nodes_tabs_typed_tasks_on_22_05(cluster):
    check_typed_tasks(SPEC.name, cluster, HOME)


def test_a_hostile_job_name_is_read_as_a_name_on_22_05(cluster):
    check_a_hostile_job_name_is_read_as_a_name(SPEC.name, cluster, "old-w01")


def test_a_user_who_watches_proc_cannot_forge_a_queue_answer_on_22_05(cluster):
    seen = check_no_reader_separator_reaches_another_user(SPEC.name)
    print_for_the_note({"22.05: separators seen on command lines": seen})


def test_a_jobs_detail_output_and_usage_on_22_05(cluster):
    """Issue 49 on Slurm 22.05, homes on the platform's storage: labuser's CPU job on
    old-w01, late's GPU job on old-w02; another node reads the output too."""
    shown = check_job_detail_output_and_usage(
        SPEC.name, cluster, "late", "old-w01", "old-w02", shared=True
    )
    print_for_the_note(shown)


DESKTOP_DIR = f"{portal_lab.SESSIONS}/sys/desktop/output/e2e-bookworm"
PORTAL = "old-portal"


@pytest.fixture(scope="module")
def portal(cluster, open_ondemand_upstream, tmp_path_factory):
    """The companion portal on its own Debian 12 host (nothing deployed yet); it lives until
    test_a_controller_is_replaced_... decommissions it."""
    made = portal_lab.companion_portal(
        SPEC.name,
        PORTAL,
        cluster,
        open_ondemand_upstream,
        tmp_path_factory.mktemp("oidc"),
        ["desktop"],
        [],
    )
    yield made
    made.stop()


def test_a_desktop_through_a_debian_12_portal_keeps_its_node_busy(cluster, portal):
    """Issue 51 on Debian 12 (TigerVNC 1.12, websockify 0.10, noVNC 1.3, Xfce 4.18, Apache
    2.4 with Debian 12's mod_auth_openidc): a companion portal on its own Debian 12 host, and
    the desktop session portal_lab.desktop_session checks, with the form's one GPU: it lands
    on old-w02, the only node with one. While it runs, the node is kept as for any job
    (remove_worker refused, a drain times out); once it ended the cluster is as it was."""
    env = cluster
    code, result, output = portal.operation(PORTAL, "deploy")
    assert code == 0, output[-4000:]
    assert result["adapter_detail"]["portal"]["slurm_client_answers"] is True
    with portal_lab.desktop_session(
        portal,
        DESKTOP_DIR,
        LATE_USER["name"],
        "desktop-novnc-bookworm.png",
        "bc_num_slots=1",
        "gpus=1",
        "bc_queue=batch",
    ) as session:
        assert session["node"] == "old-w02"
        assert sorted(session["queues"]) == ["batch", "h100"]
        check_a_running_job_keeps_its_node(SPEC.name, env, "old-w02", session["job"])
    assert _on("old-ctl", "sinfo -h -N -o '%N %T'").split() == [
        word for node in WORKERS for word in (node, "idle")
    ]


def _backups() -> list[str]:
    return _on("old-ctl", f"ls {BACKUPS}/*/").split()


def _wait_for_every_node() -> None:
    """A backup restarts slurmctld; Debian 12's slurmds take seconds to register again, and
    status would rightly call them unknown until then."""
    wait_on_host(SPEC.name, "old-ctl", "test -z \"$(sinfo -h -o %t | grep -E 'unk|[*]')\"")


def test_scheduled_backups_land_on_the_mount_and_a_failed_one_degrades_status(cluster):
    """The deploy installed the timer (every day, two kept); its service and the backup
    operation write to <mount>/slurm-app-backups/<instance>/, every folder root's and 0700,
    the files as the manifest lists them; a third backup removes the oldest; one that cannot
    be written (its folder no longer 0700) degrades status, naming why, until the next one."""
    env = cluster
    assert _on("old-ctl", "systemctl is-active slurm-app-backup.timer").strip() == "active"
    _on("old-ctl", "systemctl start slurm-app-backup.service")
    first = _backups()
    assert len(first) == 1
    time.sleep(1)  # backups are named by the second they start
    code, result = lab_operation(SPEC.name, env, "backup")
    assert code == 0, result
    detail = result["adapter_detail"]["backup"]
    assert detail["destination"] == "platform_mount" and detail["pruned"] == []
    assert detail["manifest"]["slurm_version"].startswith("22.05.")
    assert detail["path"] == f"{BACKUPS}/{result['instance']['id']}/{detail['backup_id']}"
    for entry in detail["manifest"]["files"]:
        line = _on("old-w01", f"sha256sum {detail['path']}/{entry['name']}")
        assert line.split()[0] == entry["sha256"], entry["name"]
    modes = _on("old-w01", f"stat -c '%U %a' {BACKUPS} {BACKUPS}/* {detail['path']}")
    assert set(modes.splitlines()) == {"root 700"}
    # the result names the key's file and checksum, never its content
    key = bytes.fromhex(
        _on("old-ctl", "od -An -v -tx1 /etc/munge/munge.key").replace(" ", "").replace("\n", "")
    )
    assert len(key) >= 32
    for form in (key.hex(), base64.b64encode(key).decode(), base64.b64encode(key[:48]).decode()):
        assert form not in json.dumps(result)
    time.sleep(1)
    _on("old-ctl", "systemctl start slurm-app-backup.service")
    kept = _backups()
    assert len(kept) == 2 and kept[0] == detail["backup_id"] and first[0] not in kept

    _on("old-ctl", f"chmod 0755 {BACKUPS}")
    controller = lab.host_container(SPEC.name, "old-ctl")
    assert controller.exec_run(["systemctl", "start", "slurm-app-backup.service"]).exit_code != 0
    _on("old-ctl", f"chmod 0700 {BACKUPS}")
    _wait_for_every_node()
    code, status = lab_operation(SPEC.name, env, "status")
    assert code == 0 and status["instance"]["health"] == "degraded", status
    health = status["adapter_detail"]["health"]
    assert health["problems"] == [
        f"the last backup failed at {health['backup']['last_attempt']['at']}: "
        f"{BACKUPS}: must be root's and 0700"
    ]
    assert health["backup"]["scheduled"] and health["backup"]["interval_s"] == 86400
    assert any(disk["path"] == lab_spec.LAB_MOUNT for disk in health["disks"])
    time.sleep(1)
    _on("old-ctl", "systemctl start slurm-app-backup.service")
    _wait_for_every_node()
    code, status = lab_operation(SPEC.name, env, "status")
    assert status["instance"]["health"] == "healthy", status["adapter_detail"]["health"]


def test_a_controller_is_replaced_from_the_mount_on_22_05_and_the_old_one_cleaned(cluster, portal):
    """The replacement on Debian 12, from the scheduled backups' folder (lab_tools has the
    checks), with the old controller still answering: it is stopped first and cleaned last.
    The job running through it is requeued with a record (22.05's slurmstepd keeps the old
    controller's address) and runs again. The archive's folder on the mount is the new
    slurmdbd's too. Issue 69: the portal attached to the cluster (in the request's
    linked_instances, as the platform carries it) follows: its client gets the new controller's
    slurm.conf, clusters.d names the new login host, and a desktop session submitted through it
    afterwards runs; then the portal is decommissioned."""
    lab.add_host(SPEC.name, NEW_CONTROLLER)
    result = check_controller_replacement(
        SPEC.name, cluster, "old-ctl", NEW_CONTROLLER, "old-w01", lost=False, requeued=True
    )
    assert result["adapter_detail"]["restore"]["slurm_version"].startswith("22.05.")
    archive = _on(NEW_CONTROLLER, "sacctmgr -n -P show configuration | grep -i '^ArchiveDir'")
    assert f"{ARCHIVE}/{result['instance']['id']}" in archive

    new_address = portal_lab.check_followed(portal, result, NEW_CONTROLLER)
    assert portal.on("grep ^SlurmctldHost= /etc/slurm/slurm.conf").strip() == (
        f"SlurmctldHost={NEW_CONTROLLER}({new_address})"
    )
    session = portal_lab.launch_session(
        portal, "desktop", f"{DESKTOP_DIR}-after", "bc_num_slots=1", "gpus=0", "bc_queue=batch"
    )
    assert _on(NEW_CONTROLLER, f"squeue -h -j {session['job']} -o %T").strip() == "RUNNING"
    _on(NEW_CONTROLLER, f"scancel {session['job']}")
    code, _, output = portal.operation(PORTAL, "decommission")
    assert code == 0, output[-4000:]


def test_a_jobs_output_on_a_worker_is_read_on_the_others_and_outlives_the_cluster(cluster):
    """Last: decommission. The home is made once, on the controller, and joined members see it
    (the controller the replacement made)."""
    env = cluster
    for host in (NEW_CONTROLLER, "old-w01", "old-w02"):
        assert _on(host, "getent passwd labuser").split(":")[5] == HOME
    _on(
        NEW_CONTROLLER,
        f"cd {HOME} && runuser -u labuser -- sbatch -W -w old-w02 -o out-%j.txt "
        "--wrap 'hostname > from-a-job.txt'",
    )
    for host in (NEW_CONTROLLER, "old-w01", "old-w02"):
        assert _on(host, f"cat {HOME}/from-a-job.txt").strip() == "old-w02"

    code, result = lab_operation(SPEC.name, env, "remove_worker", "old-w02")
    assert code == 0, result
    kept = result["adapter_detail"]["kept"]["old-w02"]
    sizes = {e["path"]: e["bytes"] for e in kept}
    # the folder of labuser's portal sessions (test_a_desktop_session_...) is listed on its own
    assert sorted(sizes) == [HOME, portal_lab.SESSIONS, LATE_HOME] and sizes[HOME] > 0
    assert not any(
        e["path"].startswith("/workspace") or e["path"] == "/home/labuser"
        for e in result["adapter_detail"]["destroyed"]["old-w02"]
    )
    assert _on("old-w02", "getent passwd labuser || true").strip() == ""

    members = {m["member_id"]: m["status"] for m in result["members"]}
    code, preview = lab_operation(SPEC.name, env, "decommission", preview=True)
    assert code == 0, preview
    assert preview["changed"] == 0 and preview["instance"]["status"] == "unchanged"
    assert {m["member_id"]: m["status"] for m in preview["members"]} == members
    would = preview["adapter_detail"]
    assert _on(NEW_CONTROLLER, "systemctl is-active slurmctld").strip() == "active"

    code, result = lab_operation(SPEC.name, env, "decommission")
    assert code == 0, result
    detail = result["adapter_detail"]
    assert detail["kept"] == would["would_keep"]
    backups = f"{BACKUPS}/{result['instance']['id']}"
    archive = f"{ARCHIVE}/{result['instance']['id']}"
    assert sorted(e["path"] for e in detail["kept"][NEW_CONTROLLER]) == [
        HOME,
        portal_lab.SESSIONS,
        LATE_HOME,
        archive,
        backups,
    ]
    destroyed, previewed = (
        teardown_paths(detail["destroyed"]),
        teardown_paths(would["would_destroy"]),
    )
    assert destroyed == previewed, (destroyed, previewed)
    # the platform's storage still holds the job's output; the cluster's accounts are gone
    assert _on("old-w01", f"cat {HOME}/from-a-job.txt").strip() == "old-w02"
    assert _on(NEW_CONTROLLER, "getent passwd labuser late || true").strip() == ""
    remove_planted_links(SPEC.name, LINK_TARGET_BEFORE[0])
    assert _on(NEW_CONTROLLER, "ls -A /workspace").split() == [
        "home",
        "slurm-app-archive",
        "slurm-app-backups",
    ]
    assert len(_on("old-w01", f"ls {backups}").split()) == 2
