"""A companion Open OnDemand portal on a lab, and an interactive session launched through it
as the dashboard launches one: shared by test_open_ondemand (Debian 13, Slurm 24.11) and
test_slurm_22_05 (Debian 12). Open OnDemand's package cannot be installed here: upstream's
own portal generator and mod_ood_proxy are laid out where the package puts them
(lab_tools.lay_out_open_ondemand_upstream); a local OIDC provider
(molecule/open_ondemand/oidc_provider.py: oidc-provider-mock over TLS) runs on the lab
network's gateway; OOD's job library (ood_core) and this folder's Ruby scripts drive the
sessions as the dashboard's process would."""

import importlib.util
import json
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from urllib.parse import urljoin

import chromium
import requests
import rfb
import urllib3
import websocket
import yaml
from conftest import ROOT, console_script, run_events
from lab_tools import lab_gateway, lab_task, lay_out_open_ondemand_upstream, on_host, upload

from driver.lab import lab
from driver.lab import requests as lab_requests
from driver.lab import spec as lab_spec

PROVIDER = ROOT / "molecule" / "open_ondemand" / "oidc_provider.py"
LOGIN_CHECK = ROOT / "molecule" / "open_ondemand" / "login_check.py"
USER = lab_spec.LAB_USER["name"]


def home(user: str) -> str:
    """A cluster user's home on the lab's platform mount."""
    return f"{lab_spec.LAB_MOUNT}/home/{user}"


def sessions(user: str) -> str:
    """Where the dashboard keeps a user's interactive sessions' folders."""
    return f"{home(user)}/ondemand/data/sys/dashboard/batch_connect"


HOME = home(USER)
SESSIONS = sessions(USER)
CLUSTERS_D = "/etc/ood/config/clusters.d"
HERE = Path(__file__).parent
E2E_TOOLS = "/opt/slurm-app-e2e"
NOVNC_CONNECTED = 'document.documentElement.classList.contains("noVNC_connected")'


def _module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the same login, in this process, for a browser that goes on to a websocket and Chromium
login_check = _module(LOGIN_CHECK)


def address(lab_name: str, host: str) -> str:
    allocations = json.loads((lab_spec.lab_dir(lab_name) / "allocations.json").read_text())
    return next(a["address"] for a in allocations if a["hostname"] == host)


def host_at(lab_name: str, host_address: str) -> str:
    """The lab host Slurm knows by `host_address` (a session's connection.yml names it so)."""
    allocations = json.loads((lab_spec.lab_dir(lab_name) / "allocations.json").read_text())
    return next(a["hostname"] for a in allocations if a["address"] == host_address)


@dataclass
class Portal:
    """A companion portal's lab host, the OIDC provider it trusts, and the platform's calls
    for it (the driver by its full path, the platform's environment)."""

    lab: str
    host: str
    env: dict[str, str]
    upstream: Path
    provider: Path
    config: dict
    secret: str = field(repr=False)
    # the first deploy's (exit code, result, output), once the caller has deployed
    deployed: tuple[int, dict, str] | None = None

    @property
    def origin(self) -> str:
        return f"https://{address(self.lab, self.host)}"

    def on(self, command: str) -> str:
        return on_host(self.lab, self.host, command)

    def request(self, host: str, kind: str, change: Callable[[dict], None] | None = None) -> Path:
        """The portal's request, its secret in the portal instance's own credentials folder
        (the secret as a bare name); `change` edits it as a hostile platform call would."""
        secrets = lab_requests.portal_credentials_dir(self.lab, host) / "secrets"
        secrets.mkdir(parents=True, exist_ok=True, mode=0o700)
        (secrets / "ood-oidc").touch(mode=0o600)
        (secrets / "ood-oidc").write_text(self.secret)
        path = lab_requests.portal_request(self.lab, host, kind, self.config, secrets)
        if change is not None:
            data = json.loads(path.read_text())
            change(data)
            path.write_text(json.dumps(data))
        return path

    def operation(
        self, host: str, kind: str, change: Callable[[dict], None] | None = None
    ) -> tuple[int, dict, str]:
        request = self.request(host, kind, change)
        ran = console_script("run", str(request), env=self.env, timeout=1200)
        result = run_events(ran.stdout)[-1]["result"]
        lab_requests.record_portal(self.lab, host, request, result)
        # the times the README reports
        chromium.keep_timing(
            f"{kind} on {host} ({result.get('changed')} changes)", result.get("duration_s")
        )
        return ran.returncode, result, ran.stdout + ran.stderr

    def ruby(self, script: str, *args: str, host: str | None = None, user: str = USER) -> dict:
        """One of this folder's Ruby scripts, run by Debian's ruby with OOD's job library as
        the cluster user `user` in their home on the portal's host, or on `host`
        (upload_session_tools put them there): the dashboard's process; its JSON output."""
        libraries = " ".join(
            f"-I {E2E_TOOLS}/{lib}" for lib in ("shims", "ood_core/lib", "ood_support/lib")
        )
        ran = on_host(
            self.lab,
            host or self.host,
            f"cd {home(user)} && runuser -u {user} -- ruby {libraries} {E2E_TOOLS}/{script} "
            + " ".join(args),
        )
        return json.loads(ran.splitlines()[-1])

    def signed_in(self, account: str, page: str) -> requests.Session:
        """A browser signed in to the portal as `account` through mod_auth_openidc and the
        provider, that has opened `page` (200). The portal's certificate is self-signed."""
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
        browser, back = login_check.login(
            address(self.lab, self.host), str(self.provider / "ca.crt"), f"sub-{account}", page
        )
        assert back.status_code == 302, (back.status_code, back.text[:500])
        shown = browser.get(
            urljoin(f"{self.origin}/", back.headers["Location"]), verify=False, timeout=30
        )
        assert shown.status_code == 200, (shown.status_code, shown.text[:500])
        return browser

    def stop(self) -> None:
        subprocess.run([sys.executable, str(PROVIDER), "stop", str(self.provider)], check=False)


def upload_session_tools(lab_name: str, host: str, upstream: Path) -> None:
    """OOD's job library and this folder's scripts that drive it as the dashboard would."""
    upload(
        lab_name,
        host,
        {
            "shims": upstream / "shims",
            "ood_core": upstream / "ood_core-v0.31.1",
            "ood_support": upstream / "ood_support-v0.0.5",
            **{
                name: HERE / name
                for name in (
                    "ood_core_jobs.rb",
                    "ood_session.rb",
                    "ood_job_status.rb",
                    "ood_session_card.rb",
                )
            },
        },
        E2E_TOOLS,
    )


def companion_portal(
    lab_name: str,
    host: str,
    env: dict[str, str],
    upstream: Path,
    provider: Path,
    apps: list[str],
    trusting: list[str],
) -> Portal:
    """Lab host `host` added to the lab, with OOD's code where its package puts it and the
    session tools; the OIDC provider started on the gateway, its CA in the trust store of
    `host` and of `trusting` (a real IdP has a public one). Nothing is deployed yet."""
    lab.add_host(lab_name, host)
    lay_out_open_ondemand_upstream(lab_name, host, upstream)
    upload_session_tools(lab_name, host, upstream)
    redirect_uri = f"https://{address(lab_name, host)}/oidc"
    subprocess.run(
        [sys.executable, PROVIDER, "start", lab_gateway(lab_name), "9444", provider, redirect_uri],
        check=True,
        timeout=120,
    )
    ca = (provider / "ca.crt").read_text()
    for trusted in (host, *trusting):
        on_host(
            lab_name,
            trusted,
            f"cat > /usr/local/share/ca-certificates/lab-oidc.crt <<'EOF'\n{ca}EOF\n"
            "update-ca-certificates >/dev/null",
        )
    config = {
        "portal_title": "Lab Portal",
        "interactive_apps": apps,
        "oidc": {
            "issuer_url": (provider / "issuer").read_text(),
            "client_id": (provider / "client_id").read_text(),
            "client_secret_ref": "ood-oidc",
            "allowed_groups": ["lab-project"],
        },
    }
    secret = (provider / "client_secret").read_text()
    return Portal(lab_name, host, env, upstream, provider, config, secret)


def check_followed(portal: Portal, result: dict, controller: str) -> str:
    """A replace_controller's result says the portal followed its cluster to `controller`, and
    the portal's clusters.d names it as the login host; returns its address."""
    assert result["adapter_detail"]["portals"] == [
        {
            "instance_id": lab_requests.portal_instance_id(portal.lab, portal.host),
            "host": portal.host,
            "followed": True,
            "reason": None,
        }
    ]
    new_address = address(portal.lab, controller)
    clusters = yaml.safe_load(portal.on(f"cat {CLUSTERS_D}/{portal.lab}.yml"))
    assert clusters["v2"]["login"]["host"] == new_address
    return new_address


def session_cookie(browser: requests.Session) -> str:
    return f"{login_check.SESSION_COOKIE}={browser.cookies[login_check.SESSION_COOKIE]}"


def websocket_status(url: str, cookie: str) -> int:
    """The HTTP status a websocket handshake to `url` gets with `cookie`: 101 when it opens."""
    try:
        websocket.create_connection(
            url, cookie=cookie, sslopt={"cert_reqs": ssl.CERT_NONE}, timeout=30
        ).close()
    except websocket.WebSocketBadStatusException as refused:
        return refused.status_code
    return 101


def connection(portal: Portal, session_dir: str) -> dict:
    """The session's connection.yml, written on the node, read on the portal's host: the
    home is on the platform's storage."""
    return yaml.safe_load(portal.on(f"cat {session_dir}/connection.yml"))


def launch_session(
    portal: Portal, app: str, session_dir: str, *form: str, user: str = USER
) -> dict:
    """The app launched as the dashboard launches it for `user`, with the form's values as the
    browser posts them (ood_session.rb): the job is running and connection.yml written."""
    session = portal.ruby(
        "ood_session.rb", CLUSTERS_D, f"/var/www/ood/apps/sys/{app}", session_dir, *form, user=user
    )
    assert "refused" not in session, session
    # websockify's own log says why it did not start (OOD's script prints only "failed to
    # launch"); a desktop app writes it beside output.log
    assert session["connection"] is not None, (
        session,
        portal.on(f"cat {session_dir}/output.log"),
        portal.on(f"cat {session_dir}/websockify.log 2>/dev/null || true"),
    )
    chromium.keep_timing(
        f"{app} on {portal.lab}: submit to connection.yml", session["seconds_to_connection"]
    )
    return session


def refused_launch(portal: Portal, app: str, *form: str, user: str = USER) -> dict:
    """The app's launch with the form's values refused by its submit.yml.erb, as the dashboard
    shows it: {form: the form as drawn, refused: the message}; nothing was submitted."""
    seen = portal.ruby(
        "ood_session.rb",
        CLUSTERS_D,
        f"/var/www/ood/apps/sys/{app}",
        "/nonexistent",
        *form,
        user=user,
    )
    assert "job" not in seen and seen.get("refused"), seen
    return seen


def _ended(portal: Portal, job: str) -> None:
    """The session card shows the session ended: ood_core reads it `completed`."""
    deadline = time.monotonic() + 60
    while portal.ruby("ood_job_status.rb", CLUSTERS_D, job)["status"] != "completed":
        assert time.monotonic() < deadline, f"the ended session {job} is not shown ended"
        time.sleep(1)


def session_journal(portal: Portal, node: str, job: str) -> dict[str, dict[str, str]]:
    """Issue 72 (3): the node's journal entries of the session `job` (its Prolog's and its
    Epilog's, slurm_common's slurm-app-gpu-job-map), by event, once both are there: each
    entry's SLURM_APP_* fields and its message."""
    deadline = time.monotonic() + 60
    while True:
        lines = on_host(
            portal.lab,
            node,
            f"journalctl -q SYSLOG_IDENTIFIER=slurm-app SLURM_APP_JOB_ID={job} -o json",
        ).splitlines()
        entries = [json.loads(line) for line in lines if line.strip()]
        found = {
            entry["SLURM_APP_EVENT"]: {
                key: value
                for key, value in entry.items()
                if key.startswith("SLURM_APP_") or key == "MESSAGE"
            }
            for entry in entries
        }
        if {"session_start", "session_end"} <= found.keys():
            return found
        assert time.monotonic() < deadline, f"the session {job} is not journaled: {found}"
        time.sleep(1)


@contextmanager
def desktop_session(
    portal: Portal, session_dir: str, peer: str, screenshot: str, *form: str
) -> Iterator[dict]:
    """Issue 51: the desktop app launched through the portal (ood_core's vnc template): Xfce
    on TigerVNC's Xvnc on the node's loopback, websockify its one way in, the password never
    on a command line; the Jobs tab (ood_core's info and the user's info_all, and the typed
    task `queue`) lists the session running in its partition with its GPUs, which are the
    job's own (CUDA_VISIBLE_DEVICES, the GPU job mapping); the noVNC page and its websocket
    through the portal's /rnode/ proxy (mod_ood_proxy's Lua, websocket upgrade); `peer`, also
    signed in, reaches the VNC server but not the desktop, and after 20 wrong passwords of
    theirs the owner's login gets in at once (issue 65); the owner's login draws a frame and
    the password is then rotated; Chromium draws the desktop through noVNC (kept in
    test-artifacts/ as `screenshot`). Yields {job, node, connection, queues: the partitions
    the form's queue field lists} while the session runs, then cancels it and waits until
    the session card would show it ended. Before it starts, `peer` has made every display's
    lock file and socket path on the nodes (issue 65): the desktop starts all the same."""
    values = dict(pair.split("=", 1) for pair in form)
    gpus = int(values.get("gpus", "0"))
    # issue 65: `peer` takes every display the bundle's vncserver would try, as files of theirs
    # on each node (a lock naming a live process, and the socket's path)
    nodes = json.loads((lab_spec.lab_dir(portal.lab) / "allocations.json").read_text())
    planted = "/tmp/.X{1..99}-lock /tmp/.X11-unix/X{1..99}"
    for node_host in (a["hostname"] for a in nodes if a["hostname"] != portal.host):
        on_host(
            portal.lab,
            node_host,
            f"id -u {peer} >/dev/null 2>&1 || exit 0; install -d -m 1777 /tmp/.X11-unix && "
            f"runuser -u {peer} -- bash -c "
            '\'for n in {1..99}; do printf "%10d\\n" 1 > /tmp/.X$n-lock; '
            ": > /tmp/.X11-unix/X$n; done'",
        )
    try:
        session = launch_session(portal, "desktop", session_dir, *form)
    finally:
        for node_host in (a["hostname"] for a in nodes if a["hostname"] != portal.host):
            on_host(portal.lab, node_host, f"rm -f {planted}")
    job = session["job"]
    try:
        found = session["connection"]
        host, websocket_port = found["host"], found["websocket"]
        password, display = str(found["password"]), int(found["display"])
        node = host_at(portal.lab, host)
        assert len(password) == 8 and found["port"] == 5900 + display
        # the display on loopback only; websockify, its one way in, on the session's port
        listening = on_host(portal.lab, node, "ss -Hltn").split()
        assert {a for a in listening if a.endswith(f":{5900 + display}")} <= {
            f"127.0.0.1:{5900 + display}",
            f"[::1]:{5900 + display}",
        }
        assert any(a.endswith(f":{websocket_port}") for a in listening)
        # the password reached Xvnc through files, never a command line
        assert password not in on_host(portal.lab, node, "ps -eo args")

        partition = values["bc_queue"]
        jobs_tab = portal.ruby("ood_job_status.rb", CLUSTERS_D, job)
        assert jobs_tab["status"] == "running" and jobs_tab["listed"], jobs_tab
        assert (jobs_tab["queue"], jobs_tab["gpus"]) == (partition, gpus), jobs_tab
        code, queue = lab_task(portal.lab, portal.env, "queue", user=USER)
        assert code == 0, queue
        (listed,) = [j for j in queue["output"]["jobs"] if j["job_id"] == int(job)]
        assert (listed["state"], listed["partition"], listed["gpus"]) == (
            "running",
            partition,
            gpus,
        ), listed
        assert (listed["name"], listed["nodes"]) == ("ood-e2e-desktop", node), listed
        desktop_pid = on_host(portal.lab, node, f"pgrep -u {USER} -n xfce4-session").strip()
        environment = on_host(
            portal.lab, node, f"tr '\\0' '\\n' < /proc/{desktop_pid}/environ"
        ).splitlines()
        assert f"SLURM_JOB_ID={job}" in environment
        if gpus:
            # Slurm's own view: the GPUs are the session's, their indexes in
            # CUDA_VISIBLE_DEVICES, and the GPU job mapping (dcgm-exporter's hpc_job) names it
            visible = next(v for v in environment if v.startswith("CUDA_VISIBLE_DEVICES="))
            indexes = visible.split("=", 1)[1].split(",")
            assert len(indexes) == gpus, visible
            for index in indexes:
                mapped = on_host(portal.lab, node, f"cat /run/slurm-app/gpu-jobs/{index}")
                assert mapped.split() == [job], (index, mapped)

        page = f"/rnode/{host}/{websocket_port}/vnc.html"
        websocket_url = (
            f"wss://{address(portal.lab, portal.host)}/rnode/{host}/{websocket_port}/websockify"
        )
        owner = portal.signed_in(USER, page)
        # another user of the portal reaches the session's VNC server (OOD's proxy lets any
        # signed-in user through), which asks for the password and refuses theirs, 20 times
        # over: Xvnc's blacklist would count them all against 127.0.0.1 (websockify) and shut
        # the owner out after five
        stranger = portal.signed_in(peer, page)
        for guess in ["", *(f"guess{n:03d}" for n in range(19))]:
            refused = rfb.view(websocket_url, guess, cookie=session_cookie(stranger))
            assert refused.banner.startswith("RFB 003.") and refused.security_types == [2]
            assert not refused.authenticated
        started = time.monotonic()
        seen = rfb.view(websocket_url, password, cookie=session_cookie(owner))
        assert seen.authenticated and (seen.width, seen.height) == (1280, 800), seen
        # Xfce's panel and desktop, not an empty screen
        assert seen.colours > 50, seen
        first_frame = time.monotonic() - started
        chromium.keep_timing(
            f"desktop on {portal.lab}: websocket login and first frame", round(first_frame, 1)
        )
        # OOD's one-time password: after a login the template sets a new one and rewrites
        # connection.yml, and the used one no longer opens the desktop
        deadline = time.monotonic() + 20
        while str(connection(portal, session_dir)["password"]) == password:
            assert time.monotonic() < deadline, "the VNC password was not changed after a login"
            time.sleep(0.5)
        password = str(connection(portal, session_dir)["password"])
        assert not rfb.view(websocket_url, "", cookie=session_cookie(owner)).authenticated
        shot, seconds = chromium.screenshot(
            portal.origin,
            {login_check.SESSION_COOKIE: owner.cookies[login_check.SESSION_COOKIE]},
            f"{page}?autoconnect=true&resize=remote&password={password}"
            f"&path=rnode/{host}/{websocket_port}/websockify",
            NOVNC_CONNECTED,
            screenshot,
        )
        chromium.keep_timing(f"desktop on {portal.lab}: noVNC drawn in Chromium", round(seconds, 1))
        assert shot.stat().st_size > 20_000
        yield {"job": job, "node": node, "connection": found, "queues": session["queues"]}
    finally:
        portal.on(f"scancel {job}")
    _ended(portal, job)
    # issue 72 (3): its start and its end in the node's journal, under the operations' fields:
    # who, which app, the job, what Slurm gave it, the instance the node belongs to
    journaled = session_journal(portal, node, job)
    instance = json.loads((lab_spec.lab_dir(portal.lab) / "deploy.json").read_text())["instance"]
    for event, verb in (("session_start", "started"), ("session_end", "ended")):
        entry = journaled[event]
        assert entry["SLURM_APP_INSTANCE_ID"] == instance["id"], entry
        assert (entry["SLURM_APP_USER"], entry["SLURM_APP_SESSION_APP"]) == (USER, "desktop")
        assert (entry["SLURM_APP_NODE"], entry["SLURM_APP_PARTITION"]) == (
            node,
            values["bc_queue"],
        ), entry
        assert len([i for i in entry["SLURM_APP_GPUS"].split(",") if i]) == gpus, entry
        assert entry["MESSAGE"].startswith(f"slurm-app: desktop session {verb} for {USER}")
    # the end carries how the job ended (cancelled here)
    assert journaled["session_end"]["SLURM_APP_EXIT_CODE"], journaled
    _check_session_usage(portal, job, gpus)


def _check_session_usage(portal: Portal, job: str, gpus: int) -> None:
    """Issue 72 (3): `usage` (as the session's user) counts the ended session's CPU and GPU
    time against the user and the job's account, as accounting recorded every job of theirs."""
    today = datetime.now(UTC).date()
    period = {"from": str(today - timedelta(days=1)), "to": str(today)}
    sacct = (
        f"sacct -X -n -P --delimiter=';' -u {USER} -S {period['from']}T00:00:00 -E now "
        "-o JobID,Account,AllocTRES,ElapsedRaw,State"
    )
    deadline = time.monotonic() + 30
    while True:
        rows = [row.split(";") for row in portal.on(sacct).strip().splitlines()]
        recorded = [row for row in rows if row[0] == job and row[4] != "RUNNING"]
        if recorded:
            break
        assert time.monotonic() < deadline, f"accounting has not recorded {job}'s end: {rows}"
        time.sleep(1)
    (_, account, tres, elapsed, _) = recorded[0]
    counts = dict(item.split("=", 1) for item in tres.split(",") if "=" in item)
    assert int(counts.get("gres/gpu", 0)) == gpus and int(elapsed) > 0, recorded
    # the user's ended jobs in that account; one still running grows until usage reads it
    expected, running = [0, 0], False
    for _, row_account, row_tres, row_elapsed, state in rows:
        if row_account != account:
            continue
        if state in ("RUNNING", "PENDING"):
            running = True
            continue
        row_counts = dict(item.split("=", 1) for item in row_tres.split(",") if "=" in item)
        expected[0] += int(row_counts.get("cpu", 0)) * int(row_elapsed)
        expected[1] += int(row_counts.get("gres/gpu", 0)) * int(row_elapsed)
    code, usage = lab_task(portal.lab, portal.env, "usage", USER, **period)
    assert code == 0, usage
    (mine,) = [
        u
        for a in usage["output"]["accounts"]
        if a["account"] == account
        for u in a["users"]
        if u["user"] == USER
    ]
    answered = [mine["cpu_seconds"], mine["gpu_seconds"]]
    if running:
        assert answered[0] >= expected[0] and answered[1] >= expected[1], (mine, rows)
    else:
        assert answered == expected, (mine, rows)
    assert mine["gpu_seconds"] >= gpus * int(elapsed), (mine, recorded)
