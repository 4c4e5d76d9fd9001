"""The typed tasks (roles/slurm_common/files/slurm_app_task.py and its slurm_tasks/) against the
Slurm answers captured from real 22.05 and 24.11 daemons: the answers' shapes are the
manifest's output schemas, hostile inputs are refused before any Slurm command runs, submit and
cancel run as the requesting user with the script as data, and each is audited."""

import importlib
import json
import pwd
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import MANIFESTS, ROOT, SLURM_SEPARATOR, slurm_text
from slurm_readers.commands import text_rows
from slurm_readers.nodes import slurm_node_hardware

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
for folder in ("roles/slurm_common/files", "roles/slurm_controller/files"):
    if str(ROOT / folder) not in sys.path:
        sys.path.insert(0, str(ROOT / folder))
task = importlib.import_module("slurm_app_task")
core = importlib.import_module("slurm_tasks.core")

MANIFEST = yaml.safe_load((MANIFESTS / "slurm-reference" / "manifest.yaml").read_text())
TASKS = {t["name"]: t for t in MANIFEST["versions"][-1]["tasks"]}
ROOT_USER = {"name": "root", "uid": 0, "admin": True}
ALICE, BOB, ADMIN = (
    {"name": "alice", "uid": 2001, "admin": False},
    {"name": "bob", "uid": 2002, "admin": False},
    {"name": "ops", "uid": 2003, "admin": True},
)


def job_rows(answer: str) -> list[list[str]]:
    """The records of a captured squeue text answer."""
    return text_rows(answer, "jobs")


def jobs_answer(rows: list[list[str]], captured: str) -> str:
    """Records as squeue prints them, with the captured answer's separator."""
    separator = SLURM_SEPARATOR.search(captured).group()
    return "".join(separator.join(row) + "\n" for row in rows)


class Host:
    """The controller as the task sees it: Slurm's answers (captured), its accounts, and
    every command the task ran (argv, stdin)."""

    def __init__(self, version: str, accounting: bool = True) -> None:
        folder = FIXTURES / version
        self.version = (folder / "VERSION").read_text().strip()
        self.jobs = (folder / "jobs.txt").read_text()
        nodes = folder / "scontrol-nodes.json"
        self.nodes = (nodes if nodes.exists() else folder / "sinfo.json").read_text()
        self.history = ""
        self.ran: list[tuple[list[str], str | None]] = []
        self.down = False
        self.accounting = accounting

    def __call__(
        self, argv: list[str], user: str | None = None, stdin: str | None = None, **_: object
    ) -> str:
        if self.down:
            raise task.TaskError("scheduler_unavailable", "Unable to contact slurm controller")
        if argv[:3] == ["scontrol", "show", "config"]:
            return self.show_config()
        self.ran.append(((["runuser", "-u", user, "--"] if user else []) + argv, stdin))
        if argv[0] == "squeue":
            if "-j" in argv:
                wanted = argv[argv.index("-j") + 1]
                rows = [r for r in job_rows(self.jobs) if r[0] == wanted]
                if not rows:
                    raise task.TaskError(
                        "failed", "slurm_load_jobs error: Invalid job id specified"
                    )
                return jobs_answer(rows, self.jobs)
            return self.jobs
        if argv[0] in ("sinfo", "scontrol"):
            return self.nodes
        if argv[0] == "sacct":
            return self.history
        if argv[0] == "sbatch":
            return "42\n"
        if argv[0] == "scancel":
            return ""
        raise AssertionError(f"unexpected command {argv}")

    def show_config(self) -> str:
        storage = "accounting_storage/slurmdbd" if self.accounting else "accounting_storage/none"
        return (
            f"Configuration data as of 2026-12-02T10:00:00\nAccountingStorageType   = {storage}\n"
            f"SLURM_VERSION           = {self.version}\nSlurmctldPort           = 6817\n"
        )

    def config(self, tmp_path: Path) -> dict:
        return {
            "storage_mount": "",
            # root listed by mistake: the task still never runs anything as root
            "users": [ALICE, BOB, ADMIN, ROOT_USER],
            "audit_log": str(tmp_path / "audit" / "tasks.log"),
            "max_script_bytes": 65536,
        }


@pytest.fixture
def host(monkeypatch, request):
    slurm = Host(getattr(request, "param", "24.11"))
    monkeypatch.setattr(core, "slurm", slurm)
    accounts = {u["name"]: u["uid"] for u in (ALICE, BOB, ADMIN)} | {"root": 0}

    def getpwnam(name: str):
        if name not in accounts:
            raise KeyError(name)
        return pwd.struct_passwd(
            (name, "x", accounts[name], accounts[name], "", f"/home/{name}", "/bin/bash")
        )

    monkeypatch.setattr(core.pwd, "getpwnam", getpwnam)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    return slurm


def ask(host: Host, tmp_path: Path, name: str, given: dict, user: str | None = "alice") -> dict:
    request = {"task": name, "correlation_id": "corr-1", "input": given}
    if user is not None:
        request["user"] = user
    schemas = {n: {"input_schema": t["input_schema"]} for n, t in TASKS.items()}
    return task.answer_for(json.dumps(request), host.config(tmp_path), schemas)


def check_output(name: str, answer: dict) -> dict:
    assert answer["status"] == "ok", answer
    jsonschema.Draft202012Validator(TASKS[name]["output_schema"]).validate(answer["output"])
    return answer["output"]


@pytest.mark.parametrize("host", ["22.05", "24.11"], indirect=True)
def test_the_queue_answers_the_manifests_shape_alike_on_22_05_and_24_11(host, tmp_path):
    jobs = check_output("queue", ask(host, tmp_path, "queue", {}))["jobs"]
    running, pending = jobs
    assert {k: running[k] for k in ("state", "gpus", "time_limit", "name", "user", "account")} == {
        "state": "running", "gpus": 1, "time_limit": "02:00:00", "name": "long", "user": "labuser",
        "account": "default",
    }  # fmt: skip
    assert running["nodes"].endswith("-w01") and running["time_elapsed"] is not None
    assert {k: pending[k] for k in ("state", "gpus", "time_limit", "nodes", "time_elapsed")} == {
        "state": "pending", "gpus": 1, "time_limit": "UNLIMITED", "nodes": "", "time_elapsed": None,
    }  # fmt: skip
    assert pending["name"] == (FIXTURES / "hostile-job-name").read_text()
    assert pending["submit_time"].endswith("Z") and isinstance(pending["job_id"], int)
    only_pending = check_output("queue", ask(host, tmp_path, "queue", {"state": "pending"}))
    assert [j["job_id"] for j in only_pending["jobs"]] == [pending["job_id"]]
    nobody = check_output("queue", ask(host, tmp_path, "queue", {"user": "alice"}))
    assert nobody["jobs"] == []
    assert host.ran and all(argv[0] == "squeue" for argv, _ in host.ran)


@pytest.mark.parametrize("host", ["22.05", "24.11"], indirect=True)
def test_the_nodes_answer_reads_gpus_and_memory_in_use(host, tmp_path):
    (node,) = check_output("nodes", ask(host, tmp_path, "nodes", {}, user=None))["nodes"]
    assert node["hostname"].endswith("-w01") and node["state"] == "draining"
    assert (node["cpus_total"], node["cpus_alloc"]) == (2, 2)
    assert (node["gpus_total"], node["gpus_alloc"]) == (1, 1)
    hardware = (FIXTURES / host.version[:5] / "slurmd-C.txt").read_text()
    memory = slurm_node_hardware(hardware)["real_memory"]
    assert node["memory_total_mb"] == memory and node["partitions"] == ["batch"]
    assert node["reason"] == "capture: draining | with a bar\nb22-w01|idle|2/0/0/2"


def test_completed_and_failed_come_from_accounting_or_say_they_do_not(host, tmp_path):
    host.history = slurm_text(
        "3|COMPLETED|alice|default|batch|1|w01|billing=1,cpu=1,node=1|2026-11-27T10:00:00|"
        "2026-11-27T10:00:01|00:00:05|UNLIMITED|ok\n"
        "4|CANCELLED by 2001|alice|default|batch|1|w01|billing=1,cpu=1,gres/gpu=1,node=1|"
        "2026-11-27T10:00:00|2026-11-27T10:00:02|00:01:00|01:00:00|gone\n"
    )
    failed = check_output("queue", ask(host, tmp_path, "queue", {"state": "failed"}))
    assert failed["ended_jobs_from"] == "accounting" and failed["accounting"] is True
    assert [(j["job_id"], j["state"], j["gpus"], j["time_elapsed"]) for j in failed["jobs"]] == [
        (4, "cancelled", 1, "00:01:00")
    ]
    assert host.ran[-1][0][:2] == ["sacct", "-n"] and "now-7days" in host.ran[-1][0]
    host.accounting = False
    off = check_output("queue", ask(host, tmp_path, "queue", {"state": "completed"}))
    assert off["accounting"] is False and off["ended_jobs_from"] == "slurmctld"


def test_submit_runs_as_the_user_with_the_script_as_sbatchs_stdin(host, tmp_path):
    script = "#!/bin/bash\necho $(id -un) {{ not a template }} 100% `date`\n"
    given = {"script": script, "name": "train", "partition": "batch", "gpus": 2, "nodes": 1,
             "time_limit": "1-02:00:00"}  # fmt: skip
    answer = ask(host, tmp_path, "submit", given)
    assert check_output("submit", answer) == {"job_id": 42}
    argv, stdin = host.ran[-1]
    assert argv == [
        "runuser", "-u", "alice", "--", "sbatch", "--parsable", "--chdir=/home/alice",
        "--job-name=train", "--partition=batch", "--nodes=1", "--gres=gpu:2", "--time=1-02:00:00",
    ]  # fmt: skip
    assert stdin == script
    audit = answer["audit"]
    assert {k: audit[k] for k in ("task", "user", "job_id", "outcome", "correlation_id")} == {
        "task": "submit", "user": "alice", "job_id": 42, "outcome": "ok",
        "correlation_id": "corr-1",
    }  # fmt: skip
    logged = (tmp_path / "audit" / "tasks.log").read_text().splitlines()
    assert [json.loads(line) for line in logged] == [audit]
    assert script not in json.dumps(audit)  # the audit says how big, not what


def test_cancel_is_the_owners_or_an_admins_and_says_what_it_cannot_find(host, tmp_path):
    own = host.jobs.replace("labuser", "alice")
    host.jobs = own
    running_id = int(job_rows(own)[0][0])
    refused = ask(host, tmp_path, "cancel", {"job_id": running_id}, user="bob")
    assert refused["error"]["code"] == "forbidden" and refused["audit"]["outcome"] == "forbidden"
    assert not any(argv[0] == "scancel" or "scancel" in argv for argv, _ in host.ran)
    assert ask(host, tmp_path, "cancel", {"job_id": 999}, user="alice")["error"]["code"] == (
        "not_found"
    )
    done = ask(host, tmp_path, "cancel", {"job_id": running_id}, user="alice")
    assert check_output("cancel", done) == {"job_id": running_id, "state": "cancelled"}
    assert host.ran[-1][0] == ["runuser", "-u", "alice", "--", "scancel", str(running_id)]
    by_admin = ask(host, tmp_path, "cancel", {"job_id": running_id}, user="ops")
    assert by_admin["status"] == "ok" and host.ran[-1][0] == ["scancel", str(running_id)]
    lines = (tmp_path / "audit" / "tasks.log").read_text().splitlines()
    assert [json.loads(line)["outcome"] for line in lines] == ["forbidden", "not_found", "ok", "ok"]


def test_array_and_heterogeneous_jobs_keep_their_numeric_id(host, tmp_path):
    row = job_rows(host.jobs)[0][1:]
    ids = ("12_3", "12_[4-9]", "13+0", "13+1")
    host.jobs = jobs_answer([[job_id, *row] for job_id in ids], host.jobs)
    jobs = check_output("queue", ask(host, tmp_path, "queue", {}))["jobs"]
    assert [(j["job_id"], j["array_task_id"]) for j in jobs] == [
        (12, 3), (12, None), (13, None), (13, None)
    ]  # fmt: skip


def test_slurm_down_is_retryable_and_every_answer_is_json(host, tmp_path):
    host.down = True
    answer = ask(host, tmp_path, "queue", {})
    assert answer["error"] == {
        "code": "scheduler_unavailable",
        "message": "Unable to contact slurm controller",
        "retryable": True,
    }
    assert task.EXIT_CODES[answer["error"]["code"]] == 5


HOSTILE = [
    # (task, input, user, expected code)
    ("submit", {"script": "#!/bin/sh\ntrue\n"}, "mallory", "forbidden"),  # not a cluster user
    ("submit", {"script": "#!/bin/sh\ntrue\n"}, "root", "forbidden"),  # root, even if listed
    ("submit", {"script": "#!/bin/sh\ntrue\n"}, None, "forbidden"),  # nobody asked
    ("submit", {"script": "#!/bin/sh\n" + "x" * (10 * 2**20)}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n" + "x" * 70000}, "alice", "invalid_input"),  # > config
    ("submit", {"script": "echo no interpreter line"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "gpus": -1}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "gpus": 10**9}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "gpus": "2"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "gpus": 1.5}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "nodes": 0}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "time_limit": "forever"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "time_limit": "1:00"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "time_limit": "01:00:00\n"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "partition": "batch --uid=0"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "partition": "-p"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "name": "$(reboot)"}, "alice", "invalid_input"),
    (
        "submit",
        {"script": "#!/bin/sh\n", "name": "{{ lookup('env','HOME') }}"},
        "alice",
        "invalid_input",
    ),
    ("submit", {"script": "#!/bin/sh\n", "name": "a\nb"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "name": "train\n"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "name": "x" * 65}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "account": "root"}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n", "uid": 0}, "alice", "invalid_input"),
    ("submit", {"script": 42}, "alice", "invalid_input"),
    ("submit", {}, "alice", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n"}, "Alice; rm -rf /", "invalid_input"),
    ("submit", {"script": "#!/bin/sh\n"}, "../../etc", "invalid_input"),
    ("cancel", {"job_id": "5"}, "alice", "invalid_input"),
    ("cancel", {"job_id": "5; scancel -u bob"}, "alice", "invalid_input"),
    ("cancel", {"job_id": -1}, "alice", "invalid_input"),
    ("cancel", {"job_id": 2**40}, "alice", "invalid_input"),
    ("cancel", {"job_id": True}, "alice", "invalid_input"),
    ("cancel", {}, "alice", "invalid_input"),
    ("queue", {"state": "all"}, "alice", "invalid_input"),
    ("queue", {"user": "$(id)"}, "alice", "invalid_input"),
    ("queue", {"user": "x" * 33}, "alice", "invalid_input"),
    ("queue", {"sort": "job_id"}, "alice", "invalid_input"),
    ("nodes", {"node": "w01"}, "alice", "invalid_input"),
]


@pytest.mark.parametrize(("name", "given", "user", "code"), HOSTILE)
def test_hostile_inputs_are_refused_with_the_field_named_before_slurm_runs(
    host, tmp_path, name, given, user, code
):
    answer = ask(host, tmp_path, name, given, user=user)
    assert answer["status"] == "error" and answer["error"]["code"] == code, answer
    assert not any(argv[0] in ("sbatch", "scancel") or "sbatch" in argv for argv, _ in host.ran)
    assert "Traceback" not in json.dumps(answer)
    if code == "invalid_input" and given:
        assert answer["error"]["message"].split(":")[0] in {
            *(f"input.{field}" for field in given),
            "input",
            "(the task)",
            "user",
            "task",
            "script",
        }, answer["error"]["message"]


@pytest.mark.parametrize(
    "raw",
    ["", "not json", "[]", '{"task": "reboot", "input": {}}', '{"task": "queue"}',
     '{"task": "queue", "input": {}, "extra": 1}', '{"task": "queue", "input": [], "user": "a"}',
     '{"task": "queue", "input": {}, "correlation_id": 7}', '{"task": "submit", "input": [1]}',
     '{"task": "cancel", "input": {"job_id": true}, "user": {"x": 1}}',
     '{"task": "submit", "input": {"script": "#!", "name": "' + "n" * 100000 + '"}}'],
)  # fmt: skip
def test_a_malformed_task_is_an_invalid_input_answer(host, tmp_path, raw):
    answer = task.answer_for(raw, host.config(tmp_path), {n: t for n, t in TASKS.items()})
    assert answer["status"] == "error" and answer["error"]["code"] == "invalid_input", answer
    assert host.ran == []
    # what a refused input leaves in the audit log is bounded, whatever was sent
    assert len(json.dumps(answer.get("audit", {}))) < 1000


def test_an_oversized_task_is_refused_before_it_is_parsed(host, tmp_path):
    config = host.config(tmp_path)
    raw = "{" + " " * task.stdin_limit(config) + "}"
    answer = task.answer_for(raw, config, TASKS)
    assert answer["error"]["code"] == "invalid_input" and "over" in answer["error"]["message"]


def test_the_audit_log_rotates_and_keeps_five(host, tmp_path, monkeypatch):
    monkeypatch.setattr(task, "AUDIT_MAX_BYTES", 200)
    for _ in range(12):
        ask(host, tmp_path, "submit", {"script": "#!/bin/sh\ntrue\n"})
    kept = sorted(p.name for p in (tmp_path / "audit").iterdir() if not p.name.endswith(".lock"))
    assert kept == ["tasks.log", *(f"tasks.log.{i}" for i in range(1, 6))]


def test_the_manifests_tasks_are_the_ones_the_command_answers():
    assert set(TASKS) == set(task.TASKS)
    assert {n for n, t in TASKS.items() if t.get("audited")} == task.AUDITED
    # the path the manifest tells the node agent is where slurm_controller installs it
    role_vars = yaml.safe_load((ROOT / "roles/slurm_common/vars/main.yml").read_text())
    assert {t["command"] for t in TASKS.values()} == {role_vars["__slurm_common_task_command"]}


# The jobs tests/fixtures/slurm/capture-job.sh submitted as labuser, by what each is.
CAPTURED_JOBS = {
    "22.05": {"failed": 3, "killed": 4, "array": 5, "hostile": 6, "gpu": 9},
    "24.11": {"failed": 40, "killed": 41, "array": 42, "hostile": 43, "gpu": 46},
}
LABUSER = {"name": "labuser", "uid": 2000, "admin": False}


class JobHost(Host):
    """The controller of capture-job.sh's lab: each job as squeue and sacct -X answered for it
    (`held`: the jobs slurmctld still holds; the others are only in accounting)."""

    def __init__(self, version: str, accounting: bool = True) -> None:
        super().__init__(version, accounting)
        folder = FIXTURES / version
        self.squeue = (folder / "job-squeue.txt").read_text()
        self.sacct = (folder / "job-sacct.txt").read_text()
        self.held = set(CAPTURED_JOBS[version].values())

    def __call__(
        self, argv: list[str], user: str | None = None, stdin: str | None = None, **_: object
    ) -> str:
        if argv[:3] == ["scontrol", "show", "config"]:
            return self.show_config()
        self.ran.append((argv, stdin))
        wanted = int(argv[argv.index("-j") + 1]) if "-j" in argv else None
        if argv[0] == "squeue":
            rows = self._rows(self.squeue, "job", wanted, id_fields=(0, 1, 3))
            if wanted not in self.held or not rows:
                raise task.TaskError("failed", "slurm_load_jobs error: Invalid job id specified")
            return jobs_answer(rows, self.squeue)
        if argv[0] == "sacct":
            # sacct -j takes a job's own id, or an array's for all its tasks
            rows = [
                r
                for r in text_rows(self.sacct, "job_record")
                if (r[0] == str(wanted) and "_" not in r[1]) or r[1].startswith(f"{wanted}_")
            ]
            return jobs_answer(rows, self.sacct) if self.accounting else ""
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return argv[3] + "\n"
        raise AssertionError(f"unexpected command {argv}")

    @staticmethod
    def _rows(answer: str, what: str, wanted: int | None, id_fields: tuple[int, ...]) -> list:
        return [r for r in text_rows(answer, what) if any(r[i] == str(wanted) for i in id_fields)]

    def config(self, tmp_path: Path) -> dict:
        return {**super().config(tmp_path), "users": [LABUSER, ALICE, ADMIN]}


@pytest.fixture
def jobs_host(monkeypatch, host, request):
    version, accounting = getattr(request, "param", ("24.11", True))
    slurm = JobHost(version, accounting)
    monkeypatch.setattr(core, "slurm", slurm)
    real = core.pwd.getpwnam
    monkeypatch.setattr(
        core.pwd,
        "getpwnam",
        lambda name: (
            pwd.struct_passwd((name, "x", 2000, 2000, "", "/home/labuser", "/bin/bash"))
            if name == "labuser"
            else real(name)
        ),
    )
    return slurm


BOTH = [("22.05", True), ("24.11", True)]


def ask_job(host: JobHost, tmp_path: Path, job_id: int, user: str | None = "labuser") -> dict:
    return ask(host, tmp_path, "job", {"job_id": job_id}, user)


@pytest.mark.parametrize("jobs_host", BOTH, indirect=True)
def test_a_job_is_read_whole_from_slurmctld_then_from_accounting(jobs_host, tmp_path):
    ids = CAPTURED_JOBS[jobs_host.version[:5]]
    answer = check_output("job", ask_job(jobs_host, tmp_path, ids["gpu"]))
    (running,) = answer["parts"]
    assert (answer["source"], running["state"], running["gpus"]) == ("slurmctld", "running", 1)
    assert (running["exit_code"], running["signal"], running["end_time"]) == (None, None, None)
    assert running["stdout"] == f"/home/labuser/slurm-{ids['gpu']}.out"
    assert running["time_limit"] == "00:10:00" and running["batch_host"].endswith("-w01")
    failed = check_output("job", ask_job(jobs_host, tmp_path, ids["failed"]))
    (part,) = failed["parts"]
    assert (failed["source"], part["state"], part["exit_code"], part["signal"]) == (
        "accounting", "failed", 3, 0,
    )  # fmt: skip
    # the patterns the job gave (-o 'out-%j-%x.txt' -e 'err-%3j.txt'), as slurmd expanded them
    assert part["stdout"] == f"/home/labuser/out-{ids['failed']}-exits-3.txt"
    assert part["stderr"] == f"/home/labuser/err-{ids['failed']:03d}.txt"
    killed = check_output("job", ask_job(jobs_host, tmp_path, ids["killed"]))
    assert [(p["exit_code"], p["signal"]) for p in killed["parts"]] == [(0, 15)]


@pytest.mark.parametrize("jobs_host", BOTH, indirect=True)
def test_an_arrays_tasks_are_its_parts_with_the_files_slurmd_wrote(jobs_host, tmp_path):
    array = CAPTURED_JOBS[jobs_host.version[:5]]["array"]
    answer = check_output("job", ask_job(jobs_host, tmp_path, array))
    assert [p["job_id"] for p in answer["parts"]] == [f"{array}_{i}" for i in (1, 2, 3)]
    # 22.05's squeue shows slurm-<task's own id>.out; the files are slurm-%A_%a.out (ls on the
    # lab's worker showed them)
    assert [p["stdout"] for p in answer["parts"]] == [
        f"/home/labuser/slurm-{array}_{i}.out" for i in (1, 2, 3)
    ]
    assert {p["state"] for p in answer["parts"]} == {"completed"}


@pytest.mark.parametrize("jobs_host", BOTH, indirect=True)
def test_a_hostile_job_name_is_one_field_of_one_part(jobs_host, tmp_path):
    hostile = CAPTURED_JOBS[jobs_host.version[:5]]["hostile"]
    answer = check_output("job", ask_job(jobs_host, tmp_path, hostile))
    (part,) = answer["parts"]
    name = (FIXTURES / "hostile-job-name").read_text()
    # slurmdbd keeps 255 characters and turns " into a backquote
    assert part["name"] in (name, name[:255].replace('"', "`"))
    assert part["user"] == "labuser" and part["state"] == "completed"


@pytest.mark.parametrize("jobs_host", [("24.11", True)], indirect=True)
def test_a_job_is_its_owners_or_an_admins_and_an_unknown_one_is_not_found(jobs_host, tmp_path):
    gpu = CAPTURED_JOBS["24.11"]["gpu"]
    refused = ask_job(jobs_host, tmp_path, gpu, "alice")
    assert (
        refused["error"]["code"] == "forbidden" and "another user's" in refused["error"]["message"]
    )
    assert check_output("job", ask_job(jobs_host, tmp_path, gpu, "ops"))["parts"]
    missing = ask_job(jobs_host, tmp_path, 999999)
    assert missing["error"]["code"] == "not_found"
    assert ask_job(jobs_host, tmp_path, gpu, None)["error"]["code"] == "forbidden"


@pytest.mark.parametrize("jobs_host", [("24.11", False)], indirect=True)
def test_without_accounting_a_job_is_what_slurmctld_holds_and_says_so(jobs_host, tmp_path):
    failed = CAPTURED_JOBS["24.11"]["failed"]
    answer = check_output("job", ask_job(jobs_host, tmp_path, failed))
    assert (answer["source"], answer["accounting"]) == ("slurmctld", False)
    assert [p["exit_code"] for p in answer["parts"]] == [3]
    jobs_host.held.discard(failed)
    gone = ask_job(jobs_host, tmp_path, failed)
    assert gone["error"]["code"] == "not_found" and "in slurmctld" in gone["error"]["message"]


def test_each_domain_declares_the_tasks_its_module_handles_and_the_manifest_lists_them():
    """A typed task lives in one place: its handler in slurm_tasks/<domain>.py, its manifest
    entry beside it in <domain>.yaml; the manifest's list is what scripts/manifest_tasks.py
    copies from those, in DOMAINS' order."""
    package = ROOT / "roles/slurm_common/files/slurm_tasks"
    domains = importlib.import_module("slurm_tasks").DOMAINS
    assert {p.stem for p in package.glob("*.py")} - {"__init__", "core"} == set(domains)
    assert {p.stem for p in package.glob("*.yaml")} == set(domains)
    declared = []
    for name in domains:
        handled = importlib.import_module(f"slurm_tasks.{name}").TASKS
        entries = yaml.safe_load((package / f"{name}.yaml").read_text())
        assert [entry["name"] for entry in entries] == list(handled), name
        declared += entries
    assert MANIFEST["versions"][-1]["tasks"] == declared
    assert task.TASKS.keys() == {entry["name"] for entry in declared}
    assert sorted(task.AUDITED) == ["cancel", "job_output", "submit"]
    check = ROOT / "scripts" / "manifest_tasks.py"
    done = subprocess.run([sys.executable, str(check), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
