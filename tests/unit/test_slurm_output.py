"""slurm_common's Slurm readers against output captured from real 22.05 and 24.11 daemons
(tests/fixtures/slurm/capture.sh: a completed and a failed job, one running on the GPU, one
pending for it under a hostile name, the only worker, with one GPU device file, draining with
a reason of two lines)."""

import json
import re
import time
from pathlib import Path

import pytest
from conftest import ROOT
from slurm_readers.accounting import slurm_accounting
from slurm_readers.commands import (
    ENDED_BEFORE,
    ENDED_STATES,
    JOB_FIELDS,
    SEPARATOR_MARK,
    TEXT_COMMANDS,
    slurm_command,
    slurm_command_forms,
    text_command,
    text_rows,
)
from slurm_readers.hosts import (
    disk_usage,
    disk_usage_command,
    du_sizes,
    outside_of,
    slurm_unit_states,
    slurm_unit_states_command,
)
from slurm_readers.jobs import _minutes, slurm_history, slurm_jobs, slurm_tres_gpus
from slurm_readers.nodes import slurm_gres_gpus, slurm_node_hardware, slurm_nodes, slurm_taking_jobs
from slurm_readers.scheduler import FIGURES, slurm_scheduler
from slurm_readers.shares import slurm_shares
from slurm_readers.versions import slurm_reads_state_of, slurm_version

FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
VERSIONS = ["22.05", "24.11", "26.05"]
# Captured on a fresh lab (ct-, cb-), whose node names, memory and job ids (capture.sh's jobs are
# its first) some assertions name; 26.05's on a 1.1.0 lab upgraded to 2.0.0 (cap-, its jobs
# after the deploy's and the upgrade's readiness jobs).
FRESH_LAB_VERSIONS = ["22.05", "24.11"]
# What any cluster user may name a job (capture.sh submits the pending job with it): a `|`, a
# newline and then a line in the old `|` layout, a tab, `%`, quotes; 1,000 characters.
HOSTILE_NAME = (FIXTURES / "hostile-job-name").read_text()
REASON = "capture: draining | with a bar\nb22-w01|idle|2/0/0/2"


def _read(version: str, name: str) -> str:
    return (FIXTURES / version / name).read_text()


def _nodes_json(version: str) -> str:
    # 24.11's per-node records come from scontrol; 22.05 has no scontrol --json.
    name = (
        "scontrol-nodes.json"
        if (FIXTURES / version / "scontrol-nodes.json").exists()
        else "sinfo.json"
    )
    return _read(version, name)


@pytest.mark.parametrize("version", VERSIONS)
def test_the_fixtures_are_what_capture_sh_records(version):
    assert _read(version, "VERSION").startswith(version)
    for name in ("sinfo.json", "squeue.json", "sacct.json"):
        assert json.loads(_read(version, name))["meta"]


@pytest.mark.parametrize("version", FRESH_LAB_VERSIONS)
def test_slurmd_C_gives_the_node_line_numbers(version):
    hardware = slurm_node_hardware(_read(version, "slurmd-C.txt"))
    assert hardware == {
        "name": ("cb" if version == "22.05" else "ct") + "-w01",
        "cpus": 2,
        "boards": 1,
        "sockets_per_board": 1,
        "cores_per_socket": 2,
        "threads_per_core": 1,
        "real_memory": 24151,
    }


def test_slurmd_C_garbage_is_an_error_naming_the_output():
    with pytest.raises(ValueError, match="slurmd -C"):
        slurm_node_hardware("slurmd: error: something\n")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_draining_node_reads_the_same_from_json_and_text(version):
    (from_json,) = slurm_nodes(_nodes_json(version))
    (from_text,) = slurm_nodes(_read(version, "nodes.txt"))
    assert from_json["state"] == "draining"
    assert from_json["flags"] == ["drain"]
    assert from_json["reason"] == REASON
    assert from_json["reason_set_by"] == "root"
    assert from_json["cpus"] == from_json["alloc_cpus"] == 2
    assert from_json["partitions"] == ["batch"]
    assert from_json["gpus"] == 1 and from_json["gres"] == "gpu:1"
    assert from_json["version"] == _read(version, "VERSION").strip()
    # who set the reason and slurmd's version are the JSON's alone
    text_lacks = {"version": from_json["version"], "reason_set_by": "root"}
    assert {**from_text, **text_lacks} == from_json


def test_a_cloud_node_nothing_resumed_reads_powered_down_from_json():
    """24.11's scontrol --json for a `State=CLOUD` node before any resume (bench/cloud_nodes.py
    saw it as `idle~` in sinfo): off, so neither idle nor taking jobs."""
    answer = json.loads(_read("24.11", "scontrol-nodes.json"))
    answer["nodes"][0]["state"] = ["IDLE", "CLOUD", "POWERED_DOWN"]
    (node,) = slurm_nodes(json.dumps(answer))
    assert (node["state"], node["base_state"]) == ("powered_down", "idle")
    assert node["flags"] == ["cloud", "powered_down"]
    assert slurm_taking_jobs([node]) == []


def test_24_11_sinfo_json_groups_nodes_so_nodes_come_from_scontrol():
    assert slurm_command("nodes", "24.11.5")["argv"] == ["scontrol", "show", "nodes", "--json"]
    assert slurm_command("nodes", "22.05.8")["argv"] == ["sinfo", "--json"]
    assert "nodes" not in json.loads(_read("24.11", "sinfo.json"))


@pytest.mark.parametrize("version", VERSIONS)
def test_a_read_before_the_version_is_known_holds_the_form_the_version_picks(version):
    # status reads slurmctld's version and the node listing in one round trip
    forms = slurm_command_forms("nodes", "controller_nodes_")
    picked = slurm_command("nodes", f"{version}.5")
    assert forms["controller_nodes_" + picked["argv"][0]] == picked
    assert len(forms) == 2


@pytest.mark.parametrize("version", FRESH_LAB_VERSIONS)
def test_the_queue_reads_the_same_from_json_and_text(version, monkeypatch):
    # squeue's text prints local time; the capture's hosts run in UTC.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    from_json = slurm_jobs(_read(version, "squeue.json"))
    from_text = slurm_jobs(_read(version, "jobs.txt"))
    # squeue --json still lists ended jobs; the readers keep the queue only, like squeue's text.
    assert [(j["job_id"], j["state"]) for j in from_json] == [("5", "RUNNING"), ("6", "PENDING")]
    # The text gives the reason's description, JSON its code.
    assert [{**j, "reason": None} for j in from_json] == [{**j, "reason": None} for j in from_text]
    running, pending = from_json
    assert pending["reason"] == "Resources"
    assert running["node_list"] == running["node_list"].split("-")[0] + "-w01"
    # the GPU the running job holds (asked per node) and the one the pending job asks for
    # (per job); the limit in minutes, none for unlimited; a `|` in a name is the name's
    assert (running["gpus"], running["cpus"], running["time_limit"]) == (1, 2, 120)
    assert (pending["gpus"], pending["time_limit"], pending["start_time"]) == (1, None, None)
    assert pending["name"] == HOSTILE_NAME and running["name"] == "long"
    assert running["account"] == pending["account"] == "default"
    assert 0 <= running["start_time"] - running["submit_time"] < 60


@pytest.mark.parametrize(
    ("tres", "gpus"),
    [
        ("", 0),
        (None, 0),
        ("cpu=2,node=1,billing=2", 0),
        ("cpu=2,node=1,billing=2,gres/gpu=1", 1),
        ("cpu=8,gres/gpu=4,gres/gpu:h200=4", 4),
        ("cpu=8,gres/gpu:a100=2,gres/gpu:h200=1", 3),
    ],
)
def test_gpus_of_a_job_come_from_its_tres(tres, gpus):
    assert slurm_tres_gpus(tres) == gpus


@pytest.mark.parametrize(
    ("limit", "minutes"),
    [("5:00", 5), ("2:00:00", 120), ("1-00:00:00", 1440), ("30", 30), ("0:30", 1),
     ("UNLIMITED", None), ("INVALID", None), ("", None)],
)  # fmt: skip
def test_a_time_limit_as_squeue_prints_it_is_read_in_minutes(limit, minutes):
    assert _minutes(limit) == minutes


@pytest.mark.parametrize("version", FRESH_LAB_VERSIONS)
def test_accounting_records_jobs_and_steps(version):
    records = {r["id"]: r for r in slurm_accounting(_read(version, "accounting.txt"))}
    assert records["1.0"]["state"] == "COMPLETED" and records["1.0"]["nodes"] == 1
    assert records["1.0"]["user"] == "labuser"  # the job's user, which sacct prints once
    assert records["4"]["state"] == "FAILED" and records["4"]["exit_code"] == "3:0"
    assert records["5"]["state"] == "RUNNING"
    assert records["6"]["state"] == "PENDING" and records["6"]["node_list"] is None


def test_24_11_accounting_reads_the_same_from_json_and_text():
    from_json = slurm_accounting(_read("24.11", "sacct.json"))
    from_text = slurm_accounting(_read("24.11", "accounting.txt"))
    assert from_json == from_text


def test_22_05_accounting_uses_text_because_its_json_exit_codes_are_wrong():
    assert slurm_command("accounting", "22.05.8", job_ids=[4])["argv"][:2] == ["sacct", "-n"]
    assert slurm_command("accounting", "24.11.5", job_ids=[4, 5])["argv"][-2:] == ["-j", "4,5"]
    failed = [r for r in slurm_accounting(_read("22.05", "sacct.json")) if r["id"] == "4"]
    assert failed[0]["state"] == "FAILED" and failed[0]["exit_code"] == "0:0"  # the defect


def test_text_fallbacks_are_what_the_readers_expect():
    for what in ("nodes", "jobs", "accounting"):
        command = slurm_command(what, "24.11.5", json=False)
        separator = _separator(_shown(command))
        expected = [arg.replace(SEPARATOR_MARK, separator) for arg in TEXT_COMMANDS[what]]
        # squeue's format moved from the command line to its variable
        if what == "jobs":
            assert command["environment"] == {"SQUEUE_FORMAT2": expected[4]}
            del expected[3:5]
        assert command["argv"] == expected
    with pytest.raises(ValueError, match="unknown Slurm query"):
        slurm_command("licenses", "24.11.5")


@pytest.mark.parametrize(
    "gres, gpus",
    [
        ("", 0),
        ("(null)", 0),
        ("gpu:h200:8(S:0-1)", 8),
        ("gpu:4", 4),
        ("gpu:a100:2(S:0),gpu:h200:1(S:1),nic:2", 3),
    ],
)
def test_gpus_in_a_gres_string(gres, gpus):
    assert slurm_gres_gpus(gres) == gpus


def test_a_slurm_error_in_json_is_not_read_as_an_empty_cluster():
    answer = json.dumps({"errors": [{"error": "Unable to contact slurm controller"}], "nodes": []})
    with pytest.raises(ValueError, match="Unable to contact"):
        slurm_nodes(answer)


def _shown(command: dict) -> str:
    """A command's argv and what it adds to the environment, as one text."""
    return " ".join([*command["argv"], *command["environment"].values()])


def _separator(text: str) -> str:
    found = re.findall(r"\|[0-9a-f]{24}\|", text)
    assert found, text
    return found[0]


def _answer(rows: list[list[str]], separator: str) -> str:
    return "".join(separator.join(row) + "\n" for row in rows)


def test_every_text_query_has_a_separator_of_its_own():
    made = {_separator(_shown(text_command("jobs"))) for _ in range(50)}
    assert len(made) == 50
    for what in TEXT_COMMANDS:
        command = text_command(what)
        assert SEPARATOR_MARK not in _shown(command)
        assert len(set(re.findall(r"\|[0-9a-f]{24}\|", _shown(command)))) == 1, command


# the fields of sacct's text queries that a job's user writes (a job's name, its paths)
USER_MADE_SACCT_FIELDS = {"JobName", "WorkDir", "StdOut", "StdErr", "Comment"}
# what sinfo's text query prints of a node: nothing a cluster user writes (Slurm's, the
# configuration's, a reason root or an operator gave)
SLURM_MADE_NODE_FIELDS = {"%N", "%T", "%C", "%m", "%G", "%P", "%E"}


@pytest.mark.parametrize("what", sorted(TEXT_COMMANDS))
def test_no_text_query_shows_other_users_a_separator_they_could_write(what):
    """Issue 65 (4): another user of the host reads every command line in /proc. squeue's
    separator is in its environment only; sinfo's node rows hold nothing a user writes; sacct's
    is on its command line (it has no variable for it), so a sacct query that carries a field
    its user writes lists only jobs that ended before it started, whose rows no one can change
    any more."""
    for version in ("22.05.8", "24.11.5"):
        command = slurm_command(what, version, json=False, job_ids=[7])
        argv, separator = command["argv"], _separator(_shown(command))
        if argv[0] == "squeue":
            assert separator not in " ".join(argv) and separator in _shown(command)
            continue
        if argv[0] == "sinfo":
            assert set(argv[argv.index("-o") + 1].split(separator)) <= SLURM_MADE_NODE_FIELDS
            continue
        assert argv[0] == "sacct" and separator in " ".join(argv)
        fields = set(argv[argv.index("-o") + 1].split(","))
        if fields & USER_MADE_SACCT_FIELDS:
            states = argv[argv.index("-s") + 1].split(",")
            assert set(states) == set(ENDED_STATES) and "PENDING" not in states
            assert argv[argv.index("-E") + 1] == ENDED_BEFORE


def test_a_malformed_text_line_is_an_error():
    with pytest.raises(ValueError, match="sinfo answer, without its separator"):
        slurm_nodes("w01|idle\n")
    separator = _separator(_shown(text_command("nodes")))
    with pytest.raises(ValueError, match="sinfo answer: 2 fields"):
        slurm_nodes(f"w01{separator}idle\n")


@pytest.mark.parametrize("version", VERSIONS)
def test_no_job_name_or_reason_changes_what_is_read(version, monkeypatch):
    """Issue 44 (4): whatever a user names a job, even a forged record in the old layout, in
    another separator or in one of the same shape, the queue holds the jobs Slurm listed."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    captured = _read(version, "jobs.txt")
    separator = _separator(captured)
    (running, pending) = slurm_jobs(captured)
    other = _separator(_shown(text_command("jobs")))
    template = captured.split(separator)
    names = [
        "x\n" + "|".join(["424242", "RUNNING", "bob"] + ["1"] * 11),
        "x\n" + other.join(["424242", "RUNNING", "bob"] + ["1"] * 11),
        "\n\n\t%j%%u \"'\\" + separator[:-1],  # the separator less its last character
        "ends with a newline\n",
        "",
    ]
    for name in names:
        rows = [[*record[:-1], name] for record in text_rows(captured, "jobs")]
        read = slurm_jobs(_answer(rows, separator))
        assert [(j["job_id"], j["user"], j["name"]) for j in read] == [
            (running["job_id"], running["user"], name),
            (pending["job_id"], pending["user"], name),
        ], name
    assert len(template) == 2 * (len(JOB_FIELDS) - 1) + 1
    nodes = text_rows(_read(version, "nodes.txt"), "nodes")
    nodes = [[*row[:-1], "ok\nw99|idle|2/0/0/2|1|(null)|batch|none"] for row in nodes]
    node_separator = _separator(_read(version, "nodes.txt"))
    assert [n["name"] for n in slurm_nodes(_answer(nodes, node_separator))] == [nodes[0][0]]


def test_the_readers_need_only_the_standard_library(tmp_path: Path):
    readers = sorted((ROOT / "roles/slurm_common/files/slurm_readers").glob("*.py"))
    assert {r.stem for r in readers} >= {"versions", "commands", "nodes", "jobs", "accounting"}
    imports = {
        line.split()[1].split(".")[0]
        for reader in readers
        for line in reader.read_text().splitlines()
        if line.startswith(("import ", "from "))
    }
    # "": the package's own modules (relative imports)
    assert imports <= {"", "__future__", "datetime", "json", "re", "secrets", "time", "typing"}


def test_a_narrowed_nodes_query_is_the_text_form_in_every_version():
    """22.05's `sinfo --json -n w1` lists every node (seen in the lab): narrowing is text."""
    for version in ("22.05.8", "24.11.5"):
        assert slurm_command("nodes", version, nodes=["w1", "w2"])["argv"][:3] == [
            "sinfo",
            "-n",
            "w1,w2",
        ]


def test_a_jobs_query_on_nodes_is_the_text_form_narrowed_by_w():
    argv = slurm_command("jobs", "24.11.5", nodes=["w1"])["argv"]
    assert argv[:3] == ["squeue", "-w", "w1"] and "--json" not in argv
    assert slurm_command("jobs", "24.11.5")["argv"] == ["squeue", "--json"]


def test_unit_states_name_what_is_not_installed():
    # systemctl show's answer for munge running, slurmd stopped, slurmdbd failed, no slurmctld
    shown = "\n\n".join(
        f"Id={unit}.service\nLoadState={load}\nActiveState={active}\nSubState={sub}"
        for unit, load, active, sub in [
            ("munge", "loaded", "active", "running"),
            ("slurmd", "loaded", "inactive", "dead"),
            ("slurmdbd", "loaded", "failed", "failed"),
            ("slurmctld", "not-found", "inactive", "dead"),
        ]
    )
    units = ["munge", "slurmd", "slurmdbd", "slurmctld"]
    assert slurm_unit_states_command(units)[-4:] == [f"{u}.service" for u in units]
    assert slurm_unit_states(shown + "\n", units) == {
        "munge": "running",
        "slurmd": "stopped",
        "slurmdbd": "failed",
        "slurmctld": "absent",
    }
    assert slurm_unit_states("", ["munge"]) == {"munge": "absent"}


def test_taking_jobs_leaves_out_drained_and_silent_nodes():
    nodes = [
        {"name": n, "state": s, "base_state": b, "flags": f}
        for n, s, b, f in [
            ("a", "idle", "idle", []),
            ("b", "drained", "idle", ["drain"]),
            ("c", "idle", "idle", ["not_responding"]),
            ("d", "mixed", "mixed", []),
            ("e", "down", "down", []),
            ("f", "powered_down", "idle", ["cloud", "powered_down"]),
        ]
    ]
    assert slurm_taking_jobs(nodes) == ["a", "d"]
    assert slurm_taking_jobs(nodes, drain_ok=True) == ["a", "b", "d"]


@pytest.mark.parametrize(
    "word, base, flags, state",
    [
        ("idle", "idle", [], "idle"),
        ("idle*", "idle", ["not_responding"], "idle"),
        ("drained*", "idle", ["drain", "not_responding"], "drained"),
        ("down*", "down", ["not_responding"], "down"),
        ("mixed+drain", "mixed", ["drain"], "draining"),
        # power saving, and a CLOUD node nothing resumed: off, not idle
        ("idle~", "idle", ["powered_down"], "powered_down"),
        ("allocated#", "allocated", ["powering_up"], "powering_up"),
        ("idle%", "idle", ["powering_down"], "powering_down"),
        ("drained~", "idle", ["drain", "powered_down"], "drained"),
        ("idle@", "idle", ["reboot_requested"], "idle"),
    ],
)
def test_sinfo_state_words(word, base, flags, state):
    separator = _separator(_shown(text_command("nodes")))
    (node,) = slurm_nodes(
        separator.join(["w1", word, "0/2/0/2", "1000", "(null)", "batch*", "none"]) + "\n"
    )
    assert (node["base_state"], node["flags"], node["state"]) == (base, flags, state)


def test_du_sizes_keep_paths_with_tabs_and_spaces():
    output = "4096\t/etc/slurm\n123456\t/home/alice smith\n"
    assert du_sizes(output) == [
        {"path": "/etc/slurm", "bytes": 4096},
        {"path": "/home/alice smith", "bytes": 123456},
    ]


def test_a_path_inside_one_measured_already_is_not_measured_again():
    measured = [{"path": "/var/lib/prometheus", "bytes": 10}, {"path": "/etc/ood/", "bytes": 1}]
    paths = ["/var/lib/prometheus/node-exporter", "/var/lib/prometheus-x", "/etc/ood", "/etc/x"]
    assert outside_of(paths, measured) == ["/var/lib/prometheus-x", "/etc/x"]
    assert outside_of(paths, []) == paths


@pytest.mark.parametrize(
    "output, version",
    [("slurm-wlm 22.05.8", "22.05.8"), ("slurm 24.11.5", "24.11.5"), ("slurm 23.02", "23.02")],
)
def test_versions_read_as_slurm_prints_them(output, version):
    assert slurm_version(output) == version


def test_26_05s_history_holds_the_jobs_that_ended_alone(monkeypatch):
    """sacct 26.05 applies the history's ended states (-s) to the jobs still in the queue too:
    24.11 listed the running and the pending job beside the ended ones, 26.05 does not."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    read = slurm_history(_read("26.05", "history.txt"))
    by_name = {j["name"]: j for j in read}
    assert "424242" not in {j["job_id"] for j in read}  # nothing forged
    assert by_name["ok"]["state"] == "COMPLETED" and by_name["bad"]["state"] == "FAILED"
    assert by_name["ok"]["node_list"] == "cap-w01"
    assert {j["state"] for j in read} <= {"COMPLETED", "FAILED", "CANCELLED"}


@pytest.mark.parametrize("version", FRESH_LAB_VERSIONS)
def test_history_reads_the_jobs_sacct_recorded_as_the_queue_reads_them(version, monkeypatch):
    """sacct -X (the Jobs tab's completed and failed views) in the records slurm_jobs gives."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    read = slurm_history(_read(version, "history.txt"))
    queue = {j["name"]: j for j in slurm_jobs(_read(version, "jobs.txt"))}
    history = {j["job_id"]: j for j in read}
    assert "424242" not in history and len(history) == len(read)  # nothing forged
    by_name = {j["name"]: j for j in read}
    assert by_name["ok"]["state"] == "COMPLETED" and by_name["bad"]["state"] == "FAILED"
    assert by_name["ok"]["elapsed"] == 0 and by_name["ok"]["node_list"].endswith("-w01")
    running, pending = history[queue["long"]["job_id"]], history[queue[HOSTILE_NAME]["job_id"]]
    # slurmdbd keeps a name's first 255 characters less the quotes, which it turns to `
    assert pending["name"] == HOSTILE_NAME[:255].replace('"', "`")
    assert (running["state"], running["gpus"], running["cpus"], running["time_limit"]) == (
        "RUNNING", 1, 2, 120
    )  # fmt: skip
    # the same job as squeue saw it, field by field where both record it
    for field in ("job_id", "user", "account", "partition", "nodes", "submit_time", "start_time"):
        assert running[field] == queue["long"][field], field
    # a pending job holds nothing yet (AllocTRES is empty) and its limit is the partition's
    assert (pending["state"], pending["gpus"], pending["start_time"]) == ("PENDING", 0, None)
    assert pending["node_list"] is None and pending["time_limit"] is None


def test_disk_usage_reads_dfs_answer_whatever_the_mount_point_is_called():
    argv = disk_usage_command(["/var/lib/mysql", "/gone"])
    assert argv[0] == "df" and argv[-2:] == ["/var/lib/mysql", "/gone"] and "--" in argv
    answer = (
        "   1B-blocks        Used       Avail Use% File           Mounted on\n"
        "107374182400 97710505984  9663676416  91% /var/lib/mysql /srv/data disk\n"
    )  # /gone: df names it on stderr only
    assert disk_usage(answer) == [
        {
            "path": "/var/lib/mysql",
            "mount": "/srv/data disk",
            "size_bytes": 107374182400,
            "used_bytes": 97710505984,
            "percent": 91,
        }
    ]
    assert disk_usage("") == []


@pytest.mark.parametrize(
    ("reader", "writer", "reads"),
    [
        ("24.11.5", "24.11.2", True),
        ("24.11.5", "24.05.1", True),
        ("24.11.5", "23.02.7", True),  # three back from 24.11 (the six-month cycle)
        ("24.11.5", "22.05.8", False),  # Debian 12's state on Debian 13's controller
        ("23.11.1", "22.05.8", True),
        ("23.11.1", "21.08.8", False),  # two back before 24.11
        ("22.05.8", "24.11.5", False),  # never newer than the reader
        ("25.11.0", "24.05.4", True),
        ("26.05.0", "24.05.4", False),
        ("24.11.5", "24.08.1", False),  # not a release
        ("24.11.5", "unknown", False),
    ],
)
def test_a_controller_takes_over_state_of_its_release_window(reader, writer, reads):
    assert slurm_reads_state_of(reader, writer) is reads


@pytest.mark.parametrize("version", VERSIONS)
def test_sdiag_gives_both_loops_figures_apart(version):
    """The capture: jobs waiting for a busy node, after the backfill loop looked at them.
    `Last cycle` and `Mean cycle` are printed by both loops: each is read in its section."""
    text = _read(version, "sdiag.txt")
    figures = slurm_scheduler(text)
    assert set(figures) == set(FIGURES)
    assert figures["threads"] >= 1 and figures["queue_size"] == 0
    assert figures["backfill_cycles"] >= 1 and figures["backfill_depth_mean"] >= 1
    main = text.split("Main schedule statistics")[1].split("\n\n")[0]
    backfill = text.split("Backfilling stats")[1].split("\n\n")[0]
    for name, section in (("last_cycle", main), ("backfill_last_cycle", backfill)):
        assert "Last cycle:" in section
        assert figures[name] == float(re.search(r"Last cycle:\s+(\d+)", section).group(1))


@pytest.mark.parametrize("version", VERSIONS)
def test_sshare_gives_each_accounts_standing_as_any_user_reads_it(version):
    """The capture (capture.sh): team-a, 3 shares of 5, ran the only job; default, 1 share, ran
    none. From 23.11 Slurm's default priority/multifactor uses Fair Tree, which gives accounts
    a Level FS and no factor; 22.05's default priority/basic computes no fair share at all.
    User rows are left out."""
    accounts = {row["account"]: row for row in slurm_shares(_read(version, "sshare.txt"))}
    assert set(accounts) == {"root", "default", "team-a"}
    assert all(row["fairshare"] is None for row in accounts.values())
    if version == "22.05":
        # zeros that mean nothing are no figure, not 0
        assert all(row["level_fs"] is None for row in accounts.values())
        return
    assert accounts["root"] == {"account": "root", "fairshare": None, "level_fs": None}
    if version == "24.11":  # a fresh lab: no usage but team-a's job
        assert accounts["team-a"]["level_fs"] == pytest.approx(0.6)
        assert accounts["default"]["level_fs"] == float("inf")
    else:  # 26.05: the lab upgraded from 24.11, with its jobs' usage on both accounts
        assert 0 < accounts["team-a"]["level_fs"] < accounts["default"]["level_fs"] < 10


def test_sshare_under_classic_fair_share_gives_the_accounts_factor():
    answer = "root||||\n default|||0.500000|\n  default|alice|1.0|0.250000|\n bad||0.1||n/a\n"
    assert slurm_shares(answer) == [
        {"account": "root", "fairshare": None, "level_fs": None},
        {"account": "default", "fairshare": None, "level_fs": None},
        {"account": "bad", "fairshare": None, "level_fs": None},
    ]
    answer = " default||0.500000|0.400000|\n"
    assert slurm_shares(answer) == [{"account": "default", "fairshare": 0.4, "level_fs": None}]


def test_a_loop_that_never_ran_leaves_its_mean_out():
    text = _read("24.11", "sdiag.txt")
    before = re.sub(r"\tMean cycle: \d+\n(?=(.*\n)*?\tLast depth cycle)", "", text)
    before = before.replace("\tDepth Mean: 2\n", "")
    figures = slurm_scheduler(before)
    assert "backfill_mean_cycle" not in figures and "backfill_depth_mean" not in figures
    assert figures["mean_cycle"] == slurm_scheduler(text)["mean_cycle"]
