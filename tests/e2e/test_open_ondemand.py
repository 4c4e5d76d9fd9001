"""The open-ondemand app through the driver, as the platform runs it, attached to a lab cluster
(a one-host same_node cluster on the platform's storage: one volume at /workspace on every lab
host, the portal's too): a companion portal on its own lab host, then a co-hosted one on the
controller. A local OIDC provider (molecule/open_ondemand/oidc_provider.py: oidc-provider-mock
over TLS, client registration required) runs on the lab network's gateway. Open OnDemand's
package cannot be installed here: upstream's own portal generator and mod_ood_proxy are laid
out on the portal host where the package puts them (portal_lab, shared with the Debian 12
lab's portal), so the role writes Apache's site with update_ood_portal as with the package;
only the per-user nginx and the Rails dashboard (the PUN) are absent."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import chromium
import portal_lab
import pytest
import rfb
import yaml
from conftest import ROOT, VENV, console_script
from lab_tools import (
    check_homes_are_their_users_alone,
    deploy_lab,
    lab_operation,
    on_host,
    plant_links_on_the_mount,
    platform_env,
    remove_planted_links,
    teardown_paths,
    upload,
)

from driver.lab import lab
from driver.lab import spec as lab_spec

pytestmark = pytest.mark.containers
SPEC = lab_spec.LabSpec(
    name="ood",
    workers=1,
    distro="trixie",
    placement="same_node",
    storage="platform_mount",
    interactive_runtimes=("jupyter", "desktop", "vscode"),
    # GPU device files on the node (no GPU behind them): a session's gres, its
    # CUDA_VISIBLE_DEVICES and the GPU job mapping are Slurm's own
    gpus=2,
)
# a second cluster account, in the portal's project too: another user of the portal; and a
# partition for visualisation sessions beside the default one
PEER = "labpeer"
CLUSTER_CONFIG = {
    "users": [lab_spec.LAB_USER, {"name": PEER, "uid": 2001, "gid": 2001}],
    "partitions": [{"name": "batch", "default": True}, {"name": "vis"}],
}
CONTROLLER = f"{SPEC.name}-ctl"
PORTAL = f"{SPEC.name}-portal"
LOGIN_CHECK = portal_lab.LOGIN_CHECK
AUDIT_NOTICE = (
    "Actions taken in the HPC Portal are managed by Slurm, not tracked in platform audit logs."
)
USER = portal_lab.USER
HOME = portal_lab.HOME


def _address(host: str) -> str:
    return portal_lab.address(SPEC.name, host)


@pytest.fixture(scope="module")
def portal(docker_engine, open_ondemand_upstream, tmp_path_factory):
    env = platform_env(tmp_path_factory.mktemp("driver-state"))
    deploy_lab(SPEC, env, CLUSTER_CONFIG)
    companion = portal_lab.companion_portal(
        SPEC.name,
        PORTAL,
        env,
        open_ondemand_upstream,
        tmp_path_factory.mktemp("oidc"),
        ["jupyter", "desktop", "vscode"],
        trusting=[CONTROLLER],
    )
    companion.deployed = companion.operation(PORTAL, "deploy")
    yield companion
    companion.stop()
    lab.down(SPEC.name)


def _portal(command: str) -> str:
    return on_host(SPEC.name, PORTAL, command)


def _controller(command: str) -> str:
    return on_host(SPEC.name, CONTROLLER, command)


def _passphrase() -> str:
    return _portal("cat /etc/ood/config/slurm-app/oidc_crypto_passphrase").strip()


def test_companion_deploy_reports_the_portal_and_the_audit_notice(portal):
    code, result, output = portal.deployed
    assert code == 0, output[-4000:]
    assert result["status"] == "succeeded"
    assert [m["status"] for m in result["members"]] == ["ready"]
    assert result["instance"]["health"] == "healthy"
    detail = result["adapter_detail"]
    # the controller is read for its munge key only
    assert detail["hosts_touched"] == [CONTROLLER, PORTAL]
    assert result["hosts"][CONTROLLER]["changed"] == 0
    state = detail["portal"]
    assert state["services"] == {
        "apache2": "running",
        "munge": "running",
        "sackd": "running",
        "prometheus-node-exporter": "running",
    }
    # the manifest's exporter of the portal answers where it is declared
    with urllib.request.urlopen(f"http://{_address(PORTAL)}:9100/metrics", timeout=10) as answer:
        assert "node_exporter_build_info" in answer.read().decode()
    assert state["slurm_client_answers"] is True
    assert str(state["oidc_metadata"]["status"]) == "200", state["oidc_metadata"]
    assert state["ondemand_version"] is None
    assert detail["health"]["classification"] == "healthy", detail["health"]
    bundle = detail["access_bundle"]
    assert bundle["audit_notice"] == AUDIT_NOTICE
    assert AUDIT_NOTICE in bundle["notes"]
    assert bundle["url"] == f"https://{_address(PORTAL)}/"
    for secret in (portal.secret, _passphrase()):
        assert secret not in output
        assert secret not in json.dumps(result)


def test_an_unchanged_redeploy_skips_the_converge_and_a_hand_edit_is_repaired(portal):
    """The same request again, on a portal as the last deploy left it: nothing converges, the
    Slurm client is proven again. A hand edit of what the role manages makes the next deploy
    converge and put it back."""
    started = time.monotonic()
    code, result, output = portal.operation(PORTAL, "deploy")
    elapsed = time.monotonic() - started
    assert code == 0, output[-4000:]
    assert result["changed"] == 0, result
    state = result["adapter_detail"]["portal"]
    assert state["converge_skipped"] is True and state["slurm_client_answers"] is True
    print(f"unchanged portal re-run: {elapsed:.1f} s")
    cluster_file = f"/etc/ood/config/clusters.d/{SPEC.name}.yml"
    before = _portal(f"cat {cluster_file}")
    _portal(f"echo '# hand edit' >> {cluster_file}")
    code, result, output = portal.operation(PORTAL, "deploy")
    assert code == 0, output[-4000:]
    assert result["adapter_detail"]["portal"]["converge_skipped"] is False
    assert result["changed"] > 0 and _portal(f"cat {cluster_file}") == before


def _by_hand(
    portal: dict, tmp_path: Path, kind: str, playbook: str, *args: str
) -> subprocess.CompletedProcess:
    """ansible-playbook as an operator runs it, on the inventory the driver prints for the
    portal's `kind` request."""
    listed = console_script("inventory", str(portal.request(PORTAL, kind)), env=portal.env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    inventory = tmp_path / f"{kind}.yml"
    inventory.write_text(listed.stdout)
    ssh = f"-o UserKnownHostsFile={tmp_path / 'known_hosts'} -o StrictHostKeyChecking=accept-new"
    # ssh's control sockets need a short path (a unix socket's is at most 107 bytes)
    control = tempfile.mkdtemp(prefix="cp-")
    try:
        return subprocess.run(
            [
                str(VENV / "bin" / "ansible-playbook"),
                *("-i", str(inventory), f"playbooks/{playbook}"),
                *("-e", json.dumps({"ansible_ssh_common_args": ssh}), *args),
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={
                "PATH": f"{VENV / 'bin'}:/usr/bin:/bin",
                "HOME": str(tmp_path),
                "ANSIBLE_SSH_CONTROL_PATH_DIR": control,
                "ANSIBLE_NOCOLOR": "1",
            },
            check=False,
            timeout=600,
        )
    finally:
        shutil.rmtree(control, ignore_errors=True)


# what a run that changes nothing leaves as it was: the portal's files and its daemons' starts
PORTAL_STATE = (
    "find /etc/ood /etc/apache2 /etc/munge /etc/slurm /etc/default /var/www/ood /var/lib/slurm-app"
    " -type f -print0 | sort -z | xargs -0 sha256sum;"
    " systemctl show -p Id -p ExecMainStartTimestampMonotonic apache2 sackd munge"
)


def test_an_operator_dry_runs_the_portal_and_configures_it_alone(portal, tmp_path):
    """Issue 48 (5, 6), with OOD's own portal generator: a check run of the converged portal
    would change nothing, one with a new title shows the diff, and neither changes anything;
    --tags configure then applies the title alone, and again puts the old one back."""
    converge = ("-e", "slurm_common_converge_check=false")
    retitled = ("-e", json.dumps({"open_ondemand_portal_title": "Dry Run Portal"}))
    before = _portal(PORTAL_STATE)
    recap = re.compile(rf"{PORTAL}\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0\s")
    dry_run = ("--check", "--diff")
    as_is = _by_hand(portal, tmp_path, "deploy", "open_ondemand_deploy.yml", *dry_run, *converge)
    assert as_is.returncode == 0, as_is.stdout[-4000:]
    assert recap.search(as_is.stdout)[1] == "0", as_is.stdout[-4000:]
    changed = _by_hand(portal, tmp_path, "deploy", "open_ondemand_deploy.yml", *dry_run, *retitled)
    assert changed.returncode == 0, changed.stdout[-4000:]
    title_diff = '-OOD_DASHBOARD_TITLE="Lab Portal"\n+OOD_DASHBOARD_TITLE="Dry Run Portal"'
    assert title_diff in changed.stdout, changed.stdout[-4000:]
    assert int(recap.search(changed.stdout)[1]) > 0
    assert _portal(PORTAL_STATE) == before
    for secret in (portal.secret, _passphrase()):
        assert secret not in as_is.stdout + changed.stdout
    for title, args in (("Dry Run Portal", retitled), ("Lab Portal", ())):
        ran = _by_hand(
            portal, tmp_path, "deploy", "open_ondemand_deploy.yml", "--tags", "configure", *args
        )
        assert ran.returncode == 0, ran.stdout[-4000:]
        assert f'OOD_DASHBOARD_TITLE="{title}"' in _portal("cat /etc/ood/config/apps/dashboard/env")
    assert CONTROLLER in lab.test_job(SPEC.name)


def test_the_cluster_user_submits_and_queries_from_the_portal(portal):
    """From the home on the platform's storage: the job's output, written where it ran (the
    controller, the cluster's only worker), is read on the portal and on the controller."""
    assert _portal(f"getent passwd {USER}").split(":")[5] == HOME
    job = _portal(
        f"cd {HOME} && runuser -u {USER} -- sbatch --parsable --wait -o portal-%j.out "
        "--wrap 'id -un; hostname'"
    ).strip()
    assert job.isdigit(), job
    for read in (_portal, _controller):
        assert read(f"cat {HOME}/portal-{job}.out").split() == [USER, CONTROLLER]
    assert "JOBID" in _portal(f"runuser -u {USER} -- squeue")
    assert _portal(f"id -u {USER}").strip() == str(lab_spec.LAB_USER["uid"])
    key = "sha256sum < /etc/munge/munge.key"
    assert _portal(key) == _controller(key)


def test_ood_core_submits_lists_and_deletes_the_users_jobs_from_the_portal(portal):
    """Open OnDemand's own job library, as the dashboard uses it, as the cluster user on the
    companion portal with the rendered clusters.d: it finds the cluster, a job it submits is
    listed by info_all, and deleted. No `-M`: accounting is only on the controller."""
    seen = portal.ruby("ood_core_jobs.rb", portal_lab.CLUSTERS_D, HOME)
    assert seen["clusters"] == [SPEC.name]
    assert seen["long"] in seen["listed"]
    assert seen["deleted"] == "completed"


LOOPBACK_PORT = 8765
SESSION_DIR = f"{portal_lab.SESSIONS}/sys/jupyter/output/e2e-session"


def test_a_jupyter_session_runs_on_the_node_and_the_user_reaches_it_through_the_portal(portal):
    """The whole interactive path against upstream's code: the app's form drawn with the node's
    limits as Slurm shows them to the user (a launch past them refused, naming the limit; the
    session's CPU and memory as asked, in Slurm's job); the app's templates rendered and wrapped
    by ood_core, submitted by its Slurm adapter; Debian's Jupyter Notebook (the cluster's
    interactive_runtimes) starts on the node and after.sh holds connection.yml back until it
    listens; Apache's site as upstream's generator writes it, mod_ood_proxy's Lua mapping the
    login through the bundle's account check and proxying /node/<address>/<port>/ to Jupyter,
    whose login takes the view's password. A stranger is sent to the no-account page, a user of
    another project's group gets 401, and neither the portal's own 127.0.0.1 (a server listens
    there) nor a host outside the cluster is reachable through the proxy."""
    site = _portal("cat /etc/apache2/sites-available/ood-portal.conf")
    assert "Generated using ood-portal-generator" in site
    assert 'LuaRoot "/opt/ood/mod_ood_proxy/lib"' in site
    _portal(
        f"(setsid runuser -u www-data -- python3 -m http.server --bind 127.0.0.1 {LOOPBACK_PORT} "
        "--directory /tmp >/dev/null 2>&1 &) && sleep 1"
    )
    # issue 72 (1): the form offers what the node has, as Slurm shows it to the user; past it
    # the launch is refused with the limit named, before anything is submitted
    cpus, gres = _controller(f"sinfo -h -N -n {CONTROLLER} -o '%c %G'").split()[:2]
    gpus = int(gres.rsplit(":", 1)[1])
    refused = portal_lab.refused_launch(portal, "jupyter", f"gpus={gpus + 1}")
    attributes = refused["form"]["attributes"]
    assert (attributes["cpus"]["max"], attributes["gpus"]["max"]) == (int(cpus), gpus), refused
    assert refused["refused"] == (
        f"GPUs per node: {gpus + 1} is more than any node of partition batch has ({gpus})"
    )
    # the app launched as the dashboard launches it: form values as the browser posts them
    session = portal_lab.launch_session(
        portal, "jupyter", SESSION_DIR, "bc_num_slots=1", "gpus=0", "cpus=1", "memory_mib=512"
    )
    try:
        # one task of the CPU and the 512 MiB the form asked for
        job = _controller(f"scontrol show job -o {session['job']}")
        assert "MinCPUsNode=1 " in job and "MinMemoryNode=512M " in job, job
        connection = session["connection"]
        host, port, password = connection["host"], connection["port"], str(connection["password"])
        xsrf = str(connection["xsrf_token"])
        # the node's address as Slurm knows it, where the portal's /node/ proxy goes; the
        # file written on the node, read on the portal: the home on the platform's storage
        assert host == _address(CONTROLLER)
        assert len(password) == 16
        assert "port: " in _controller(f"cat {SESSION_DIR}/connection.yml")
        # the Connect button: a form posting the password to Jupyter's login behind /node/
        action = re.search(r'<form action="([^"]+)"', session["view"]).group(1)
        assert action == f"/node/{host}/{port}/login"
        assert f'name="password" value="{password}"' in session["view"]
        # issue 44 (11): Jupyter's xsrf check stays on; the view sets the form's value as the
        # _xsrf cookie where Jupyter keeps its own (the origin's root)
        assert f'name="_xsrf" value="{xsrf}"' in session["view"] and len(xsrf) == 32
        assert f"_xsrf={xsrf}; path=/; secure; samesite=strict" in session["view"]
        assert "disable_check_xsrf" not in _controller("ps -eo args")
        checked = subprocess.run(
            [
                sys.executable,
                LOGIN_CHECK,
                _address(PORTAL),
                portal.provider,
                "good",
                USER,
                "--page",
                action,
                "--marker",
                "Password or token",
                "--form",
                action,
                "password",
                password,
                f'data-base-url="/node/{host}/{port}/"',
                "--xsrf",
                "_xsrf",
                xsrf,
                "--refused",
                f"/node/127.0.0.1/{LOOPBACK_PORT}/",
                "--refused",
                f"/rnode/127.0.0.1/{LOOPBACK_PORT}/",
                "--refused",
                f"/node/169.254.169.254/{LOOPBACK_PORT}/",
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        # the token is in the job's environment, never on a command line the node shows
        assert password not in _controller("ps -eo args")
    finally:
        _controller(f"scancel {session['job']}")
        _portal(f"pkill -f 'http[.]server --bind 127.0.0.1 {LOOPBACK_PORT}' || true")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    seen = json.loads(checked.stdout)
    assert seen[USER]["status"] == 200 and "/tree" in seen["form"]["url"], seen
    assert seen["form_without_xsrf"] == 403, seen
    assert set(seen["refused"].values()) <= {403, 404}, seen
    # issue 18 (6): the same name from another project's group is refused
    assert seen["outsider"]["status"] == 401
    # mod_ood_proxy's own log hook names the account the login was mapped to
    log = _portal("cat /var/log/apache2/*_error_ssl.log")
    assert f'local_user="{USER}"' in log, log[-2000:]


DESKTOP_DIR = f"{portal_lab.SESSIONS}/sys/desktop/output/e2e-desktop"
# what a teardown leaves on the platform's storage: the folders of the users' portal sessions
# (issue 51; the peer's from the idle stop's test), then the homes (each counting the rest of
# it)
KEPT = [portal_lab.sessions(PEER), portal_lab.SESSIONS, portal_lab.home(PEER), HOME]


def test_a_desktop_session_is_drawn_through_the_portal_with_its_gpu(portal):
    """Issue 51 on Debian 13 (portal_lab.desktop_session): the vis partition the form's queue
    field lists, one of the node's GPUs."""
    with portal_lab.desktop_session(
        portal,
        DESKTOP_DIR,
        PEER,
        "desktop-novnc-trixie.png",
        "bc_num_slots=1",
        "gpus=1",
        "bc_queue=vis",
    ) as session:
        # the form's queue field lists the cluster's partitions (the adapter's queues)
        assert session["node"] == CONTROLLER
        assert sorted(session["queues"]) == ["batch", "vis"]


IDLE_DIR = f"{portal_lab.sessions(PEER)}/sys/jupyter/output/e2e-idle"
VIEWED_DIR = f"{portal_lab.SESSIONS}/sys/desktop/output/e2e-viewed"


def _jobs_running() -> set[str]:
    return set(_controller("squeue -h -t running -o %i").split())


def _each_sees_only_their_own(portal: portal_lab.Portal, sessions: dict[str, dict]) -> None:
    """Issue 72 (5), `sessions` by their user, all running: each user's Jobs tab (ood_core as
    the dashboard runs it, all jobs shown), squeue and sacct on the portal list their own
    session and not the other's (PrivateData), and the other's connection file is closed."""
    for account, own in sessions.items():
        (other,) = [s for user, s in sessions.items() if user != account]
        mine = portal.ruby("ood_job_status.rb", portal_lab.CLUSTERS_D, own["job"], user=account)
        assert mine["status"] == "running" and mine["listed"] and mine["in_all_jobs"], mine
        theirs = portal.ruby("ood_job_status.rb", portal_lab.CLUSTERS_D, other["job"], user=account)
        assert theirs["status"] == "completed" and not theirs["in_all_jobs"], theirs
        as_user = f"runuser -u {account} --"
        queue = _portal(f"{as_user} squeue -h -t all -o %i").split()
        recorded = _portal(f"{as_user} sacct -n -X -a -o JobIDRaw -S now-1hours").split()
        for seen in (queue, recorded):
            assert own["job"] in seen and other["job"] not in seen, (account, seen)
        assert "Permission denied" in _portal(
            f"{as_user} cat {other['dir']}/connection.yml 2>&1 || true"
        )


def test_an_idle_session_ends_and_one_with_a_viewer_stays(portal, tmp_path):
    """Issue 72 (2, and 5's idle part), with the site's idle stop at 2 minutes
    (sessions.idle_minutes; the portal deployed with it, then with the lab's site again): the
    peer's Jupyter session nobody connects to ends by itself, its GPU freed, and the node's
    journal says why; the user's desktop, whose noVNC viewer stays connected through the
    portal, keeps running, and its card (the app's info.html.erb as the dashboard renders it)
    shows when it would end. While both run, neither user sees the other's session."""
    lab_site = Path(portal.env["SLURM_APP_STATE_DIR"]) / "site.yaml"
    site = tmp_path / "site.yaml"
    site.write_text(
        yaml.safe_dump(yaml.safe_load(lab_site.read_text()) | {"sessions": {"idle_minutes": 2}})
    )
    portal.env["SLURM_APP_SITE"] = str(site)
    try:
        code, _, output = portal.operation(PORTAL, "deploy")
        assert code == 0, output[-3000:]
        env_file = _portal("cat /etc/ood/config/apps/dashboard/env")
        assert 'SLURM_APP_SESSION_IDLE_MINUTES="2"' in env_file.splitlines()
        idle = portal_lab.launch_session(
            portal, "jupyter", IDLE_DIR, "bc_num_slots=1", "gpus=1", user=PEER
        )
        viewed = portal_lab.launch_session(
            portal, "desktop", VIEWED_DIR, "bc_num_slots=1", "gpus=1"
        )
        _each_sees_only_their_own(
            portal, {PEER: idle | {"dir": IDLE_DIR}, USER: viewed | {"dir": VIEWED_DIR}}
        )
        found = viewed["connection"]
        host, websocket_port = found["host"], found["websocket"]
        gateway = portal_lab.address(SPEC.name, PORTAL)
        owner = portal.signed_in(USER, f"/rnode/{host}/{websocket_port}/vnc.html")
        try:
            with rfb.viewing(
                f"wss://{gateway}/rnode/{host}/{websocket_port}/websockify",
                str(found["password"]),
                cookie=portal_lab.session_cookie(owner),
            ) as seen:
                assert seen.authenticated, seen
                # 2 minutes after its start, and the watch's 15 s, the idle one is gone
                deadline = time.monotonic() + 200
                while idle["job"] in _jobs_running():
                    assert time.monotonic() < deadline, "the idle session still runs"
                    time.sleep(5)
                assert viewed["job"] in _jobs_running()
                # the idle session's GPU is free: the node holds the viewed desktop's alone
                node = _controller(f"scontrol show node {CONTROLLER} -o")
                assert "gres/gpu=1" in re.search(r"AllocTRES=(\S*)", node).group(1), node
                # the viewed desktop's card: the deadline its viewer keeps moving (the watch
                # may move it while the card is drawn)
                deadlines = [int(_controller(f"cat {VIEWED_DIR}/idle_deadline"))]
                card = portal.ruby(
                    "ood_session_card.rb", "/var/www/ood/apps/sys/desktop", VIEWED_DIR
                )
                deadlines.append(int(_controller(f"cat {VIEWED_DIR}/idle_deadline")))
                assert min(deadlines) > time.time() + 60, (deadlines, time.time())
                shown = {
                    f"<p>Ends at {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(ends))} unless"
                    for ends in deadlines
                }
                assert any(card["info"].startswith(text) for text in shown), (card, shown)
            journaled = portal_lab.session_journal(portal, CONTROLLER, idle["job"])
            assert journaled["session_idle"]["SLURM_APP_IDLE_MINUTES"] == "2", journaled
            assert journaled["session_idle"]["SLURM_APP_USER"] == PEER, journaled
            assert journaled["session_idle"]["MESSAGE"].endswith(
                "no client connected for 2 minutes"
            ), journaled
        finally:
            _controller(f"scancel {idle['job']} {viewed['job']}")
    finally:
        portal.env.pop("SLURM_APP_SITE")
        code, _, output = portal.operation(PORTAL, "deploy")
        assert code == 0, output[-3000:]
    assert (
        'SLURM_APP_SESSION_IDLE_MINUTES="60"'
        in _portal("cat /etc/ood/config/apps/dashboard/env").splitlines()
    )


VSCODE_DIR = f"{portal_lab.SESSIONS}/sys/vscode/output/e2e-vscode"
# the editor's explorer lists the home's files: read through code-server's websocket
WORKBENCH_DRAWN = (
    'document.querySelector(".monaco-workbench .part.sidebar .monaco-list-row") !== null'
)


# where another user's listener answers on the session's node (find_port's range is 2000-65535;
# the session's own port is never this one while the listener runs after it started)
LISTENER_PORT = 47321


def _listener_of(account: str, host: str, port: int) -> tuple[str, str]:
    """A job of `account`'s that answers on `host`:`port` (behind the portal's /rnode/ proxy)
    and records each request's headers: (its job id, its record's path)."""
    tools = portal_lab.E2E_TOOLS
    upload(
        SPEC.name, CONTROLLER, {"header_recorder.py": portal_lab.HERE / "header_recorder.py"}, tools
    )
    record = f"{lab_spec.LAB_MOUNT}/home/{account}/headers.jsonl"
    job = _controller(
        f"cd /tmp && runuser -u {account} -- sbatch --parsable -w {CONTROLLER} "
        f"-o /dev/null --wrap 'exec python3 {tools}/header_recorder.py {host} {port} "
        f"{record}'"
    ).strip()
    _controller(
        f"for _ in $(seq 100); do ss -Hltn | grep -q ':{port} ' && exit 0; sleep 0.3; done; exit 1"
    )
    return job, record


def test_a_vscode_session_runs_on_the_node_and_the_user_reaches_it_through_the_portal(portal):
    """Issues 51 and 65: the vscode app launched as the dashboard launches it (ood_core's basic
    template): code-server, built on the node from npm's registry (the cluster's vscode
    runtime), on a socket only its user opens, behind code-server-session on the node's
    address and a free port, the session's password in its environment.
    - Another portal user gets the login page and a refusal, 20 times, and never the editor
      or its websocket; the owner's login right after them opens it (no lockout).
    - The session's cookie is HttpOnly, Secure, SameSite=Strict and scoped to the session's
      path: a listener another user runs in a job under /rnode/ never receives it.
    - Chromium draws the editor with the home's files listed (kept in test-artifacts/)."""
    session = portal_lab.launch_session(portal, "vscode", VSCODE_DIR, "bc_num_slots=1", "gpus=0")
    listener_job = ""
    try:
        connection = session["connection"]
        host, port, password = connection["host"], connection["port"], str(connection["password"])
        assert host == _address(CONTROLLER) and len(password) == 32
        assert password not in _controller("ps -eo args")
        # code-server itself listens on no port: only the front does
        code_server = _controller(f"pgrep -u {USER} -f out/node/entry.js -a")
        assert "--socket=" in code_server and "--bind" not in code_server, code_server
        action = re.search(r'<form action="([^"]+)"', session["view"]).group(1)
        assert action == f"/rnode/{host}/{port}/login"
        assert f'name="password" value="{password}"' in session["view"]
        assert f'name="base" value="/rnode/{host}/{port}/"' in session["view"]
        origin, scope = portal.origin, f"/rnode/{host}/{port}/"

        peer = portal.signed_in(PEER, action)
        editor = peer.get(f"{origin}{scope}", verify=False, timeout=30)
        assert editor.status_code == 401 and "workbench" not in editor.text.lower()
        for guess in range(20):
            refused = peer.post(
                f"{origin}{action}",
                data={"password": f"guessed-password-{guess:02d}", "base": scope},
                verify=False,
                timeout=30,
                allow_redirects=False,
            )
            assert refused.status_code == 401 and "set-cookie" not in refused.headers
        unopened = portal_lab.websocket_status(
            f"wss://{_address(PORTAL)}{scope}stable-x/", portal_lab.session_cookie(peer)
        )
        assert unopened == 401, unopened

        started = time.monotonic()
        owner = portal.signed_in(USER, action)
        opened = owner.post(
            f"{origin}{action}",
            data={"password": password, "base": scope},
            verify=False,
            timeout=30,
            allow_redirects=False,
        )
        assert opened.status_code == 303, (opened.status_code, opened.text[:500])
        cookie = opened.headers["set-cookie"]
        assert cookie.startswith("vscode-session=") and "code-server-session" not in cookie
        # the front's path, which OOD's portal also writes for every /rnode/ backend's cookie
        # (without the last slash: a cookie path still ends at a slash or the path's end)
        assert re.search(r"Path=([^;]+)", cookie).group(1).rstrip("/") == scope[:-1], cookie
        assert {"HttpOnly", "Secure", "SameSite=Strict"} <= {
            part.strip() for part in cookie.split(";")
        }, cookie
        workbench = owner.get(f"{origin}{opened.headers['location']}", verify=False, timeout=30)
        assert workbench.status_code == 200 and "workbench" in workbench.text.lower()
        logged_in = time.monotonic() - started

        # another user's listener behind the same proxy: the owner's browser sends it the
        # portal's own session, never the editor's
        listener_job, record = _listener_of(PEER, host, LISTENER_PORT)
        seen = owner.get(f"{origin}/rnode/{host}/{LISTENER_PORT}/probe", verify=False, timeout=30)
        assert seen.status_code == 200 and seen.text == "recorded\n", seen.text[:300]
        (headers,) = [json.loads(line) for line in _controller(f"cat {record}").splitlines()]
        cookies_sent = headers.get("Cookie", "")
        assert "vscode-session" not in cookies_sent and "code-server" not in cookies_sent

        shot, seconds = chromium.screenshot(
            origin,
            {
                portal_lab.login_check.SESSION_COOKIE: owner.cookies[
                    portal_lab.login_check.SESSION_COOKIE
                ],
                "vscode-session": owner.cookies["vscode-session"],
            },
            scope,
            WORKBENCH_DRAWN,
            "vscode-trixie.png",
            settle_seconds=4.0,
            timeout=120.0,
        )
        chromium.keep_timing("vscode: portal and editor login", round(logged_in, 1))
        chromium.keep_timing(
            "vscode: editor drawn, the home listed, in Chromium", round(seconds, 1)
        )
        assert shot.stat().st_size > 20_000
    finally:
        _controller(f"scancel {session['job']} {listener_job}")


def test_a_private_registrys_token_reaches_the_registry_and_nothing_on_the_host(portal, tmp_path):
    """Issue 70: a tenant's npm registry and its token (tenant_sources.npm_registry) as
    slurm_worker gets them from the driver: the token is read on the control node, reaches
    the registry in npm's Authorization header, and is in no file on the node afterwards, nor
    in Ansible's output. The registry (tests/e2e/npm_registry.py, on the node) serves a
    code-server whose tarball is not the pinned one, so the install stops at its check."""
    token = "npm_" + os.urandom(18).hex()
    token_file = tmp_path / "npm-token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    # not a tmpfs (docker's archive API does not reach one), and not among the folders searched
    registry = "/var/lib/npm-registry-test"
    upload(SPEC.name, CONTROLLER, {"npm_registry.py": ROOT / "tests/e2e/npm_registry.py"}, registry)
    _controller(
        f"setsid nohup python3 {registry}/npm_registry.py code-server 9.9.9 {registry}/port"
        f" {registry}/log >/dev/null 2>&1 & echo $! > {registry}/pid;"
        f" for i in $(seq 50); do [ -s {registry}/port ] && break; sleep 0.1; done"
    )
    port = _controller(f"cat {registry}/port").strip()
    include = {"name": "slurm_worker", "tasks_from": "_sessions", "rolespec_validate": False}
    play = [
        {
            "hosts": "node",
            "gather_facts": True,
            "gather_subset": ["min"],
            "tasks": [{"ansible.builtin.include_role": include}],
        }
    ]
    extra = {
        "slurm_worker_interactive_runtimes": list(SPEC.interactive_runtimes),
        "slurm_worker_npm_registry": f"http://127.0.0.1:{port}/",
        "slurm_worker_npm_registry_token_src": str(token_file),
        # a release the node does not have, so the install runs (and stops at the pin)
        "__slurm_worker_code_server_releases": {
            "13": {"version": "9.9.9", "integrity": "sha512-" + "A" * 86 + "=="}
        },
    }
    node = {
        "ansible_connection": "community.docker.docker",
        "ansible_host": f"slurm-app-lab-{SPEC.name}-{CONTROLLER}",
    }
    (tmp_path / "play.yml").write_text(json.dumps(play))
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    (tmp_path / "inventory.yml").write_text(json.dumps({"all": {"hosts": {"node": node}}}))
    try:
        ran = subprocess.run(
            [
                str(VENV / "bin" / "ansible-playbook"),
                *("-i", "inventory.yml", "-e", "@extra.json", "play.yml"),
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={
                "PATH": f"{VENV / 'bin'}:/usr/bin:/bin",
                "HOME": str(tmp_path),
                "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
                "ANSIBLE_FILTER_PLUGINS": str(ROOT / "roles/slurm_common/filter_plugins"),
                "ANSIBLE_NOCOLOR": "1",
            },
            check=False,
            timeout=300,
        )
        log = [json.loads(line) for line in _controller(f"cat {registry}/log").splitlines()]
    finally:
        _controller(f"kill $(cat {registry}/pid); rm -rf {registry}")
    # the install stopped at the pin, its output hidden
    assert ran.returncode == 2, ran.stdout[-3000:]
    assert "Install code-server from npm's registry" in ran.stdout
    assert "the output has been hidden" in ran.stdout, ran.stdout[-3000:]
    assert token not in ran.stdout + ran.stderr
    # the registry saw the token on every request npm made
    assert log and {entry["auth"] for entry in log} == {f"Bearer {token}"}, log
    paths = {entry["path"] for entry in log}
    assert {"/code-server", "/code-server/-/code-server-9.9.9.tgz"} <= paths, paths
    # nothing on the node holds it, and the build's folder is gone
    found = _controller(
        f"grep -rlsF -- {token} /opt /etc /root /tmp /var/tmp /var/cache /home 2>/dev/null; true"
    )
    assert found.strip() == "", found
    releases = _controller("ls /opt/slurm-app/code-server").split()
    assert not [name for name in releases if name.startswith("9.9.9")], releases


def test_status_names_a_stopped_sackd_and_restart_brings_it_back(portal):
    code, result, _ = portal.operation(PORTAL, "status")
    assert code == 0 and result["changed"] == 0, result
    assert result["instance"]["health"] == "healthy", result["adapter_detail"]["health"]
    assert result["adapter_detail"]["hosts_touched"] == [PORTAL]
    _portal("systemctl stop sackd")
    code, result, _ = portal.operation(PORTAL, "status")
    assert code == 0 and result["instance"]["status"] == "degraded", result
    assert f"{PORTAL}: sackd is stopped" in result["adapter_detail"]["health"]["problems"]
    before = _portal("systemctl show -p ActiveEnterTimestampMonotonic --value apache2")
    code, result, _ = portal.operation(PORTAL, "restart")
    assert code == 0, result
    assert result["adapter_detail"]["portal"]["services"]["sackd"] == "running"
    assert _portal("systemctl show -p ActiveEnterTimestampMonotonic --value apache2") != before


# Everything of the cluster's a portal operation could touch on the controller: Slurm's and
# munge's files, the bundle's records, the daemons.
CLUSTER_FILES = (
    "find /etc/slurm /etc/munge /etc/default/slurmd /var/lib/slurm-app -type f -print0 "
    "| sort -z | xargs -0 sha256sum; systemctl show -p MainPID --value slurmctld slurmd munge"
)


def _at_release_1_0(request: dict, options: dict) -> None:
    request["instance"]["version"] = "4.2"  # the portal's version in release 1.0's catalog
    request["operation"]["options"] = options


def test_the_portal_is_upgraded_and_rolled_back_on_its_own(portal):
    """Issue 47: a portal as release 1.0 left it (no release recorded) is upgraded alone and
    rolled back: the cluster's files and daemons are as they were (sha256, PIDs); a refusal
    (Apache stopped) keeps nothing and changes nothing."""
    record = "/var/lib/slurm-app/portal-release.json"
    kept = "ls -A /var/lib/slurm-app-releases 2>/dev/null; true"
    _portal(f"rm {record}")
    cluster = _controller(CLUSTER_FILES)
    to_1_1 = {"to_version": "1.1.0"}
    _portal("systemctl stop apache2")
    try:
        code, result, _ = portal.operation(PORTAL, "upgrade", lambda r: _at_release_1_0(r, to_1_1))
    finally:
        _portal("systemctl start apache2")
    assert code == 1 and result["error"]["code"] == "upgrade_unhealthy", result["error"]
    assert f"{PORTAL} apache2 inactive" in result["error"]["message"]
    assert result["changed"] == 0 and _portal(kept) == ""
    code, result, output = portal.operation(PORTAL, "upgrade", lambda r: _at_release_1_0(r, to_1_1))
    assert code == 0, output[-4000:]
    upgrade = result["adapter_detail"]["upgrade"]
    assert (upgrade["from"]["app_version"], upgrade["to"]["app_version"]) == ("4.2", "1.1.0")
    assert result["adapter_detail"]["releases"][PORTAL]["app_version"] == "1.1.0"
    assert result["hosts"][CONTROLLER]["changed"] == 0
    assert json.loads(_portal(f"cat {record}"))["app_slug"] == "open-ondemand"
    assert _portal(kept).split() == ["open-ondemand-4.2.tar.gz"]
    code, result, output = portal.operation(
        PORTAL, "rollback", lambda r: r["operation"].update(options={"to_version": "4.2"})
    )
    assert code == 0, output[-4000:]
    assert result["adapter_detail"]["rollback"]["to"]["app_version"] == "4.2"
    assert result["adapter_detail"]["hosts_touched"] == [PORTAL]
    assert _portal(f"ls {record} 2>/dev/null; true") == "" and _portal(kept) == ""
    assert _portal("systemctl is-active apache2").strip() == "active"
    assert _controller(CLUSTER_FILES) == cluster
    # the portal as a deploy of this release leaves it again
    code, result, output = portal.operation(PORTAL, "deploy")
    assert code == 0 and result["adapter_detail"]["releases"][PORTAL]["app_version"] == "1.1.0"


def test_a_portal_host_without_the_platform_mount_is_refused_before_anything_changes(portal):
    host = f"{SPEC.name}-nomount"
    lab.add_host(SPEC.name, host, storage=False)
    before = _controller(CLUSTER_STATE)
    code, result, output = portal.operation(host, "deploy")
    assert code == 1, output[-4000:]
    assert result["error"]["code"] == "storage_not_shared", result["error"]
    assert f"{host}: {lab_spec.LAB_MOUNT} is not a mount point" in result["error"]["message"]
    assert result["changed"] == 0
    installed = on_host(SPEC.name, host, "dpkg -l | grep -cE 'apache2|munge|slurm' || true")
    assert installed.strip() == "0"
    assert _controller(CLUSTER_STATE) == before


def test_links_a_cluster_user_plants_on_the_mount_are_never_followed_on_24_11(portal):
    """Issue 44 (1, 5) on Debian 13: the deploys that would follow a planted link are refused,
    nothing changed; homes on the mount are 0700."""
    before = plant_links_on_the_mount(SPEC.name, portal.env)
    remove_planted_links(SPEC.name, before)
    check_homes_are_their_users_alone(SPEC.name, [CONTROLLER], HOME)


def test_a_cohosted_portal_comes_and_goes_leaving_the_cluster_as_it_was(portal):
    conf = "sha256sum /etc/slurm/slurm.conf /etc/munge/munge.key"
    before = _controller(conf)
    code, result, output = portal.operation(CONTROLLER, "deploy")
    assert code == 0, output[-4000:]
    assert result["adapter_detail"]["portal"]["services"] == {"apache2": "running"}
    assert result["adapter_detail"]["portal"]["slurm_client_answers"] is True
    # OOD's job library on the co-hosted portal, as its dashboard would run it
    _controller(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
        "ruby ruby-ffi ruby-rexml >/dev/null"
    )
    portal_lab.upload_session_tools(SPEC.name, CONTROLLER, portal.upstream)
    seen = portal.ruby("ood_core_jobs.rb", portal_lab.CLUSTERS_D, HOME, host=CONTROLLER)
    assert seen["clusters"] == [SPEC.name] and seen["long"] in seen["listed"], seen
    assert seen["deleted"] == "completed"
    code, result, output = portal.operation(CONTROLLER, "decommission")
    assert code == 0, output[-4000:]
    destroyed = [e["path"] for e in result["adapter_detail"]["destroyed"][CONTROLLER]]
    assert "/etc/ood" in destroyed and "/etc/munge" not in destroyed
    assert _controller(conf) == before
    assert _controller("systemctl is-active munge slurmctld slurmd").split() == ["active"] * 3
    assert _controller(f"id -u {USER}").strip() == str(lab_spec.LAB_USER["uid"])
    assert "dpkg: apache2" not in _controller("dpkg -s apache2 2>&1 || true")
    assert CONTROLLER in lab.test_job(SPEC.name)


# What a portal's teardown must never take from a cluster host.
CLUSTER_STATE = (
    "sha256sum /etc/slurm/slurm.conf /etc/munge/munge.key; "
    f"id {USER}; systemctl is-active munge slurmctld slurmd"
)


def test_a_request_that_hides_the_controller_cannot_tear_it_down(portal):
    """Issue 18 (2): the request moves the cluster's members onto the companion portal's
    allocation and puts a "companion" portal on the real controller. Validation cannot tell;
    the role can: slurmctld runs there, so the decommission is refused with nothing removed."""
    portal_allocation = next(
        a["id"]
        for a in json.loads((lab_spec.lab_dir(SPEC.name) / "allocations.json").read_text())
        if a["hostname"] == PORTAL
    )

    def hide_the_controller(request):
        for member in request["linked_instances"][0]["members"]:
            member["allocation_id"] = portal_allocation

    before = _controller(CLUSTER_STATE)
    code, result, output = portal.operation(CONTROLLER, "decommission", hide_the_controller)
    assert code == 1, output[-4000:]
    assert result["error"]["code"] == "slurm_host", result["error"]
    assert "slurmctld.service" in result["error"]["message"]
    assert result["hosts"][CONTROLLER]["changed"] == 0
    assert _controller(CLUSTER_STATE) == before
    assert CONTROLLER in lab.test_job(SPEC.name)


def test_the_teardown_checks_the_users_before_it_removes_any(portal, tmp_path):
    """Issue 18 (3): an operator's inventory (the driver refuses such a request) naming root
    and www-data as cluster users: the teardown's own check stops it before anything goes."""
    hostile = {
        "slurm_common_users": [{"name": "root", "uid": 2001}, {"name": "www-data", "uid": 2002}]
    }
    teardown = "open_ondemand_decommission.yml"
    ran = _by_hand(portal, tmp_path, "decommission", teardown, "-e", json.dumps(hostile))
    assert ran.returncode != 0, ran.stdout[-3000:]
    assert "users[0].name: expected a name that no system account" in ran.stdout, ran.stdout
    assert "changed=0" in ran.stdout
    assert _portal("id -u root; id -u www-data; systemctl is-active apache2 munge").split() == [
        "0",
        "33",
        "active",
        "active",
    ]


def test_decommission_takes_the_companion_portal_off_and_leaves_the_cluster(portal):
    conf = "sha256sum /etc/slurm/slurm.conf /etc/munge/munge.key"
    before = _controller(conf)
    code, result, output = portal.operation(PORTAL, "decommission")
    assert code == 0, output[-4000:]
    assert [m["status"] for m in result["members"]] == ["removed"]
    assert result["adapter_detail"]["hosts_touched"] == [PORTAL]
    destroyed = {e["path"] for e in result["adapter_detail"]["destroyed"][PORTAL]}
    assert {"/etc/ood", "/etc/munge"} <= destroyed
    # the home is on the platform's storage: kept, and still the cluster's
    assert not any(path.startswith(("/home", lab_spec.LAB_MOUNT)) for path in destroyed)
    assert [e["path"] for e in result["adapter_detail"]["kept"][PORTAL]] == KEPT
    assert _portal(f"ls {HOME}").strip() and _controller(f"ls {HOME}").strip()
    left = _portal(
        "dpkg-query -W -f '${Package} ${Status}\\n' apache2 libapache2-mod-auth-openidc munge "
        "slurm-client sackd prometheus-node-exporter 2>/dev/null | grep ' installed$' || true; "
        f"ls -d /etc/ood /etc/munge /var/www/ood 2>/dev/null || true; id {USER} 2>&1 || true"
    )
    assert left.strip() == f"id: '{USER}': no such user", left
    assert _controller(conf) == before
    assert CONTROLLER in lab.test_job(SPEC.name)


def test_the_clusters_decommission_keeps_the_home_on_the_platforms_storage(portal):
    """Last: the same_node cluster goes. Its controller is cleaned as a worker first, and what
    stays on the platform's storage is still measured and listed, as the preview said."""
    code, preview = lab_operation(SPEC.name, portal.env, "decommission", preview=True)
    assert code == 0 and preview["changed"] == 0, preview
    code, result = lab_operation(SPEC.name, portal.env, "decommission")
    assert code == 0, result
    kept = result["adapter_detail"]["kept"]
    assert kept == preview["adapter_detail"]["would_keep"]
    # and the cluster's backups folder, which its deploy made on the mount (issue 65)
    instance = json.loads((lab_spec.lab_dir(SPEC.name) / "deploy.json").read_text())["instance"]
    backups = f"{lab_spec.LAB_MOUNT}/slurm-app-backups/{instance['id']}"
    assert [e["path"] for e in kept[CONTROLLER]] == [*KEPT, backups]
    assert teardown_paths(result["adapter_detail"]["destroyed"]) == teardown_paths(
        preview["adapter_detail"]["would_destroy"]
    )
    assert _controller(f"ls {HOME}").strip()
