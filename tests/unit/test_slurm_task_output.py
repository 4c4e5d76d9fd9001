"""The typed tasks `job_output` and `usage` (issue 49) against the Slurm answers captured from
real 22.05 and 24.11 daemons: the output read as the job's user, where it is, only the file
Slurm recorded; usage per day, account and user as the allocations' TRES times their seconds."""

import json
import os
import pwd
import stat
import tempfile
import time
from pathlib import Path

import pytest
import slurm_app_task
from slurm_readers.commands import slurm_command, text_rows
from slurm_readers.usage import DAY, slurm_usage
from slurm_tasks import core
from slurm_tasks import output as output_task
from test_slurm_task import (  # noqa: F401  (fixtures)
    ADMIN,
    ALICE,
    BOTH,
    CAPTURED_JOBS,
    LABUSER,
    SLURM_SEPARATOR,
    ask,
    check_output,
    host,
    jobs_host,
)

NOBODY = pwd.getpwnam("nobody")
# The worker of capture-job.sh's lab, by version.
CAPTURED_WORKER = {"22.05": "jb22-w01", "24.11": "jb-w01"}


@pytest.fixture
def node(monkeypatch, tmp_path, jobs_host):  # noqa: F811
    """The captured lab's worker (its slurmd's -N, from slurm_worker's options file); the file
    reads recorded instead of made (read_tail_as is tested alone below)."""
    options = tmp_path / "slurmd"
    worker = CAPTURED_WORKER[jobs_host.version[:5]]
    options.write_text(f'SLURMD_OPTIONS="--conf-server 10.0.0.2:6817 -N {worker}"\n')
    monkeypatch.setattr(output_task, "SLURMD_OPTIONS", options)
    reads: list[tuple[str, str, int]] = []

    def read(user: str, path: str, limit: int) -> dict:
        reads.append((user, path, limit))
        return {"size": 70000, "start": 70000 - limit, "content": "tail\n", "cut": True}

    monkeypatch.setattr(output_task, "read_tail_as", read)
    jobs_host.reads = reads
    return jobs_host


def ask_output(cluster, tmp_path, user="labuser", **given) -> dict:
    return ask(cluster, tmp_path, "job_output", given, user)


@pytest.mark.parametrize("jobs_host", BOTH, indirect=True)
def test_the_output_is_the_file_slurm_recorded_read_as_its_owner(node, tmp_path):
    ids = CAPTURED_JOBS[node.version[:5]]
    answer = ask_output(node, tmp_path, job_id=ids["failed"], stream="stderr", tail_kib=2)
    output = check_output("job_output", answer)
    assert node.reads == [("labuser", f"/home/labuser/err-{ids['failed']:03d}.txt", 2048)]
    assert (output["read_as"], output["truncated"], output["content"]) == (
        "labuser",
        True,
        "tail\n",
    )
    assert answer["audit"]["task"] == "job_output" and answer["audit"]["outcome"] == "ok"
    # an admin reads another user's output, as that user; the other users are refused
    admin = ask_output(node, tmp_path, user="ops", job_id=ids["failed"])
    assert check_output("job_output", admin)["read_as"] == "labuser"
    refused = ask_output(node, tmp_path, user="alice", job_id=ids["failed"])
    assert refused["error"]["code"] == "forbidden" and len(node.reads) == 2


@pytest.mark.parametrize("jobs_host", [("24.11", True)], indirect=True)
def test_an_arrays_task_is_named_and_a_het_jobs_first_component_runs_the_script(node, tmp_path):
    array = CAPTURED_JOBS["24.11"]["array"]
    unnamed = ask_output(node, tmp_path, job_id=array)
    assert (
        unnamed["error"]["code"] == "invalid_input"
        and "array_task_id" in unnamed["error"]["message"]
    )
    named = check_output("job_output", ask_output(node, tmp_path, job_id=array, array_task_id=2))
    assert named["part"] == f"{array}_2" and named["path"] == f"/home/labuser/slurm-{array}_2.out"
    missing = ask_output(node, tmp_path, job_id=array, array_task_id=9)
    assert missing["error"]["code"] == "not_found"


@pytest.mark.parametrize("jobs_host", [("24.11", True)], indirect=True)
def test_output_on_another_nodes_disk_is_not_read_here_but_on_the_platforms_storage_it_is(
    node, tmp_path, monkeypatch
):
    gpu = CAPTURED_JOBS["24.11"]["gpu"]
    elsewhere = tmp_path / "other"
    elsewhere.write_text('SLURMD_OPTIONS="-N cap-w09"\n')
    monkeypatch.setattr(output_task, "SLURMD_OPTIONS", elsewhere)
    refused = ask_output(node, tmp_path, job_id=gpu)
    assert refused["error"]["code"] == "not_found" and "own disk" in refused["error"]["message"]
    assert node.reads == []
    shared = node.config(tmp_path)
    shared["storage_mount"] = "/home"
    schemas = {"job_output": {"input_schema": {"type": "object"}}}
    raw = json.dumps({"task": "job_output", "user": "labuser", "input": {"job_id": gpu}})
    answer = slurm_app_task.answer_for(raw, shared, schemas)
    assert answer["status"] == "ok" and answer["output"]["read_on"] == "cap-w09"
    # a path that only looks as if it were on the mount is on the batch host's disk
    shared["storage_mount"] = "/workspace"
    node.squeue = node.squeue.replace("/home/labuser", "/workspace/../home/labuser")
    dotted = slurm_app_task.answer_for(raw, shared, schemas)
    assert dotted["error"]["code"] == "not_found" and "own disk" in dotted["error"]["message"]


@pytest.mark.parametrize("jobs_host", [("24.11", True)], indirect=True)
def test_no_path_comes_from_the_input(node, tmp_path):
    gpu = CAPTURED_JOBS["24.11"]["gpu"]
    refused = ask_output(node, tmp_path, job_id=gpu, path="/etc/shadow")
    assert refused["error"]["code"] == "invalid_input" and node.reads == []
    too_much = ask_output(node, tmp_path, job_id=gpu, tail_kib=1025)
    assert too_much["error"]["code"] == "invalid_input"


@pytest.fixture
def readable_dir():
    if os.geteuid() != 0:
        pytest.skip("reading as another user needs root")
    folder = Path(tempfile.mkdtemp(prefix="slurm-app-output-"))
    folder.chmod(0o755)
    yield folder
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


def test_the_tail_is_read_as_the_user_and_never_more(readable_dir):
    mine = readable_dir / "slurm-7.out"
    mine.write_bytes(b"x" * 5000 + b"|\n\x1b[31mred\xff\xfe end\n")
    os.chown(mine, NOBODY.pw_uid, NOBODY.pw_gid)
    mine.chmod(0o600)
    tail = output_task.read_tail_as("nobody", str(mine), 16)
    assert tail == {
        "size": 5017,
        "start": 5001,
        "content": "\n\x1b[31mred\ufffd\ufffd end\n",
        "cut": True,
    }
    whole = output_task.read_tail_as("nobody", str(mine), 1 << 20)
    assert whole["start"] == 0 and not whole["cut"] and whole["size"] == mine.stat().st_size
    roots = readable_dir / "roots.out"
    roots.write_text("secret\n")
    roots.chmod(0o600)
    with pytest.raises(output_task.OutputUnreadable) as refused:
        output_task.read_tail_as("nobody", str(roots), 100)
    assert refused.value.reason == "forbidden"
    with pytest.raises(output_task.OutputUnreadable) as root:
        output_task.read_tail_as("root", str(mine), 100)
    assert root.value.reason == "forbidden"
    fifo = readable_dir / "fifo.out"
    os.mkfifo(fifo)
    os.chown(fifo, NOBODY.pw_uid, NOBODY.pw_gid)
    with pytest.raises(output_task.OutputUnreadable) as pipe:
        output_task.read_tail_as("nobody", str(fifo), 100)
    assert pipe.value.reason == "not_a_file"
    with pytest.raises(output_task.OutputUnreadable) as gone:
        output_task.read_tail_as("nobody", str(readable_dir / "gone.out"), 100)
    assert gone.value.reason == "missing"
    assert stat.S_IMODE(mine.stat().st_mode) == 0o600


def usage_answer(rows: list[tuple]) -> str:
    """Records as sacct prints the `usage` query with SLURM_TIME_FORMAT=%s."""
    separator = "|0123456789abcdef01234567|"
    return "".join(separator.join(str(field) for field in row) + "\n" for row in rows)


START = 1764547200  # 2025-12-01T00:00:00Z


def test_usage_clips_each_allocation_to_the_period_and_to_each_day():
    rows = [
        # two CPUs over midnight: 1 h on day 0, 2 h on day 1
        (1, "alice", "physics", "billing=2,cpu=2,mem=1G,node=1", START + DAY - 3600,
         START + DAY + 7200),
        # began before the period: counts from its start
        (2, "bob", "physics", "cpu=1,gres/gpu:h100=2,gres/gpu=2,node=1", START - 600, START + 600),
        # still running at `now`: counts until now
        (3, "alice", "bio", "cpu=4,gres/gpu=1,node=1", START + DAY + 100, "Unknown"),
        # never started, and one after the period
        (4, "alice", "bio", "cpu=8,node=1", "Unknown", "Unknown"),
        (5, "bob", "bio", "cpu=8,node=1", START + 3 * DAY, START + 3 * DAY + 60),
    ]  # fmt: skip
    now = START + DAY + 1100
    used = slurm_usage(usage_answer(rows), START, START + 2 * DAY, now)
    assert [d["cpu_seconds"] for d in used["days"]] == [2 * 3600 + 600, 2 * 1100 + 4 * 1000]
    assert [d["gpu_seconds"] for d in used["days"]] == [2 * 600, 1000]
    assert used["days"][0]["gpu_seconds_by_type"] == {"h100": 1200}
    assert used["accounts"]["physics"]["alice"]["cpu_seconds"] == 2 * (3600 + 1100)
    assert used["accounts"]["bio"]["alice"] == {
        "cpu_seconds": 4000, "gpu_seconds": 1000, "gpu_seconds_by_type": {},
    }  # fmt: skip
    assert "bob" not in used["accounts"].get("bio", {}) and used["allocations"] == 3


def test_usage_reads_100k_allocations_in_one_pass_of_the_answer(monkeypatch):
    """Not a timing: each record is split once (the reader's cost is linear in the answer)."""
    rows = [(i, f"u{i % 50}", f"a{i % 7}", "cpu=2,gres/gpu=1", START + i, START + i + 60)
            for i in range(100_000)]  # fmt: skip
    split = []
    real = slurm_usage.__globals__["text_rows"]
    monkeypatch.setitem(
        slurm_usage.__globals__, "text_rows", lambda *a: split.append(1) or real(*a)
    )
    used = slurm_usage(usage_answer(rows), START, START + 2 * DAY, START + 2 * DAY)
    assert split == [1] and used["allocations"] == 100_000
    assert sum(d["cpu_seconds"] for d in used["days"]) == 100_000 * 120


@pytest.mark.parametrize("host", ["22.05", "24.11"], indirect=True)
def test_the_usage_task_answers_per_account_user_and_day(host, tmp_path, monkeypatch):  # noqa: F811
    # yesterday's jobs and period: the task counts today's only up to now, so jobs in today's
    # first hour would be cut short whenever the test ran in it
    day = (int(time.time()) // DAY - 1) * DAY
    rows = [
        (7, "alice", "physics", "cpu=2,gres/gpu:a100=1,gres/gpu=1", day + 60, day + 3660),
        (8, "bob", "physics", "cpu=1", day + 60, day + 1860),
    ]
    host.history = usage_answer(rows).replace("|0123456789abcdef01234567|", "{sep}")
    captured = {}

    def sacct(argv, user=None, stdin=None, **options):
        if argv[:3] == ["scontrol", "show", "config"]:
            return host.show_config()
        captured["argv"], captured["options"] = argv, options
        separator = argv[argv.index("-P") + 1].split("=", 1)[1]
        return host.history.replace("{sep}", separator)

    monkeypatch.setattr(core, "slurm", sacct)
    period = {"from": time.strftime("%Y-%m-%d", time.gmtime(day))}
    period["to"] = period["from"]
    whole = check_output("usage", ask(host, tmp_path, "usage", period, None))
    assert captured["options"] == {"environment": {}, "epoch_times": True}
    assert captured["argv"][:2] == ["sacct", "-n"] and "-D" in captured["argv"]
    assert whole["scope"] == "instance" and whole["allocations"] == 2
    (account,) = whole["accounts"]
    assert (account["account"], account["cpu_seconds"], account["gpu_seconds"]) == (
        "physics", 2 * 3600 + 1800, 3600,
    )  # fmt: skip
    assert account["gpu_hours_by_type"] == {"a100": 1.0} and account["cpu_hours"] == 2.5
    assert [d["cpu_hours"] for d in whole["days"]] == [2.5]
    own = check_output("usage", ask(host, tmp_path, "usage", period, "alice"))
    assert own["scope"] == "user" and own["days"] == []
    assert [u["user"] for a in own["accounts"] for u in a["users"]] == ["alice"]
    assert check_output("usage", ask(host, tmp_path, "usage", period, "ops"))["scope"] == "instance"
    backwards = ask(host, tmp_path, "usage", {"from": "2026-02-02", "to": "2026-02-01"}, None)
    assert backwards["error"]["code"] == "invalid_input"
    no_day = ask(host, tmp_path, "usage", {"from": "2026-02-30", "to": "2026-03-01"}, None)
    assert no_day["error"]["code"] == "invalid_input" and "from" in no_day["error"]["message"]
    host.accounting = False
    off = ask(host, tmp_path, "usage", period, None)
    assert off["error"]["code"] == "accounting_off"


def test_the_usage_query_asks_sacct_for_the_period_a_day_wider():
    argv = slurm_command("usage", "24.11.5", period=("2026-11-30T00:00:00", "2026-12-03T00:00:00"))[
        "argv"
    ]
    assert argv[argv.index("-S") + 1] == "2026-11-30T00:00:00"
    assert argv[argv.index("-E") + 1] == "2026-12-03T00:00:00"
    assert [a for a in argv if a in ("-X", "-D")] == ["-X", "-D"] and "-a" in argv
    assert text_rows(usage_answer([(1, "u", "a", "cpu=1", 1, 2)]), "usage") == [
        ["1", "u", "a", "cpu=1", "1", "2"]
    ]
