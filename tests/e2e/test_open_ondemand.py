"""The open-ondemand app through the driver, as the platform runs it, attached to a lab cluster
(a one-host same_node cluster on the platform's storage: one volume at /workspace on every lab
host, the portal's too): a companion portal on its own lab host, then a co-hosted one on the
controller. A local OIDC provider (molecule/open_ondemand/oidc_provider.py: oidc-provider-mock
over TLS, client registration required) runs on the lab network's gateway. Open OnDemand's
package cannot be installed here: upstream's own portal generator and mod_ood_proxy are laid
out on the portal host where the package puts them (lab_tools.lay_out_open_ondemand_upstream),
so the role writes Apache's site with update_ood_portal as with the package; only the per-user
nginx and the Rails dashboard (the PUN) are absent."""

import importlib.util
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from types import ModuleType
from urllib.parse import urljoin

import chromium
import pytest
import requests
import rfb
import urllib3
import yaml
from conftest import ROOT, VENV, console_script, run_events
from lab_tools import (
    check_homes_are_their_users_alone,
    deploy_lab,
    lab_gateway,
    lab_operation,
    lay_out_open_ondemand_upstream,
    on_host,
    plant_links_on_the_mount,
    platform_env,
    remove_planted_links,
    teardown_paths,
    upload,
)

from driver.lab import lab
from driver.lab import requests as lab_requests
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
PROVIDER = ROOT / "molecule" / "open_ondemand" / "oidc_provider.py"
LOGIN_CHECK = ROOT / "molecule" / "open_ondemand" / "login_check.py"


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the same login, in this process, for a browser that goes on to a websocket and Chromium
login_check = _module(LOGIN_CHECK)
AUDIT_NOTICE = (
    "Actions taken in the HPC Portal are managed by Slurm, not tracked in platform audit logs."
)
USER = lab_spec.LAB_USER["name"]
HERE = Path(__file__).parent
E2E_TOOLS = "/opt/slurm-app-e2e"
HOME = f"{lab_spec.LAB_MOUNT}/home/{USER}"


def _address(host: str) -> str:
    allocations = json.loads((lab_spec.lab_dir(SPEC.name) / "allocations.json").read_text())
    return next(a["address"] for a in allocations if a["hostname"] == host)


def _redirect_uri() -> str:
    return f"https://{_address(PORTAL)}/oidc"


def _upload_ood_tools(host: str, upstream: Path) -> None:
    """OOD's job library and this folder's scripts that drive it as the dashboard would."""
    upload(
        SPEC.name,
        host,
        {
            "shims": upstream / "shims",
            "ood_core": upstream / "ood_core-v0.31.1",
            "ood_support": upstream / "ood_support-v0.0.5",
            **{
                name: HERE / name
                for name in ("ood_core_jobs.rb", "ood_session.rb", "ood_job_status.rb")
            },
        },
        E2E_TOOLS,
    )


@pytest.fixture(scope="module")
def portal(docker_engine, open_ondemand_upstream, tmp_path_factory):
    state = tmp_path_factory.mktemp("driver-state")
    env = platform_env(state)
    deploy_lab(SPEC, env, CLUSTER_CONFIG)
    lab.add_host(SPEC.name, PORTAL)
    lay_out_open_ondemand_upstream(SPEC.name, PORTAL, open_ondemand_upstream)
    _upload_ood_tools(PORTAL, open_ondemand_upstream)
    provider = tmp_path_factory.mktemp("oidc")
    gateway = lab_gateway(SPEC.name)
    subprocess.run(
        [sys.executable, PROVIDER, "start", gateway, "9444", provider, _redirect_uri()],
        check=True,
        timeout=120,
    )
    client_secret = (provider / "client_secret").read_text()
    # the customer's trust store knows the provider's CA (a real IdP has a public one)
    ca = (provider / "ca.crt").read_text()
    for host in (PORTAL, CONTROLLER):
        on_host(
            SPEC.name,
            host,
            f"cat > /usr/local/share/ca-certificates/lab-oidc.crt <<'EOF'\n{ca}EOF\n"
            "update-ca-certificates >/dev/null",
        )
    config = {
        "portal_title": "Lab Portal",
        "interactive_apps": ["jupyter", "desktop", "vscode"],
        "oidc": {
            "issuer_url": (provider / "issuer").read_text(),
            "client_id": (provider / "client_id").read_text(),
            "client_secret_ref": "ood-oidc",
            "allowed_groups": ["lab-project"],
        },
    }

    def request(host: str, kind: str, change=None) -> Path:
        """The portal's request, its secret in the portal instance's own credentials folder
        (the secret as a bare name); `change` edits it as a hostile platform call would."""
        secrets = lab_requests.portal_credentials_dir(SPEC.name, host) / "secrets"
        secrets.mkdir(parents=True, exist_ok=True, mode=0o700)
        (secrets / "ood-oidc").touch(mode=0o600)
        (secrets / "ood-oidc").write_text(client_secret)
        path = lab_requests.portal_request(SPEC.name, host, kind, config, secrets)
        if change is not None:
            data = json.loads(path.read_text())
            change(data)
            path.write_text(json.dumps(data))
        return path

    def operation(host: str, kind: str, change=None) -> tuple[int, dict, str]:
        path = request(host, kind, change)
        ran = console_script("run", str(path), env=env, timeout=1200)
        lines = run_events(ran.stdout)
        result = lines[-1]["result"]
        # the times the README reports (seen with pytest -s)
        print(f"{kind} on {host}: {result.get('duration_s')} s, {result.get('changed')} changes")
        return ran.returncode, result, ran.stdout + ran.stderr

    deployed = operation(PORTAL, "deploy")
    yield {
        "operation": operation,
        "request": request,
        "env": env,
        "deployed": deployed,
        "provider": provider,
        "secret": client_secret,
        "upstream": open_ondemand_upstream,
    }
    subprocess.run([sys.executable, str(PROVIDER), "stop", str(provider)], check=False)
    lab.down(SPEC.name)


def _portal(command: str) -> str:
    return on_host(SPEC.name, PORTAL, command)


def _controller(command: str) -> str:
    return on_host(SPEC.name, CONTROLLER, command)


def _passphrase() -> str:
    return _portal("cat /etc/ood/config/slurm-app/oidc_crypto_passphrase").strip()


def test_companion_deploy_reports_the_portal_and_the_audit_notice(portal):
    code, result, output = portal["deployed"]
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
    for secret in (portal["secret"], _passphrase()):
        assert secret not in output
        assert secret not in json.dumps(result)


def test_an_unchanged_redeploy_skips_the_converge_and_a_hand_edit_is_repaired(portal):
    """The same request again, on a portal as the last deploy left it: nothing converges, the
    Slurm client is proven again. A hand edit of what the role manages makes the next deploy
    converge and put it back."""
    started = time.monotonic()
    code, result, output = portal["operation"](PORTAL, "deploy")
    elapsed = time.monotonic() - started
    assert code == 0, output[-4000:]
    assert result["changed"] == 0, result
    state = result["adapter_detail"]["portal"]
    assert state["converge_skipped"] is True and state["slurm_client_answers"] is True
    print(f"unchanged portal re-run: {elapsed:.1f} s")
    cluster_file = f"/etc/ood/config/clusters.d/{SPEC.name}.yml"
    before = _portal(f"cat {cluster_file}")
    _portal(f"echo '# hand edit' >> {cluster_file}")
    code, result, output = portal["operation"](PORTAL, "deploy")
    assert code == 0, output[-4000:]
    assert result["adapter_detail"]["portal"]["converge_skipped"] is False
    assert result["changed"] > 0 and _portal(f"cat {cluster_file}") == before


def _by_hand(
    portal: dict, tmp_path: Path, kind: str, playbook: str, *args: str
) -> subprocess.CompletedProcess:
    """ansible-playbook as an operator runs it, on the inventory the driver prints for the
    portal's `kind` request."""
    listed = console_script("inventory", str(portal["request"](PORTAL, kind)), env=portal["env"])
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
    for secret in (portal["secret"], _passphrase()):
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


def _ood_ruby(script: str, *args: str, host: str = PORTAL) -> dict:
    """One of this folder's Ruby scripts, run by Debian's ruby with OOD's job library as the
    cluster user in the home on the portal's host (the dashboard's process); its JSON output."""
    libraries = " ".join(
        f"-I {E2E_TOOLS}/{lib}" for lib in ("shims", "ood_core/lib", "ood_support/lib")
    )
    return json.loads(
        on_host(
            SPEC.name,
            host,
            f"cd {HOME} && runuser -u {USER} -- ruby {libraries} {E2E_TOOLS}/{script} "
            + " ".join(args),
        ).splitlines()[-1]
    )


def test_ood_core_submits_lists_and_deletes_the_users_jobs_from_the_portal(portal):
    """Open OnDemand's own job library, as the dashboard uses it, as the cluster user on the
    companion portal with the rendered clusters.d: it finds the cluster, a job it submits is
    listed by info_all, and deleted. No `-M`: accounting is only on the controller."""
    seen = _ood_ruby("ood_core_jobs.rb", "/etc/ood/config/clusters.d", HOME)
    assert seen["clusters"] == [SPEC.name]
    assert seen["long"] in seen["listed"]
    assert seen["deleted"] == "completed"


LOOPBACK_PORT = 8765
SESSION_DIR = f"{HOME}/ondemand/data/sys/dashboard/batch_connect/sys/jupyter/output/e2e-session"


def test_a_jupyter_session_runs_on_the_node_and_the_user_reaches_it_through_the_portal(portal):
    """The whole interactive path against upstream's code: the app's templates rendered and
    wrapped by ood_core, submitted by its Slurm adapter; Debian's Jupyter Notebook (the
    cluster's interactive_runtimes) starts on the node and after.sh holds connection.yml back
    until it listens; Apache's site as upstream's generator writes it, mod_ood_proxy's Lua
    mapping the login through the bundle's account check and proxying /node/<address>/<port>/
    to Jupyter, whose login takes the view's password. A stranger is sent to the no-account
    page, a user of another project's group gets 401, and neither the portal's own 127.0.0.1
    (a server listens there) nor a host outside the cluster is reachable through the proxy."""
    site = _portal("cat /etc/apache2/sites-available/ood-portal.conf")
    assert "Generated using ood-portal-generator" in site
    assert 'LuaRoot "/opt/ood/mod_ood_proxy/lib"' in site
    _portal(
        f"(setsid runuser -u www-data -- python3 -m http.server --bind 127.0.0.1 {LOOPBACK_PORT} "
        "--directory /tmp >/dev/null 2>&1 &) && sleep 1"
    )
    # the app launched as the dashboard launches it: form values as the browser posts them
    session = _ood_ruby(
        "ood_session.rb",
        "/etc/ood/config/clusters.d",
        "/var/www/ood/apps/sys/jupyter",
        SESSION_DIR,
        "bc_num_slots=1",
        "gpus=0",
    )
    try:
        connection = session["connection"]
        assert connection is not None, (
            session,
            _portal(f"cat {SESSION_DIR}/output.log"),
        )
        host, port, password = connection["host"], connection["port"], str(connection["password"])
        xsrf = str(connection["xsrf_token"])
        # the node's address as Slurm knows it, where the portal's /node/ proxy goes; the
        # file written on the node, read on the portal: the home on the platform's storage
        assert host == _address(CONTROLLER)
        assert len(password) == 16
        assert "port: " in _controller(f"cat {SESSION_DIR}/connection.yml")
        print(f"session start to connection.yml: {session['seconds_to_connection']} s")
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
                portal["provider"],
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


DESKTOP_DIR = f"{HOME}/ondemand/data/sys/dashboard/batch_connect/sys/desktop/output/e2e-desktop"
# what a teardown leaves on the platform's storage: the folder of the user's portal sessions
# (issue 51), then the homes (the session user's counting the rest of it)
KEPT = [
    f"{HOME}/ondemand/data/sys/dashboard/batch_connect",
    f"{lab_spec.LAB_MOUNT}/home/{PEER}",
    HOME,
]
NOVNC_CONNECTED = 'document.documentElement.classList.contains("noVNC_connected")'


def _signed_in(portal: dict, account: str, page: str) -> requests.Session:
    """A browser signed in to the portal as `account` through mod_auth_openidc and the
    provider, that has opened `page` (200). The portal's certificate is self-signed."""
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    browser, back = login_check.login(
        _address(PORTAL), str(portal["provider"] / "ca.crt"), f"sub-{account}", page
    )
    assert back.status_code == 302, (back.status_code, back.text[:500])
    shown = browser.get(
        urljoin(f"https://{_address(PORTAL)}/", back.headers["Location"]), verify=False, timeout=30
    )
    assert shown.status_code == 200, (shown.status_code, shown.text[:500])
    return browser


def _session_cookie(browser: requests.Session) -> str:
    return f"{login_check.SESSION_COOKIE}={browser.cookies[login_check.SESSION_COOKIE]}"


def _connection(session_dir: str) -> dict:
    return yaml.safe_load(_controller(f"cat {session_dir}/connection.yml"))


def test_a_desktop_session_is_drawn_through_the_portal_with_its_gpu(portal):
    """Issue 51: the desktop app launched as the dashboard launches it (ood_core's vnc
    template, the vis partition the form's queue field lists, one of the node's GPUs): Xfce on
    TigerVNC's Xvnc, on loopback, behind websockify; the session's noVNC page and its websocket
    through the portal's /rnode/ proxy (mod_ood_proxy's Lua, websocket upgrade); VNC's
    password per session and one-time; another portal user reaches the VNC server but not the
    desktop; Chromium draws the desktop through noVNC (kept in test-artifacts/); the Jobs tab
    lists the session with its GPU, and shows it ended once cancelled."""
    session = _ood_ruby(
        "ood_session.rb",
        "/etc/ood/config/clusters.d",
        "/var/www/ood/apps/sys/desktop",
        DESKTOP_DIR,
        "bc_num_slots=1",
        "gpus=1",
        "bc_queue=vis",
    )
    job = session["job"]
    try:
        connection = session["connection"]
        assert connection is not None, (session, _controller(f"cat {DESKTOP_DIR}/output.log"))
        print(f"desktop: submit to connection.yml {session['seconds_to_connection']} s")
        host, websocket_port = connection["host"], connection["websocket"]
        password, display = str(connection["password"]), int(connection["display"])
        assert host == _address(CONTROLLER) and len(password) == 8
        assert connection["port"] == 5900 + display
        # the form's queue field lists the cluster's partitions; the session runs in vis
        assert sorted(session["queues"]) == ["batch", "vis"]
        # the display on loopback only; websockify, its one way in, on the session's port
        listening = _controller("ss -Hltn").split()
        assert {a for a in listening if a.endswith(f":{5900 + display}")} <= {
            f"127.0.0.1:{5900 + display}",
            f"[::1]:{5900 + display}",
        }
        assert any(a.endswith(f":{websocket_port}") for a in listening)
        # the password reached Xvnc through files, never a command line
        assert password not in _controller("ps -eo args")
        # Slurm's own view: the GPU is the session's, its index in CUDA_VISIBLE_DEVICES, and
        # the GPU job mapping (dcgm-exporter's hpc_job label) names the job
        desktop_pid = _controller(f"pgrep -u {USER} -n xfce4-session").strip()
        environment = _controller(f"tr '\\0' '\\n' < /proc/{desktop_pid}/environ")
        gpu = re.search(r"^CUDA_VISIBLE_DEVICES=(\d+)$", environment, re.M).group(1)
        assert f"SLURM_JOB_ID={job}" in environment.splitlines()
        assert _controller(f"cat /run/slurm-app/gpu-jobs/{gpu}").split() == [job]
        jobs_tab = _ood_ruby("ood_job_status.rb", "/etc/ood/config/clusters.d", job)
        assert jobs_tab["status"] == "running" and jobs_tab["listed"], jobs_tab
        assert jobs_tab["queue"] == "vis" and jobs_tab["gpus"] == 1, jobs_tab

        page = f"/rnode/{host}/{websocket_port}/vnc.html"
        websocket_url = f"wss://{_address(PORTAL)}/rnode/{host}/{websocket_port}/websockify"
        owner = _signed_in(portal, USER, page)
        # another user of the portal reaches the session's VNC server (OOD's proxy lets any
        # signed-in user through), which asks for the password and refuses theirs
        peer = _signed_in(portal, PEER, page)
        for guess in ("", "guessed1"):
            refused = rfb.view(websocket_url, guess, cookie=_session_cookie(peer))
            assert refused.banner.startswith("RFB 003.") and refused.security_types == [2]
            assert not refused.authenticated
        started = time.monotonic()
        seen = rfb.view(websocket_url, password, cookie=_session_cookie(owner))
        assert seen.authenticated and (seen.width, seen.height) == (1280, 800), seen
        # Xfce's panel and desktop, not an empty screen
        assert seen.colours > 50, seen
        print(f"desktop: websocket login and first frame {time.monotonic() - started:.1f} s")
        # OOD's one-time password: after a login the template sets a new one and rewrites
        # connection.yml, and the used one no longer opens the desktop
        deadline = time.monotonic() + 20
        while str(_connection(DESKTOP_DIR)["password"]) == password:
            assert time.monotonic() < deadline, "the VNC password was not changed after a login"
            time.sleep(0.5)
        password = str(_connection(DESKTOP_DIR)["password"])
        assert not rfb.view(websocket_url, "", cookie=_session_cookie(owner)).authenticated
        shot, seconds = chromium.screenshot(
            f"https://{_address(PORTAL)}",
            {login_check.SESSION_COOKIE: owner.cookies[login_check.SESSION_COOKIE]},
            f"{page}?autoconnect=true&resize=remote&password={password}"
            f"&path=rnode/{host}/{websocket_port}/websockify",
            NOVNC_CONNECTED,
            "desktop-novnc-trixie.png",
        )
        print(f"desktop: noVNC connected in Chromium {seconds:.1f} s, screenshot {shot}")
        assert shot.stat().st_size > 20_000
    finally:
        _controller(f"scancel {job}")
    # the session card shows it ended
    deadline = time.monotonic() + 60
    while (
        _ood_ruby("ood_job_status.rb", "/etc/ood/config/clusters.d", job)["status"] != "completed"
    ):
        assert time.monotonic() < deadline, "the cancelled session is not shown ended"
        time.sleep(1)


VSCODE_DIR = f"{HOME}/ondemand/data/sys/dashboard/batch_connect/sys/vscode/output/e2e-vscode"
# the editor's explorer lists the home's files: read through code-server's websocket
WORKBENCH_DRAWN = (
    'document.querySelector(".monaco-workbench .part.sidebar .monaco-list-row") !== null'
)


def test_a_vscode_session_runs_on_the_node_and_the_user_reaches_it_through_the_portal(portal):
    """Issue 51: the vscode app launched as the dashboard launches it (ood_core's basic
    template): code-server, built on the node from npm's registry (the cluster's vscode
    runtime), starts on the node's address and a free port with the session's password in its
    environment; through the portal's /rnode/ proxy another portal user gets its login page
    and is refused with a guessed password; the owner's login (the view's form) opens the
    editor, and Chromium draws it with the home's files listed (kept in test-artifacts/)."""
    session = _ood_ruby(
        "ood_session.rb",
        "/etc/ood/config/clusters.d",
        "/var/www/ood/apps/sys/vscode",
        VSCODE_DIR,
        "bc_num_slots=1",
        "gpus=0",
    )
    job = session["job"]
    try:
        connection = session["connection"]
        assert connection is not None, (session, _controller(f"cat {VSCODE_DIR}/output.log"))
        print(f"vscode: submit to connection.yml {session['seconds_to_connection']} s")
        host, port, password = connection["host"], connection["port"], str(connection["password"])
        assert host == _address(CONTROLLER) and len(password) == 16
        assert password not in _controller("ps -eo args")
        action = re.search(r'<form action="([^"]+)"', session["view"]).group(1)
        assert action == f"/rnode/{host}/{port}/login"
        assert f'name="password" value="{password}"' in session["view"]
        origin = f"https://{_address(PORTAL)}"
        # another portal user reaches code-server's login, never the editor
        peer = _signed_in(portal, PEER, action)
        editor = peer.get(f"{origin}/rnode/{host}/{port}/", verify=False, timeout=30)
        assert "code-server-session" not in peer.cookies and "login" in editor.url, editor.url
        guessed = peer.post(
            f"{origin}{action}", data={"password": "guessed-password"}, verify=False, timeout=30
        )
        assert "code-server-session" not in peer.cookies, guessed.status_code
        started = time.monotonic()
        owner = _signed_in(portal, USER, action)
        opened = owner.post(
            f"{origin}{action}", data={"password": password}, verify=False, timeout=30
        )
        assert opened.status_code == 200 and "code-server-session" in owner.cookies, opened.url
        assert "workbench" in opened.text.lower(), opened.text[:500]
        logged_in = time.monotonic() - started
        shot, seconds = chromium.screenshot(
            origin,
            {
                name: owner.cookies[name]
                for name in (login_check.SESSION_COOKIE, "code-server-session")
            },
            f"/rnode/{host}/{port}/",
            WORKBENCH_DRAWN,
            "vscode-trixie.png",
            settle_seconds=4.0,
            timeout=120.0,
        )
        print(
            f"vscode: portal and editor login {logged_in:.1f} s, editor drawn with the home's "
            f"files in Chromium {seconds:.1f} s, screenshot {shot}"
        )
        assert shot.stat().st_size > 20_000
    finally:
        _controller(f"scancel {job}")


def test_status_names_a_stopped_sackd_and_restart_brings_it_back(portal):
    code, result, _ = portal["operation"](PORTAL, "status")
    assert code == 0 and result["changed"] == 0, result
    assert result["instance"]["health"] == "healthy", result["adapter_detail"]["health"]
    assert result["adapter_detail"]["hosts_touched"] == [PORTAL]
    _portal("systemctl stop sackd")
    code, result, _ = portal["operation"](PORTAL, "status")
    assert code == 0 and result["instance"]["status"] == "degraded", result
    assert f"{PORTAL}: sackd is stopped" in result["adapter_detail"]["health"]["problems"]
    before = _portal("systemctl show -p ActiveEnterTimestampMonotonic --value apache2")
    code, result, _ = portal["operation"](PORTAL, "restart")
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
        code, result, _ = portal["operation"](
            PORTAL, "upgrade", lambda r: _at_release_1_0(r, to_1_1)
        )
    finally:
        _portal("systemctl start apache2")
    assert code == 1 and result["error"]["code"] == "upgrade_unhealthy", result["error"]
    assert f"{PORTAL} apache2 inactive" in result["error"]["message"]
    assert result["changed"] == 0 and _portal(kept) == ""
    code, result, output = portal["operation"](
        PORTAL, "upgrade", lambda r: _at_release_1_0(r, to_1_1)
    )
    assert code == 0, output[-4000:]
    upgrade = result["adapter_detail"]["upgrade"]
    assert (upgrade["from"]["app_version"], upgrade["to"]["app_version"]) == ("4.2", "1.1.0")
    assert result["adapter_detail"]["releases"][PORTAL]["app_version"] == "1.1.0"
    assert result["hosts"][CONTROLLER]["changed"] == 0
    assert json.loads(_portal(f"cat {record}"))["app_slug"] == "open-ondemand"
    assert _portal(kept).split() == ["open-ondemand-4.2.tar.gz"]
    code, result, output = portal["operation"](
        PORTAL, "rollback", lambda r: r["operation"].update(options={"to_version": "4.2"})
    )
    assert code == 0, output[-4000:]
    assert result["adapter_detail"]["rollback"]["to"]["app_version"] == "4.2"
    assert result["adapter_detail"]["hosts_touched"] == [PORTAL]
    assert _portal(f"ls {record} 2>/dev/null; true") == "" and _portal(kept) == ""
    assert _portal("systemctl is-active apache2").strip() == "active"
    assert _controller(CLUSTER_FILES) == cluster
    # the portal as a deploy of this release leaves it again
    code, result, output = portal["operation"](PORTAL, "deploy")
    assert code == 0 and result["adapter_detail"]["releases"][PORTAL]["app_version"] == "1.1.0"


def test_a_portal_host_without_the_platform_mount_is_refused_before_anything_changes(portal):
    host = f"{SPEC.name}-nomount"
    lab.add_host(SPEC.name, host, storage=False)
    before = _controller(CLUSTER_STATE)
    code, result, output = portal["operation"](host, "deploy")
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
    before = plant_links_on_the_mount(SPEC.name, portal["env"])
    remove_planted_links(SPEC.name, before)
    check_homes_are_their_users_alone(SPEC.name, [CONTROLLER], HOME)


def test_a_cohosted_portal_comes_and_goes_leaving_the_cluster_as_it_was(portal):
    conf = "sha256sum /etc/slurm/slurm.conf /etc/munge/munge.key"
    before = _controller(conf)
    code, result, output = portal["operation"](CONTROLLER, "deploy")
    assert code == 0, output[-4000:]
    assert result["adapter_detail"]["portal"]["services"] == {"apache2": "running"}
    assert result["adapter_detail"]["portal"]["slurm_client_answers"] is True
    # OOD's job library on the co-hosted portal, as its dashboard would run it
    _controller(
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
        "ruby ruby-ffi ruby-rexml >/dev/null"
    )
    _upload_ood_tools(CONTROLLER, portal["upstream"])
    seen = _ood_ruby("ood_core_jobs.rb", "/etc/ood/config/clusters.d", HOME, host=CONTROLLER)
    assert seen["clusters"] == [SPEC.name] and seen["long"] in seen["listed"], seen
    assert seen["deleted"] == "completed"
    code, result, output = portal["operation"](CONTROLLER, "decommission")
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
    code, result, output = portal["operation"](CONTROLLER, "decommission", hide_the_controller)
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
    code, result, output = portal["operation"](PORTAL, "decommission")
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
    code, preview = lab_operation(SPEC.name, portal["env"], "decommission", preview=True)
    assert code == 0 and preview["changed"] == 0, preview
    code, result = lab_operation(SPEC.name, portal["env"], "decommission")
    assert code == 0, result
    kept = result["adapter_detail"]["kept"]
    assert kept == preview["adapter_detail"]["would_keep"]
    assert [e["path"] for e in kept[CONTROLLER]] == KEPT
    assert teardown_paths(result["adapter_detail"]["destroyed"]) == teardown_paths(
        preview["adapter_detail"]["would_destroy"]
    )
    assert _controller(f"ls {HOME}").strip()
