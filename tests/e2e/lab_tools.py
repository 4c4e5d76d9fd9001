"""What the end-to-end modules share: a lab host's shell, the driver as the platform runs it."""

import base64
import importlib.util
import io
import json
import re
import ssl
import subprocess
import tarfile
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from conftest import ROOT, VENV, console_script, run_events
from slurm_metrics import COMMUNITY_TOTAL_GAUGES

from driver.catalog import credentials_root
from driver.lab import lab
from driver.lab import requests as lab_requests
from driver.lab import spec as lab_spec
from driver.lab.hosts import network_name


def on_host(lab_name: str, host: str, command: str) -> str:
    """A shell command on a lab host, as its root; its output. Fails the test on error."""
    ran = lab.host_container(lab_name, host).exec_run(["/bin/bash", "-c", command])
    assert ran.exit_code == 0, (command, ran.output.decode())
    return ran.output.decode()


def host_fingerprint(lab_name: str, host: str) -> str:
    """What a refused operation must leave as it was on a host: packages, accounts, Slurm's
    configuration, the bundle's records and what is on the platform's mount."""
    return on_host(
        lab_name,
        host,
        "dpkg -l | grep -E 'slurm|munge' | awk '{print $2, $3}'; getent passwd labuser; "
        "sha256sum /etc/slurm/*.conf /var/lib/slurm-app/* 2>/dev/null; "
        "ls -A /workspace 2>/dev/null; true",
    )


def wait_on_host(
    lab_name: str, host: str, check: str, seconds: int = 60, describe: str = ""
) -> None:
    """Until the shell check succeeds on the host, at most `seconds`; then the test fails
    with what the shell command `describe` says there (a cut CI log still shows why)."""
    loop = f"for i in $(seq {seconds}); do {check} && exit 0; sleep 1; done; exit 1"
    ran = lab.host_container(lab_name, host).exec_run(["/bin/bash", "-c", loop])
    if ran.exit_code != 0:
        seen = on_host(lab_name, host, f"{{ {describe}; }} 2>&1 || true") if describe else ""
        raise AssertionError(f"not true in {seconds} s on {host}: {check}\n{seen}")


def name_the_gpus(lab_name: str, host: str, model: str, count: int) -> None:
    """An nvidia-smi on the host that names its GPU device files' model, as the driver's
    would: what slurm_worker reads the node's GPU type (and so its feature) from."""
    lines = "".join(f"{index}, {model}\\n" for index in range(count))
    on_host(
        lab_name,
        host,
        f"printf '#!/bin/sh\\nprintf \"{lines}\"\\n' > /usr/local/bin/nvidia-smi"
        " && chmod 0755 /usr/local/bin/nvidia-smi",
    )
    assert on_host(
        lab_name, host, "nvidia-smi --query-gpu=index,name --format=csv,noheader"
    ).splitlines() == [f"{index}, {model}" for index in range(count)]


def kill_host(lab_name: str, host: str) -> None:
    """The host's container killed (SIGKILL to systemd): its address stops answering at all,
    as an allocation that died under the cluster does."""
    container = lab.host_container(lab_name, host)
    container.kill()
    container.reload()
    assert container.status != "running", container.status


def platform_env(state: Path) -> dict[str, str]:
    """The driver's whole environment, as a platform gives it: no venv, own state dir (with
    the lab's site settings in it)."""
    lab.write_lab_site(state / "site.yaml")
    return {
        "PATH": "/usr/bin:/bin",
        "SLURM_APP_STATE_DIR": str(state),
        "SLURM_APP_CREDENTIALS_ROOT": str(credentials_root()),
    }


def run_request(path: Path, env: dict[str, str], venv: Path = VENV) -> tuple[int, dict]:
    """`slurm-app-driver run REQUEST` by its full path: (exit code, the final result)."""
    ran = console_script("run", str(path), env=env, venv=venv, timeout=1200)
    if venv == VENV:
        return ran.returncode, run_events(ran.stdout)[-1]["result"]
    # an earlier release's driver answers in that release's contract
    lines = [json.loads(line) for line in ran.stdout.splitlines() if line.strip()]
    return ran.returncode, lines[-1]["result"]


def kill_the_driver_at(request: Path, env: dict[str, str], task: str) -> list[dict]:
    """The driver run on `request` as run_request runs it, SIGKILLed once a host has done
    `task` (its name as the events give it): the platform's process lost mid-run, its guard
    left to end the playbook's tree (driver.runner.guard). Returns the events it wrote."""
    driver = subprocess.Popen(
        [str(VENV / "bin" / "slurm-app-driver"), "run", str(request)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    events: list[dict] = []
    try:
        for line in driver.stdout or ():
            events.append(json.loads(line))
            if events[-1]["event"] in ("host.ok", "host.changed") and events[-1]["task"] == task:
                driver.kill()
                break
    finally:
        driver.kill()
        driver.wait(timeout=60)
    assert driver.returncode == -9, f"the run ended before {task!r}: {events[-3:]}"
    return events


def deploy_lab(spec: lab_spec.LabSpec, env: dict[str, str], config: dict) -> dict:
    """A fresh lab deployed through the driver, `config` laid over the lab's own; the result."""
    lab.down(spec.name)
    path = lab.up(spec)
    request = json.loads(path.read_text())
    request["instance"]["config"].update(config)
    path.write_text(json.dumps(request))
    code, result = run_request(path, env)
    assert code == 0, result
    return result


def lab_operation(
    lab_name: str,
    env: dict[str, str],
    kind: str,
    target: str | list[str] | None = None,
    *,
    replacement: str | None = None,
    killed_at: tuple[str, ...] = (),
    after_kill: Callable[[str], None] | None = None,
    **options,
) -> tuple[int, dict]:
    """A member operation on a deployed lab through the driver; the lab then knows the
    members as the result left them, as the platform would. With `killed_at`, the same request
    runs first once per task named there, each run killed once a host has done it
    (kill_the_driver_at) and `after_kill` called with the task; the result is the last run's,
    which goes to the end."""
    request = lab_requests.operation_request(lab_name, kind, target, options, replacement)
    for task in killed_at:
        kill_the_driver_at(request, env, task)
        if after_kill is not None:
            after_kill(task)
    code, result = run_request(request, env)
    result_file = request.with_name(f"{kind}-result.json")
    result_file.write_text(json.dumps(result))
    lab_requests.record_members(lab_name, result_file)
    return code, result


def journal_of(lab_name: str, host: str, kind: str) -> tuple[dict, list[dict]]:
    """The last `kind` operation's request on the lab, and the entries `journalctl
    SLURM_APP_CORRELATION_ID=<its correlation id>` finds on `host`, in order."""
    request = json.loads((lab_spec.lab_dir(lab_name) / f"{kind}.json").read_text())
    found = on_host(
        lab_name,
        host,
        f"journalctl --no-pager -o json SLURM_APP_CORRELATION_ID={request['correlation_id']}",
    )
    return request, [json.loads(line) for line in found.splitlines() if line.startswith("{")]


def check_the_journal_of(
    lab_name: str, kind: str, hosts: list[str], outcome: str = "completed"
) -> list[dict]:
    """Each host's journal holds the last `kind` operation's start, then its end with
    `outcome`, each with the operation's identity; returns the steps logged between."""
    steps = []
    for host in hosts:
        request, entries = journal_of(lab_name, host, kind)
        ends = [(e["SLURM_APP_EVENT"], e.get("SLURM_APP_OUTCOME")) for e in entries]
        assert [x for x in ends if x[0] != "step"] == [("start", None), ("end", outcome)], (
            host, entries,
        )  # fmt: skip
        for entry in entries:
            assert entry["SLURM_APP_OPERATION_ID"] == request["operation"]["id"], entry
            assert entry["SLURM_APP_OPERATION"] == kind
            assert entry["SLURM_APP_INSTANCE_ID"] == request["instance"]["id"]
            assert entry["SYSLOG_IDENTIFIER"] == "slurm-app"
        # each run's one trace, from its start on (the lab's requests carry no traceparent: the
        # driver started one per run)
        run_traces = [e["SLURM_APP_TRACE_ID"] for e in entries]
        assert all(re.fullmatch("[0-9a-f]{32}", trace) for trace in run_traces), run_traces
        starts = [i for i, e in enumerate(entries) if e["SLURM_APP_EVENT"] == "start"]
        for begin, end in zip(starts, [*starts[1:], len(entries)], strict=True):
            assert len(set(run_traces[begin:end])) == 1, (host, entries)
        steps += [{"host": host, **e} for e in entries if e["SLURM_APP_EVENT"] == "step"]
    return steps


def teardown_paths(by_host: dict[str, list[dict]]) -> dict[str, list[str]]:
    """A result's destroyed (or kept) data: each host's paths, without sizes."""
    return {host: [entry["path"] for entry in entries] for host, entries in by_host.items()}


def upload(lab_name: str, host: str, sources: dict[str, Path], destination: str) -> None:
    """Files of this machine into a lab host under `destination` (each source at its name
    there), root's and readable by anyone."""

    def readable(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.mode = 0o755 if info.isdir() or info.mode & 0o100 else 0o644
        return info

    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for name, path in sources.items():
            tar.add(path, arcname=name, filter=readable)
    on_host(lab_name, host, f"install -d -m 0755 {destination}")
    lab.host_container(lab_name, host).put_archive(destination, archive.getvalue())


# Where Debian's ondemand package puts them; the shims stand in for gems Debian lacks.
OOD_UPSTREAM_LAYOUT = {
    "ood-portal-generator": "ondemand-v4.2.3/ood-portal-generator",
    "mod_ood_proxy": "ondemand-v4.2.3/mod_ood_proxy",
    "ondemand/shims": "shims",
}


def lay_out_open_ondemand_upstream(lab_name: str, host: str, upstream: Path) -> None:
    """Open OnDemand's portal generator and mod_ood_proxy on a lab host where its package puts
    them (/opt/ood), with Debian's ruby to run the generator: the open_ondemand role then
    takes the path it takes with the package (update_ood_portal writes Apache's site, the
    site loads mod_ood_proxy's Lua). The generator's profile reads /opt/ood/ondemand/enable
    (the package's environment file): here it puts the shims on ruby's path."""
    on_host(
        lab_name,
        host,
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "
        "ruby ruby-bcrypt ruby-ffi ruby-rexml >/dev/null",
    )
    upload(
        lab_name,
        host,
        {name: upstream / source for name, source in OOD_UPSTREAM_LAYOUT.items()},
        "/opt/ood",
    )
    on_host(
        lab_name, host, "echo 'export RUBYLIB=/opt/ood/ondemand/shims' > /opt/ood/ondemand/enable"
    )


def lab_gateway(lab_name: str) -> str:
    """This machine's address on the lab's network: what its hosts reach it at."""
    inspected = subprocess.run(
        ["docker", "network", "inspect", network_name(lab_name)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(inspected.stdout)[0]["IPAM"]["Config"][0]["Gateway"]


def _oidc_provider_module():
    spec = importlib.util.spec_from_file_location(
        "oidc_provider", ROOT / "molecule" / "open_ondemand" / "oidc_provider.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class WebhookSink:
    """The platform's alert endpoint, on this machine, over TLS (a bearer token travels only
    over https): every POST's Authorization header and JSON body, kept in arrival order.
    `ca` is the certificate its hosts must trust."""

    def __init__(self, address: str, folder: Path) -> None:
        received = self.received = []
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        _oidc_provider_module().certificates(folder, address)
        self.ca = (folder / "ca.crt").read_text()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                received.append(
                    {"authorization": self.headers.get("Authorization"), "body": json.loads(body)}
                )
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer((address, 0), Handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(folder / "provider.crt", folder / "provider.key")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://{address}:{self.server.server_address[1]}/alerts"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, status: str, alertname: str, node: str, timeout: float) -> dict:
        """The first notification whose group is `status` (firing, resolved) for the alert
        on the node; fails after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for notification in list(self.received):
                body = notification["body"]
                labels = body.get("groupLabels") or {}
                if body.get("status") == status and labels == {
                    "alertname": alertname,
                    "node": node,
                }:
                    return notification
            time.sleep(1)
        raise AssertionError(f"no {status} {alertname} on {node} in {timeout} s: {self.received}")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# Where slurm_worker's Prolog keeps one file per GPU for dcgm-exporter (slurm_common's vars).
GPU_JOB_MAP = "/run/slurm-app/gpu-jobs"


def check_gpu_job_mapping(lab_name: str, worker: str) -> None:
    """On a worker with one GPU device file (lab.add_host's gpus): a job holding the GPU
    appears in the mapping dcgm-exporter reads while it runs, and the Epilog takes it out;
    then a mapping that cannot be written (a file where the folder should be) lets the job
    run and the node stay in service, the error logged."""
    ctl = f"{lab_name}-ctl"

    def wait(host: str, check: str, seconds: int = 60) -> None:
        on_host(
            lab_name,
            host,
            f"for i in $(seq {seconds}); do {check} && exit 0; sleep 1; done; exit 1",
        )

    def gpu_job(wrap: str, *flags: str) -> str:
        name = f"gpu-map-{uuid.uuid4().hex[:8]}"
        answer = on_host(
            lab_name,
            ctl,
            f"cd /tmp && runuser -u labuser -- sbatch --parsable -o /dev/null --gres=gpu:1 "
            f"-J {name} -w {worker} {' '.join(flags)} --wrap '{wrap}'",
        ).strip()
        # Docker's exec once answered sbatch's exit 0 with no output on a loaded CI machine:
        # the job is then found by its name
        job = answer or on_host(lab_name, ctl, f"squeue -h -t all -n {name} -o %i").strip()
        assert job.isdigit(), (answer, job)
        return job

    job = gpu_job("sleep 120")
    wait(worker, f"grep -qx {job} {GPU_JOB_MAP}/0")
    assert on_host(lab_name, worker, f"ls {GPU_JOB_MAP}").split() == ["0"]
    on_host(lab_name, ctl, f"scancel {job}")
    wait(worker, f"! test -e {GPU_JOB_MAP}/0")

    on_host(lab_name, worker, f"rm -rf {GPU_JOB_MAP} && touch {GPU_JOB_MAP}")
    try:
        job = gpu_job("true", "--wait")
        state = on_host(lab_name, ctl, f"squeue -h -t all -j {job} -o %T").strip()
        assert state == "COMPLETED", state
        # slurmctld may show the node mixed or completing for a while after the job reads
        # COMPLETED on a loaded host (once past 30 s on CI, on 22.05); drained (a failed
        # Epilog) never turns back to idle on its own, so the wait ends there at once.
        node = on_host(
            lab_name,
            ctl,
            f"for i in $(seq 120); do s=$(sinfo -h -n {worker} -o '%T %E'); "
            f'case $s in "idle none" | *drain*) break ;; esac; sleep 1; done; echo "$s"',
        ).strip()
        assert node == "idle none", (
            node,
            on_host(lab_name, ctl, f"squeue -h -t all -w {worker} -o '%i %T %j %M'"),
            on_host(lab_name, ctl, f"scontrol show node {worker}"),
        )
        logged = on_host(lab_name, worker, "journalctl -t slurm-app-gpu-job-map --no-pager -o cat")
        assert f"job {job}: cannot create {GPU_JOB_MAP}" in logged, logged
    finally:
        on_host(lab_name, worker, f"rm -f {GPU_JOB_MAP} && install -d -m 0755 {GPU_JOB_MAP}")


def lab_task(
    lab_name: str,
    env: dict[str, str],
    task: str,
    user: str | None = None,
    on: str | None = None,
    **given,
) -> tuple[int, dict]:
    """One of the app's typed tasks on lab host `on` (the controller by default) through
    `slurm-app-driver task` (by its full path, the platform's environment): (exit code, the
    task's answer)."""
    request = lab_requests.task_request(lab_name, task, user, given, on)
    ran = console_script("task", str(request), env=env, timeout=180)
    assert ran.stdout.strip(), ran.stderr
    return ran.returncode, json.loads(ran.stdout)


# What a user's batch script may hold that no layer between the platform and sbatch may read
# as anything but text: a command substitution (run by the job's own shell, as its user), a
# template and a percent sign.
LITERAL_SCRIPT = (
    "#!/bin/bash\n"
    "echo \"$(id -un) {{ lookup('env', 'HOME') }} 100% done\" > task-literal-$SLURM_JOB_ID.txt\n"
    "sleep 60\n"
)


def check_typed_tasks(
    lab_name: str, env: dict[str, str], home: str, other: str | None = None
) -> None:
    """The Jobs and Nodes tabs' tasks on a lab (the lab user, accounting on): nodes as sinfo
    says, a submit that runs the script as written as the user, the queue with the job, root
    refused at validation, `other` (another cluster user) refused the job's cancel, the user's
    cancel, the job then in the failed view from accounting, and an audit line for each
    submit and cancel."""
    ctl = f"{lab_name}-ctl"
    user = lab_spec.LAB_USER["name"]

    code, nodes = lab_task(lab_name, env, "nodes")
    assert code == 0, nodes
    sinfo = on_host(lab_name, ctl, "sinfo -h -N -o '%N %T %c'").split("\n")
    expected = sorted({tuple(line.split()) for line in sinfo if line})
    answered = sorted(
        (n["hostname"], n["state"], str(n["cpus_total"])) for n in nodes["output"]["nodes"]
    )
    assert answered == expected

    # refused by the driver before it connects (issue 65); the host's task command refuses
    # root too, for a caller that bypasses the driver (test_slurm_task.py)
    code, refused = lab_task(lab_name, env, "submit", "root", script=LITERAL_SCRIPT)
    assert code == 2, refused
    assert [(f["code"], f["path"]) for f in refused["findings"]] == [
        ("reserved-name", "$.task.user")
    ]

    code, submitted = lab_task(
        lab_name, env, "submit", user, script=LITERAL_SCRIPT, name="literal", time_limit="00:05:00"
    )
    assert code == 0, submitted
    job_id = submitted["output"]["job_id"]
    assert submitted["audit"]["job_id"] == job_id and submitted["audit"]["outcome"] == "ok"
    code, queue = lab_task(lab_name, env, "queue", user=user)
    (job,) = [j for j in queue["output"]["jobs"] if j["job_id"] == job_id]
    assert (job["name"], job["user"], job["time_limit"]) == ("literal", user, "00:05:00")
    assert job["state"] in ("pending", "running")
    output = f"{home}/task-literal-{job_id}.txt"
    on_host(
        lab_name, ctl, f"for i in $(seq 60); do test -s {output} && exit 0; sleep 1; done; exit 1"
    )
    # the job in detail while it runs: from slurmctld, its stdout where scontrol says it is
    code, detail = lab_task(lab_name, env, "job", user, job_id=job_id)
    assert code == 0 and detail["output"]["source"] == "slurmctld", detail
    (part,) = detail["output"]["parts"]
    shown = on_host(lab_name, ctl, f"scontrol show job {job_id}")
    assert f"StdOut={part['stdout']}" in shown.split() and part["state"] == "running"
    assert (part["name"], part["user"], part["time_limit"]) == ("literal", user, "00:05:00")
    if other:
        code, refused = lab_task(lab_name, env, "job", other, job_id=job_id)
        assert code == 3 and refused["error"]["code"] == "forbidden", refused
    assert on_host(lab_name, ctl, f"cat {output}") == (
        f"{user} {{{{ lookup('env', 'HOME') }}}} 100% done\n"
    )

    if other:
        code, refused = lab_task(lab_name, env, "cancel", other, job_id=job_id)
        assert code == 3 and refused["error"]["code"] == "forbidden", refused
    code, missing = lab_task(lab_name, env, "cancel", user, job_id=999999)
    assert code == 4 and missing["error"]["code"] == "not_found", missing
    code, cancelled = lab_task(lab_name, env, "cancel", user, job_id=job_id)
    assert code == 0 and cancelled["output"] == {"job_id": job_id, "state": "cancelled"}
    failed: list[dict] = []
    for _ in range(30):
        code, answer = lab_task(lab_name, env, "queue", state="failed")
        assert answer["output"]["ended_jobs_from"] == "accounting"
        failed = [j for j in answer["output"]["jobs"] if j["job_id"] == job_id]
        if failed:
            break
        time.sleep(2)
    assert [j["state"] for j in failed] == ["cancelled"]
    # ended: from accounting, as sacct has it
    code, detail = lab_task(lab_name, env, "job", user, job_id=job_id)
    assert code == 0 and detail["output"]["source"] == "accounting", detail
    (part,) = detail["output"]["parts"]
    recorded = on_host(lab_name, ctl, f"sacct -X -n -P -j {job_id} -o State,ExitCode,Elapsed")
    state, exit_code, elapsed = recorded.strip().split("|")
    assert (part["state"], f"{part['exit_code']}:{part['signal']}", part["elapsed"]) == (
        state.split()[0].lower(), exit_code, elapsed,
    )  # fmt: skip

    audit = on_host(lab_name, ctl, "cat /var/log/slurm-app/tasks.log").splitlines()
    lines = [json.loads(line) for line in audit]
    # root's submit never reached the host: the driver refused it
    assert [(x["task"], x["user"], x["outcome"]) for x in lines] == [
        ("submit", user, "ok"),
        *([("cancel", other, "forbidden")] if other else []),
        ("cancel", user, "not_found"),
        ("cancel", user, "ok"),
    ]
    assert "100% done" not in "\n".join(audit)  # the script's size, never its text


# What any cluster user may name a job (tests/fixtures/slurm/hostile-job-name): a `|`, a newline
# and then a line in the old `|` layout, a tab, `%`, quotes; 1,000 characters.
HOSTILE_JOB_NAME = ROOT / "tests" / "fixtures" / "slurm" / "hostile-job-name"


def _slurm_exporter_scrape(lab_name: str) -> str:
    """The command that prints the Slurm exporter's exposition on the controller, scraped at
    the address it listens on (the one Prometheus scrapes); it fails unless it answers 200."""
    listening = on_host(lab_name, f"{lab_name}-ctl", "ss -ltnH").split("\n")
    (address,) = [
        line.split()[3] for line in listening if line.split()[3:4] and ":9341" in line.split()[3]
    ]
    return (
        f"python3 -c 'import urllib.request; print(urllib.request.urlopen("
        f'"http://{address}/metrics", timeout=30).read().decode(), end="")\''
    )


def scrape_slurm_exporter(lab_name: str) -> str:
    """The Slurm exporter's exposition, as Prometheus scrapes it on the controller."""
    return on_host(lab_name, f"{lab_name}-ctl", _slurm_exporter_scrape(lab_name))


def check_promtool_flags_only_the_community_names(lab_name: str) -> None:
    """Issue 71 (4): Debian's promtool (the monitoring host's, from its prometheus package)
    finds nothing in the Slurm exporter's exposition but the community exporter's gauges that
    end in _total, and nothing at all in the members' records for the textfile collector."""
    problems = on_host(
        lab_name,
        f"{lab_name}-ctl",
        f"{_slurm_exporter_scrape(lab_name)} | promtool check metrics 2>&1; echo rc=$?",
    ).splitlines()
    suffix = ' non-counter metrics should not have "_total" suffix'
    assert problems[-1] in ("rc=0", "rc=3"), problems
    flagged = {line.removesuffix(suffix) for line in problems[:-1]}
    assert all(line.endswith(suffix) for line in problems[:-1]), problems
    assert "slurm_nodes_total" in flagged and flagged <= set(COMMUNITY_TOTAL_GAUGES), flagged
    records = on_host(
        lab_name,
        f"{lab_name}-ctl",
        "cat /var/lib/prometheus/node-exporter/slurm-app-*.prom | promtool check metrics 2>&1; "
        "echo rc=$?",
    )
    assert records.strip() == "rc=0", records


def check_a_hostile_job_name_is_read_as_a_name(lab_name: str, env: dict[str, str], worker: str):
    """Issue 44 (4), against the lab's real slurmctld: while a job whose name holds a forged
    record runs on `worker`, the Jobs tab lists it under its name and nothing forged, the
    Slurm exporter answers with its series, and remove_worker and drain_worker of the node
    answer as for a plain name (busy, timed out) naming the job."""
    ctl = f"{lab_name}-ctl"
    user = lab_spec.LAB_USER["name"]
    upload(lab_name, ctl, {"hostile-job-name": HOSTILE_JOB_NAME}, "/opt/slurm-app-e2e-names")
    job = on_host(
        lab_name,
        ctl,
        f"cd /tmp && runuser -u {user} -- sbatch --parsable -o /dev/null -w {worker} "
        "-J \"$(cat /opt/slurm-app-e2e-names/hostile-job-name)\" --wrap 'sleep 300'",
    ).strip()
    try:
        on_host(
            lab_name,
            ctl,
            f"for i in $(seq 60); do squeue -h -j {job} -t R | grep -q . && exit 0; sleep 1; "
            "done; exit 1",
        )
        code, queue = lab_task(lab_name, env, "queue", user=user)
        assert code == 0, queue
        listed = {j["job_id"]: j for j in queue["output"]["jobs"]}
        assert listed[int(job)]["name"] == HOSTILE_JOB_NAME.read_text()
        assert listed[int(job)]["state"] == "running" and 424242 not in listed

        # the exporter collects once per scrape interval: within two, it has read the job
        for _ in range(70):
            metrics = scrape_slurm_exporter(lab_name)
            assert "\nslurm_up 1.0\n" in metrics, metrics[-2000:]
            assert "\nslurm_exporter_collect_failures_total 0.0\n" in metrics
            running = re.findall(
                rf'^slurm_user_jobs_running{{user="{user}"}} (\S+)$', metrics, re.M
            )
            if running and float(running[0]) >= 1:
                break
            time.sleep(1)
        else:
            raise AssertionError(f"the exporter never counted the job: {metrics[-3000:]}")
        check_promtool_flags_only_the_community_names(lab_name)

        check_a_running_job_keeps_its_node(lab_name, env, worker, job)
    finally:
        on_host(lab_name, ctl, f"scancel {job}")


SEPARATOR_WATCHER = ROOT / "tests" / "e2e" / "separator_watcher.py"
# the typed tasks' command on a member, which the driver runs over SSH with the request on stdin
TASK_COMMAND = "/usr/local/libexec/slurm-app/task"


def check_no_reader_separator_reaches_another_user(lab_name: str, queries: int = 100) -> dict:
    """Issue 65 (4), against the lab's real Slurm: a cluster user of the controller's host
    reads every process's command line during `queries` calls of the queue task (all, pending,
    completed, failed in turn: squeue, and sacct where accounting answers), and renames a held
    job of theirs for each separator they see, to forge a row (cancelling it after a sacct's).
    No answer holds a forged row, and no squeue separator was ever on a command line.
    Returns the commands whose separators the watcher saw, counted."""
    ctl = f"{lab_name}-ctl"
    user = lab_spec.LAB_USER["name"]
    tools = "/opt/slurm-app-e2e-names"
    upload(lab_name, ctl, {SEPARATOR_WATCHER.name: SEPARATOR_WATCHER}, tools)
    held = on_host(
        lab_name,
        ctl,
        f"cd /tmp && for i in $(seq 40); do runuser -u {user} -- sbatch --parsable --hold "
        "-o /dev/null --wrap true; done",
    ).split()
    stop, seen = "/tmp/separator-watcher.stop", "/tmp/separator-watcher.json"
    on_host(
        lab_name,
        ctl,
        f"rm -f {stop} && cd /tmp && (runuser -u {user} -- python3 "
        f"{tools}/{SEPARATOR_WATCHER.name} {','.join(held)} {stop} > {seen} 2>&1 &)",
    )
    try:
        states = ["", "pending", "completed", "failed"]
        envelopes = [
            json.dumps(
                {
                    "task": "queue",
                    "correlation_id": f"watched-{n}",
                    "input": {"state": states[n % 4]} if states[n % 4] else {},
                }
            )
            for n in range(queries)
        ]
        listed = base64.b64encode(("\n".join(envelopes) + "\n").encode()).decode()
        on_host(lab_name, ctl, f"echo {listed} | base64 -d > /tmp/watched-queries.jsonl")
        answers = on_host(
            lab_name,
            ctl,
            f"while IFS= read -r envelope; do printf '%s\\n' \"$envelope\" | {TASK_COMMAND} "
            "| tail -n 1; done < /tmp/watched-queries.jsonl",
        ).splitlines()
    finally:
        on_host(
            lab_name,
            ctl,
            f"touch {stop}; for i in $(seq 50); do pgrep -f {SEPARATOR_WATCHER.name} >/dev/null "
            f"|| break; sleep 0.2; done; scancel {' '.join(held)}",
        )
    assert len(answers) == queries
    for answer in map(json.loads, answers):
        assert answer["status"] == "ok", answer
        jobs = answer["output"]["jobs"]
        assert not [j for j in jobs if j["job_id"] == 999999 or j["user"] == "mallory"], jobs
    watched = json.loads(on_host(lab_name, ctl, f"cat {seen}").splitlines()[-1])
    commands = [command for command, _ in watched]
    assert "squeue" not in commands, watched
    return {command: commands.count(command) for command in sorted(set(commands))}


def check_a_running_job_keeps_its_node(
    lab_name: str, env: dict[str, str], worker: str, job: str
) -> None:
    """While `job` runs on `worker`: remove_worker is refused with `node_busy` naming it,
    nothing changed (the driver's follow-up journals the failed end on both hosts);
    drain_worker with a 2 s timeout answers `drain_timeout` naming it; resume_worker puts the
    node back. The job still runs."""
    ctl = f"{lab_name}-ctl"
    code, result = lab_operation(lab_name, env, "remove_worker", worker)
    assert code == 1 and result["error"]["code"] == "node_busy", result["error"]
    assert job in result["error"]["message"] and result["changed"] == 0
    check_the_journal_of(lab_name, "remove_worker", [ctl, worker], outcome="failed")
    code, result = lab_operation(
        lab_name, env, "drain_worker", worker, drain_timeout_s=2, reason="a job runs there"
    )
    assert code == 1 and result["error"]["code"] == "drain_timeout", result["error"]
    assert job in result["error"]["message"]
    code, result = lab_operation(lab_name, env, "resume_worker", worker)
    assert code == 0, result
    assert on_host(lab_name, ctl, f"squeue -h -j {job} -o %T").split() == ["RUNNING"]


# What a link a cluster user plants points at: a root folder on root's PATH.
LINK_TARGET = "/usr/local/bin"
LINK_TARGET_STATE = (
    f"stat -c '%U %G %a' {LINK_TARGET}; ls -la --time-style=+ {LINK_TARGET} | sha256sum"
)


def plant_links_on_the_mount(lab_name: str, env: dict[str, str]) -> str:
    """Issue 44 (1), on a lab on the platform's storage: the mount made a scratch mount (anyone
    may write its root), its cluster user plants `jobs -> /usr/local/bin`, then a `jobs` folder
    of their own holding `<user> -> /usr/local/bin`, each before a deploy that would move the
    job directories onto the mount: each deploy is refused with storage_conflict naming the
    path, nothing changed, the link's target as it was. The second link stays for the
    operations that follow; returns what its target looked like."""
    ctl = f"{lab_name}-ctl"
    user, mount = lab_spec.LAB_USER["name"], lab_spec.LAB_MOUNT
    on_host(lab_name, ctl, f"chmod 1777 {mount}")
    before = on_host(lab_name, ctl, LINK_TARGET_STATE)
    deploy = lab_spec.lab_dir(lab_name) / "deploy.json"
    sent = deploy.read_text()
    request = json.loads(sent)
    request["instance"]["config"].setdefault("storage", {})["holds"] = "job_directories"
    deploy.write_text(json.dumps(request))
    try:
        for plant, said in (
            (f"ln -s {LINK_TARGET} {mount}/jobs", f"{mount}/jobs is a symbolic link"),
            (
                f"rm {mount}/jobs && mkdir {mount}/jobs && ln -s {LINK_TARGET} {mount}/jobs/{user}",
                f"{mount}/jobs belongs to uid {lab_spec.LAB_USER['uid']}, not to uid 0",
            ),
        ):
            on_host(lab_name, ctl, f"runuser -u {user} -- sh -c '{plant}'")
            code, result = lab_operation(lab_name, env, "deploy")
            assert code == 1 and result["error"]["code"] == "storage_conflict", result["error"]
            assert said in result["error"]["message"] and result["changed"] == 0
            assert on_host(lab_name, ctl, LINK_TARGET_STATE) == before
    finally:
        deploy.write_text(sent)
    return before


def remove_planted_links(lab_name: str, before: str) -> None:
    """The link's target still as it was; the links and their folder gone."""
    ctl = f"{lab_name}-ctl"
    assert on_host(lab_name, ctl, LINK_TARGET_STATE) == before
    on_host(lab_name, ctl, f"rm -rf {lab_spec.LAB_MOUNT}/jobs")


def check_homes_are_their_users_alone(
    lab_name: str, hosts: list[str], home: str, other: str = "nobody"
) -> None:
    """Issue 44 (5): a home is its user's alone (0700) on every host that sees it, whatever
    the image's login.defs (Debian 12's makes homes 0755): another user cannot list it."""
    for host in hosts:
        assert on_host(lab_name, host, f"stat -c %a {home}").strip() == "700", host
        denied = on_host(lab_name, host, f"runuser -u {other} -- ls {home} 2>&1 || true")
        assert "Permission denied" in denied, (host, denied)


def _as_lab_user(lab_name: str, host: str, command: str) -> str:
    user = lab_spec.LAB_USER["name"]
    return on_host(lab_name, host, f"cd /tmp && runuser -u {user} -- {command}").strip()


def _accounting_view(lab_name: str, host: str) -> dict[str, str]:
    """What a restore must bring back as it was: associations, QoS, fair-share shares."""
    return {
        "associations": on_host(
            lab_name, host, "sacctmgr -n -P show assoc format=account,user,fairshare,qos"
        ),
        "qos": on_host(lab_name, host, "sacctmgr -n -P show qos format=name,priority,maxtrespu"),
        "shares": on_host(lab_name, host, "sshare -a -n -P -o Account,User,RawShares"),
    }


def prometheus_targets(lab_name: str, host: str) -> dict[tuple[str, str], str]:
    """The monitoring host's Prometheus's active targets: (job, node) -> health."""
    script = (
        "import json, urllib.request; print(json.dumps([[t['labels']['job'], "
        "t['labels'].get('node'), t['health']] for t in json.load(urllib.request.urlopen("
        "'http://127.0.0.1:9090/api/v1/targets'))['data']['activeTargets']]))"
    )
    found = json.loads(on_host(lab_name, host, f'python3 -c "{script}"'))
    return {(job, node): health for job, node, health in found}


def prometheus_value(lab_name: str, host: str, query: str, at: float) -> str | None:
    """The value the monitoring host's Prometheus gives the instant query at `at` (its only
    series'), or None where it has none."""
    script = (
        "import json, sys, urllib.parse, urllib.request; "
        "url = 'http://127.0.0.1:9090/api/v1/query?' + urllib.parse.urlencode("
        "{'query': sys.argv[1], 'time': sys.argv[2]}); "
        "found = json.load(urllib.request.urlopen(url))['data']['result']; "
        "print(json.dumps(found[0]['value'][1] if found else None))"
    )
    return json.loads(on_host(lab_name, host, f"python3 -c \"{script}\" '{query}' {at}"))


# Prometheus's history older than its head: a block promtool (Prometheus's own tool) writes
# into its storage, a day old (within the retention), as Prometheus cuts its own every 2 hours
HISTORY_PROBE = 'slurm_app_history_probe{probe="before-the-loss"}'


def write_a_day_old_block(lab_name: str, host: str) -> float:
    """The probe's block in the host's Prometheus storage; returns the moment it holds 2 at."""
    at = int(time.time()) - 86400
    samples = f"# TYPE slurm_app_history_probe gauge\n{HISTORY_PROBE} 1 {at}\n"
    samples += f"{HISTORY_PROBE} 2 {at + 60}\n# EOF\n"
    storage = "/var/lib/prometheus/metrics2"
    on_host(
        lab_name,
        host,
        f"printf '{samples}' > /tmp/history.om && promtool tsdb create-blocks-from openmetrics "
        f"/tmp/history.om {storage} >/dev/null && chown -R prometheus:prometheus {storage}",
    )
    return at + 60


def check_controller_replacement(
    lab_name: str,
    env: dict[str, str],
    old: str,
    new: str,
    worker: str,
    lost: bool = True,
    requeued: bool = False,
    killed_at: tuple[str, ...] = (),
) -> dict:
    """The recovery the platform runs when a controller is lost: a finished job, a job running
    on `worker` and one pending behind it; a backup; the old controller's container killed
    (`lost`; else it still answers, and is stopped and cleaned); replace_controller onto `new`
    (started beforehand, so that it cannot take the dead one's address). Then the running job
    completes and is recorded, the pending one runs, the finished one is still in sacct,
    associations, QoS and shares are as they were, every worker answers the new controller,
    its Prometheus scrapes every member, and the munge key is in no result and no file of the
    driver's state but the backups. Prometheus's history comes with the backup: a series the
    old controller's Prometheus held in its head (its own node's `up`) and one in a persisted
    block, each queried at a moment before the loss. Returns the result.
    With `requeued` (22.05: a job's slurmstepd keeps the old controller's address, so the end
    of a job that ran through the replacement never reaches the new one; see
    docs/operations.md) the running job is requeued by the replacement, its cut run recorded
    REQUEUED with why, and it runs again at once.
    With `killed_at` (lab_operation's), the replacement's driver is killed at each of those
    tasks in turn before the run that ends it: each re-run goes on from where the last stopped,
    and the same holds at the end, each job recorded once. A job submitted to the new
    controller after the last kill (recorded by the slurmctld and slurmdbd the killed runs
    started) keeps its record through the run that ends it, and runs."""
    release = "/tmp/release-replacement-job"
    finished = _as_lab_user(lab_name, old, "sbatch --parsable -W -o /dev/null --wrap true")
    waits = f"'until [ -e {release} ]; do sleep 1; done'"
    running = _as_lab_user(
        lab_name, old, f"sbatch --parsable -o /dev/null -w {worker} -J outlives --wrap {waits}"
    )
    wait_on_host(lab_name, old, f"squeue -h -j {running} -t R | grep -q .")
    pending = _as_lab_user(
        lab_name, old, f"sbatch --parsable -o /dev/null -d afterok:{running} --wrap true"
    )
    before = _accounting_view(lab_name, old)
    block_at = write_a_day_old_block(lab_name, old)
    old_up = f'up{{job="node",node="{old}"}}'
    scraped_at = time.time()
    deadline = scraped_at + 90
    while prometheus_value(lab_name, old, old_up, scraped_at) != "1":
        assert time.time() < deadline, "the old controller's Prometheus never scraped itself"
        time.sleep(3)
        scraped_at = time.time()
    code, backup = lab_operation(lab_name, env, "backup")
    assert code == 0, backup
    key = on_host(lab_name, worker, "base64 -w0 /etc/munge/munge.key")
    if lost:
        kill_host(lab_name, old)
    between: list[str] = []

    def submit_to_the_new_controller(task: str) -> None:
        if task == killed_at[-1]:
            between.append(
                _as_lab_user(lab_name, new, "sbatch --parsable --hold -o /dev/null --wrap true")
            )

    code, result = lab_operation(
        lab_name,
        env,
        "replace_controller",
        old,
        replacement=new,
        killed_at=killed_at,
        after_kill=submit_to_the_new_controller,
    )
    assert code == 0, result
    detail = result["adapter_detail"]
    statuses = {m["allocation_id"]: m["status"] for m in result["members"]}
    allocations = {
        a["hostname"]: a["id"]
        for a in json.loads((lab_spec.lab_dir(lab_name) / "allocations.json").read_text())
    }
    assert statuses[allocations[old]] == "removed" and statuses[allocations[new]] == "ready"
    assert detail["restore"]["backup_id"] == backup["adapter_detail"]["backup"]["backup_id"]
    assert (
        detail["restore"]["state_from"]
        == backup["adapter_detail"]["backup"]["manifest"]["state_from"]
    )
    assert detail["placement_intent"]["controller_allocation_id"] == allocations[new]
    assert detail["access_bundle"]["controller"]["hostname"] == new
    if lost:
        assert [entry["host"] for entry in detail["not_cleaned"]] == [old]
    else:
        assert "not_cleaned" not in detail and old in detail["destroyed"], detail
        left = "dpkg -l | grep -E 'slurm|munge|mariadb|prometheus' || true"
        assert on_host(lab_name, old, left).strip() == ""
    assert result["instance"]["health"] == "healthy", result["instance"]
    # the job that ran through the loss completes now, on the new controller's records
    if requeued:
        assert detail["restore"]["jobs_requeued"] == [running], detail["restore"]
        runs = f"sacct -n -X -D -P -j {running} -o State,AdminComment"
        cut = on_host(lab_name, new, runs).splitlines()[0]
        assert cut.startswith("REQUEUED|slurm-app replace_controller:"), cut
        wait_on_host(
            lab_name,
            new,
            f"squeue -h -j {running} -t R | grep -q .",
            describe=f"date; scontrol show job {running}; sinfo -N -o '%N %T %E'; "
            "journalctl -u slurmctld -n 40 --no-pager",
        )
    assert on_host(lab_name, new, f"squeue -h -j {running} -o %T").strip() == "RUNNING"
    on_host(lab_name, worker, f"touch {release}")
    for job in between:
        assert on_host(lab_name, new, f"sacct -n -X -j {job} -o State").strip() == "PENDING"
        on_host(lab_name, new, f"scontrol release {job}")
    for job in (running, pending, *between):
        wait_on_host(lab_name, new, f"sacct -n -X -j {job} -o State | grep -q COMPLETED", 120)
    assert on_host(lab_name, new, f"sacct -n -X -j {finished} -o State").strip() == "COMPLETED"
    for job in (finished, running, pending, *between):
        runs = on_host(lab_name, new, f"sacct -n -X -D -P -j {job} -o State").split()
        recorded = ["REQUEUED", "COMPLETED"] if requeued and job == running else ["COMPLETED"]
        assert runs == recorded, (job, runs)
    assert _accounting_view(lab_name, new) == before
    nodes = on_host(lab_name, new, "sinfo -h -N -o '%N %T'").split()
    assert nodes[1::2] == ["idle"] * (len(nodes) // 2), nodes
    # Prometheus on the new controller scrapes every member's node_exporter and the Slurm
    # exporter; the first scrape comes within an interval of the deploy
    wanted = {("node", host): "up" for host in [new, *nodes[0::2]]} | {("slurm", new): "up"}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        targets = prometheus_targets(lab_name, new)
        if {target: targets.get(target) for target in wanted} == wanted:
            break
        time.sleep(3)
    assert {target: targets.get(target) for target in wanted} == wanted, targets
    # the old controller's Prometheus history, from its head and from a block, before the loss
    metrics = backup["adapter_detail"]["backup"]["manifest"]["metrics"]
    assert metrics["blocks"] >= 1 and metrics["wal_segments"] >= 1, metrics
    assert metrics["oldest_sample"] <= time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(block_at))
    assert detail["restore"]["metrics"] == metrics
    assert prometheus_value(lab_name, new, old_up, scraped_at) == "1"
    assert prometheus_value(lab_name, new, HISTORY_PROBE, block_at) == "2"
    # the key is the cluster's, on the new controller too, and in no output
    assert on_host(lab_name, new, "base64 -w0 /etc/munge/munge.key") == key
    raw = base64.b64decode(key)
    state = Path(env["SLURM_APP_STATE_DIR"])
    for secret in (key, raw.hex(), raw[100:160]):
        needle = secret if isinstance(secret, bytes) else secret.encode()
        assert needle not in json.dumps(result).encode()
        for path in state.rglob("*"):
            if path.is_file() and "backups" not in path.relative_to(state).parts:
                assert needle not in path.read_bytes(), path
    return result
