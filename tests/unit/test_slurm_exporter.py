"""The Slurm exporter against output captured from real 22.05 and 24.11 daemons, and against a
GPU cluster shaped like 24.11's answers (no GPU host here)."""

import copy
import importlib
import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import SLURM_SEPARATOR, slurm_text
from prometheus_client import CollectorRegistry, generate_latest
from slurm_readers.commands import SEPARATOR_MARK, slurm_command
from slurm_readers.jobs import slurm_jobs
from slurm_readers.shares import SHARES_COMMAND

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "slurm"
# On the controller the exporter, its metrics and the readers are installed side by side (the
# conftest puts their folders on the path).
exporter = importlib.import_module("slurm_exporter")
NODE_STATES = importlib.import_module("slurm_metrics.nodes").NODE_STATES
OWNER_SERIES = importlib.import_module("slurm_metrics.accounts").OWNER_SERIES
COMMUNITY_TOTAL_GAUGES = importlib.import_module("slurm_metrics").COMMUNITY_TOTAL_GAUGES
SHARES = " ".join(SHARES_COMMAND)

# The metric names the product spec and the dashboards rely on, and the community exporter's
# (prometheus-slurm-exporter) that public dashboards read.
SPEC_NAMES = [
    *(f"slurm_nodes_{s}" for s in NODE_STATES),
    *(f"slurm_node_{s}" for s in ("cpu_alloc", "cpu_idle", "cpu_other", "cpu_total")),
    *(f"slurm_node_{s}" for s in ("mem_alloc", "mem_total", "gpu_total")),
    *(
        f"slurm_scheduler_{s}"
        for s in (
            "threads",
            "queue_size",
            "dbd_queue_size",
            "last_cycle",
            "mean_cycle",
            "cycle_per_minute",
            "backfill_last_cycle",
            "backfill_mean_cycle",
            "backfill_depth_mean",
            "backfilled_jobs_since_start_total",
            "backfilled_jobs_since_cycle_total",
            "backfilled_heterogeneous_total",
        )
    ),
    *(f"slurm_cpus_{s}" for s in ("alloc", "idle", "total")),
    *(f"slurm_gpus_{s}" for s in ("alloc", "idle", "total", "utilization")),
    *(f"slurm_partition_cpus_{s}" for s in ("allocated", "idle", "other", "total")),
    *(
        f"slurm_queue_{s}"
        for s in ("pending", "pending_dependency", "running", "configuring", "completed", "failed")
    ),
    *(f"slurm_{o}_{s}" for o in ("user", "account", "partition") for s, _ in OWNER_SERIES),
    "slurm_job_wait_seconds_bucket",
]


PARTITION_PARTS = ("allocated", "idle", "other", "total")


def unseparated(argv: list[str], environment: dict[str, str] | None = None) -> str:
    """A command line and what it adds to the environment (a slurm_command's), less its text
    form's separator, which is new at each call."""
    added = [f"{name}={value}" for name, value in sorted((environment or {}).items())]
    return SLURM_SEPARATOR.sub(SEPARATOR_MARK, " ".join([*added, *argv]))


class FakeSlurm:
    """Answers the exporter's commands from files; counts the calls."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], environment: dict[str, str] | None = None) -> str:
        self.calls.append(argv)
        key = unseparated(argv, environment)
        if key not in self.answers:
            raise subprocess.CalledProcessError(1, argv, stderr="unexpected command")
        return self.answers[key]


# What slurmctld still holds of two jobs that ended, in the text jobs form (MinJobAge), with
# `|` where the captured answer's separator goes.
ENDED_JOBS = (
    "3|COMPLETED|labuser|default|batch|1|1|cpu=1,node=1,billing=1|2026-11-27T14:49:10|"
    "2026-11-27T14:49:11|UNLIMITED|w01|None|ok\n"
    "4|FAILED|labuser|default|batch|1|1|cpu=1,node=1,billing=1|2026-11-27T14:49:12|"
    "2026-11-27T14:49:42|UNLIMITED|w01|NonZeroExitCode|bad\n"
)


def captured(version: str, ended: str = ENDED_JOBS) -> FakeSlurm:
    folder = FIXTURES / version
    nodes = (
        ("scontrol show nodes --json", "scontrol-nodes.json")
        if (folder / "scontrol-nodes.json").is_file()
        else ("sinfo --json", "sinfo.json")
    )
    jobs = slurm_command("jobs", json=False, ended=True)
    answer = (folder / "jobs.txt").read_text()
    return FakeSlurm(
        {
            nodes[0]: (folder / nodes[1]).read_text(),
            unseparated(**jobs): answer + slurm_text(ended, like=answer),
            "sdiag": (folder / "sdiag.txt").read_text(),
            SHARES: (folder / "sshare.txt").read_text(),
        }
    )


def scrape(collector) -> dict[str, float]:
    """Every unlabelled sample by name, and labelled ones as name{v1,v2}."""
    samples = {}
    for family in collector.collect():
        for sample in family.samples:
            labels = ",".join(sample.labels.values())
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_captured_clusters_are_counted_as_slurm_saw_them(version):
    """The capture: one worker draining while it runs a job on both CPUs, one job pending;
    two jobs ended and still held."""
    jobs = {"pending": 1, "running": 1, "completed": 1, "failed": 1}
    slurm_version = (FIXTURES / version / "VERSION").read_text().strip()
    samples = scrape(exporter.SlurmCollector(slurm_version, run=captured(version)))
    assert samples["slurm_up"] == 1
    counted = {s: samples[f"slurm_nodes_{s}"] for s in NODE_STATES}
    assert counted == {**dict.fromkeys(NODE_STATES, 0), "drain": 1}
    assert (samples["slurm_cpus_alloc"], samples["slurm_cpus_idle"]) == (2, 0)
    assert samples["slurm_cpus_total"] == 2
    assert (samples["slurm_gpus_alloc"], samples["slurm_gpus_total"]) == (1, 1)
    assert {s: samples[f"slurm_queue_{s}"] for s in jobs} == jobs
    assert samples["slurm_scheduler_threads"] >= 1 and samples["slurm_scheduler_queue_size"] == 0
    name = next(k for k in samples if k.startswith("slurm_node_state{"))
    assert name.endswith(",drain}")
    node = name.split("{")[1].split(",")[0]
    # the running job holds the node's GPU and both CPUs; the pending one asks for a GPU
    status = next(k for k in samples if k.startswith(f"slurm_node_cpu_total{{{node},"))
    assert status.endswith(",draining}")
    per_node = {
        series: samples[f"slurm_node_{series}{{{node},draining}}"]
        for series in ("cpu_alloc", "cpu_idle", "cpu_other", "cpu_total", "gpu_alloc", "gpu_total")
    }
    assert per_node == {
        "cpu_alloc": 2,
        "cpu_idle": 0,
        "cpu_other": 0,
        "cpu_total": 2,
        "gpu_alloc": 1,
        "gpu_total": 1,
    }
    assert samples[f"slurm_node_mem_total{{{node},draining}}"] > 0
    for owner in ("user{labuser}", "account{default}", "partition{batch}"):
        kind, label = owner.split("{")
        assert samples[f"slurm_{kind}_jobs_running{{{label}"] == 1
        assert samples[f"slurm_{kind}_jobs_pending{{{label}"] == 1
        assert samples[f"slurm_{kind}_cpus_running{{{label}"] == 2
        assert samples[f"slurm_{kind}_gpus_running{{{label}"] == 1
        assert samples[f"slurm_{kind}_gpus_pending{{{label}"] == 1
        assert samples[f"slurm_{kind}_cpus_pending{{{label}"] >= 1
        assert samples[f"slurm_{kind}_jobs_suspended{{{label}"] == 0
    # the one node is in batch, all its CPUs held by the running job
    partition = {p: samples[f"slurm_partition_cpus_{p}{{batch}}"] for p in PARTITION_PARTS}
    assert partition == {"allocated": 2, "idle": 0, "other": 0, "total": 2}
    assert samples["slurm_queue_configuring"] == samples["slurm_queue_pending_dependency"] == 0
    # the capture's accounts (sshare.txt, read in test_slurm_output): Fair Tree gives each a
    # Level FS and no factor; 22.05's priority/basic neither
    level = {a: samples.get(f"slurm_account_level_fairshare{{{a}}}") for a in ("default", "team-a")}
    if version == "22.05":
        assert level == {"default": None, "team-a": None}
    else:
        assert all(value > 0 for value in level.values()), level
    assert not any(name.startswith("slurm_account_fairshare{") for name in samples)
    # waits of the started jobs: the running one and the two ended ones (1 s and 30 s)
    assert samples["slurm_job_wait_seconds_count"] == 3
    assert samples["slurm_job_wait_seconds_bucket{30.0}"] == 3


def _gpu_cluster() -> FakeSlurm:
    """24.11's answer reshaped: an 8-GPU node running a 2-GPU job on 8 CPUs, an 8-GPU node
    down, a CPU-only node idle."""
    answer = json.loads((FIXTURES / "24.11" / "scontrol-nodes.json").read_text())
    template = answer["nodes"][0]
    shapes = [
        ("gpu-01", ["MIXED"], 64, 8, "gpu:h200:8(S:0-1)", "gpu:h200:2(IDX:0-1)"),
        ("gpu-02", ["DOWN", "NOT_RESPONDING"], 64, 0, "gpu:h200:8(S:0-1)", "gpu:h200:0(IDX:N/A)"),
        ("cpu-01", ["IDLE"], 16, 0, "", ""),
    ]
    answer["nodes"] = []
    for name, state, cpus, alloc, gres, used in shapes:
        node = copy.deepcopy(template)
        node.update(name=name, state=state, cpus=cpus, alloc_cpus=alloc, gres=gres, gres_used=used)
        answer["nodes"].append(node)
    slurm = captured("24.11")
    slurm.answers["scontrol show nodes --json"] = json.dumps(answer)
    return slurm


def test_gpus_and_cpus_of_nodes_that_take_no_jobs_are_neither_allocated_nor_idle():
    samples = scrape(exporter.SlurmCollector("24.11.5", run=_gpu_cluster()))
    gpus = {p: samples[f"slurm_gpus_{p}"] for p in ("alloc", "idle", "other", "total")}
    assert gpus == {"alloc": 2, "idle": 6, "other": 8, "total": 16}
    cpus = {p: samples[f"slurm_cpus_{p}"] for p in ("alloc", "idle", "other", "total")}
    assert cpus == {"alloc": 8, "idle": 56 + 16, "other": 64, "total": 144}
    nodes = {s: samples[f"slurm_nodes_{s}"] for s in ("mix", "down", "idle")}
    assert nodes == {"mix": 1, "down": 1, "idle": 1}
    assert samples["slurm_node_gpu_alloc{gpu-01,mixed}"] == 2
    assert samples["slurm_node_state{gpu-02,down}"] == 1
    # the down node's CPUs are other, the idle node's idle (as sinfo's CPUS(A/I/O/T))
    assert samples["slurm_node_cpu_other{gpu-02,down}"] == 64
    assert samples["slurm_node_cpu_idle{cpu-01,idle}"] == 16
    assert samples["slurm_node_cpu_idle{gpu-01,mixed}"] == 56
    assert samples["slurm_gpus_utilization"] == 2 / 16
    # every node is in batch
    partition = {p: samples[f"slurm_partition_cpus_{p}{{batch}}"] for p in PARTITION_PARTS}
    assert partition == {"allocated": 8, "idle": 72, "other": 64, "total": 144}


def test_a_cluster_without_gpus_has_no_utilization_and_a_node_counts_in_each_partition():
    slurm = _gpu_cluster()
    answer = json.loads(slurm.answers["scontrol show nodes --json"])
    for node in answer["nodes"]:
        node.update(gres="", gres_used="")
    answer["nodes"][0]["partitions"] = ["batch", "gpu"]
    slurm.answers["scontrol show nodes --json"] = json.dumps(answer)
    samples = scrape(exporter.SlurmCollector("24.11.5", run=slurm))
    assert samples["slurm_gpus_total"] == 0 and "slurm_gpus_utilization" not in samples
    assert samples["slurm_partition_cpus_total{batch}"] == 144
    assert samples["slurm_partition_cpus_total{gpu}"] == 64
    assert samples["slurm_partition_cpus_allocated{gpu}"] == 8


def test_one_collection_serves_every_scrape_of_an_interval():
    slurm = captured("24.11")
    now = [100.0]
    collector = exporter.SlurmCollector(
        "24.11.5", run=slurm, cache_seconds=30, clock=lambda: now[0]
    )
    for _ in range(5):
        scrape(collector)
    assert len(slurm.calls) == 4  # nodes, jobs, sdiag and sshare, once
    now[0] += 30
    scrape(collector)
    assert len(slurm.calls) == 8


def test_slurm_not_answering_is_slurm_up_0_and_no_made_up_numbers():
    samples = scrape(exporter.SlurmCollector("24.11.5", run=FakeSlurm({})))
    assert samples["slurm_up"] == 0
    assert not any(name.startswith(("slurm_nodes_", "slurm_queue_")) for name in samples)


def test_a_collection_that_cannot_be_read_is_counted_and_the_scrape_still_answers():
    """Issue 44 (4): an answer the readers refuse is slurm_up 0 and one more failure counted,
    never a failed scrape (an HTTP 500 would take every slurm_* series away)."""
    slurm = captured("24.11")
    jobs_key = next(key for key in slurm.answers if "squeue" in key)
    slurm.answers[jobs_key] = "424242|bob|RUNNING\n"
    now = [0.0]
    collector = exporter.SlurmCollector("24.11.5", run=slurm, clock=lambda: now[0])
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    assert "slurm_up 0.0" in text and "slurm_exporter_collect_failures_total 1.0" in text
    now[0] += 30
    slurm.answers[jobs_key] = captured("24.11").answers[jobs_key]
    text = generate_latest(registry).decode()
    assert "slurm_up 1.0" in text and "slurm_exporter_collect_failures_total 1.0" in text


def test_the_jobs_query_lists_what_ended_in_every_version():
    """squeue's text form with -t all, whatever the version: the JSON form's 5 KB per job
    (24.11) is what the exporter avoids."""
    for version in ("22.05.8", "24.11.5"):
        argv = slurm_command("jobs", version, json=False, ended=True)["argv"]
        assert argv[:3] == ["squeue", "-t", "all"] and "--json" not in argv
    assert "-t" not in slurm_command("jobs", json=False)["argv"]


def test_the_exposition_carries_every_name_the_spec_lists():
    registry = CollectorRegistry()
    registry.register(exporter.SlurmCollector("22.05.8", run=captured("22.05")))
    text = generate_latest(registry).decode()
    exposed = {
        line.split()[0].split("{")[0] for line in text.splitlines() if not line.startswith("#")
    }
    assert set(SPEC_NAMES) <= exposed, set(SPEC_NAMES) - exposed


def _queue(*jobs: tuple[str, str, str, str, int, str]) -> str:
    """squeue text rows: (job id, state, user, account, GPUs, start time or N/A)."""
    return slurm_text(
        "".join(
            f"{job_id}|{state}|{user}|{account}|batch|1|4|cpu=4,gres/gpu={gpus}|"
            f"2026-11-27T10:00:00|{start}|1:00:00|{'w01' if start != 'N/A' else ''}|None|job\n"
            for job_id, state, user, account, gpus, start in jobs
        )
    )


def _collector_over(queue: list[str], top: int = 20):
    """A collector whose squeue answers each entry of `queue` in turn (a new one per
    collection), with the captured 24.11 nodes."""
    slurm = captured("24.11", ended="")
    jobs_key = unseparated(**slurm_command("jobs", json=False, ended=True))
    now = [0.0]
    collector = exporter.SlurmCollector(
        "24.11.5", run=slurm, cache_seconds=30, clock=lambda: now[0], top=top
    )

    def next_collection(index: int) -> dict[str, float]:
        slurm.answers[jobs_key] = queue[index]
        now[0] += 30
        return scrape(collector)

    return next_collection


def test_users_beyond_the_top_are_summed_as_other_and_partitions_are_not_bounded():
    rows = [
        (str(i), "RUNNING", f"u{i % 5}", f"a{i % 5}", 1, "2026-11-27T10:01:00") for i in range(10)
    ]
    rows += [("99", "PENDING", "u0", "a0", 2, "N/A")]
    samples = _collector_over([_queue(*rows)], top=2)(0)
    users = {k: v for k, v in samples.items() if k.startswith("slurm_user_jobs_running{")}
    # u0 (3 jobs with its pending one) and u1 (2, first by name among the 2s) keep their label
    assert users == {
        "slurm_user_jobs_running{u0}": 2,
        "slurm_user_jobs_running{u1}": 2,
        "slurm_user_jobs_running{_other}": 6,
    }
    assert samples["slurm_user_gpus_pending{u0}"] == 2
    assert samples["slurm_account_gpus_running{_other}"] == 6
    assert samples["slurm_partition_jobs_running{batch}"] == 10
    assert samples["slurm_partition_cpus_running{batch}"] == 40


def test_each_jobs_wait_is_counted_once_from_submission_to_start():
    waiting = _queue(("7", "PENDING", "u", "a", 1, "N/A"))
    started = _queue(("7", "RUNNING", "u", "a", 1, "2026-11-27T10:05:00"))
    ended = _queue(("7", "COMPLETED", "u", "a", 1, "2026-11-27T10:05:00"))
    collect = _collector_over([waiting, started, started, ended, "", started])
    assert collect(0)["slurm_job_wait_seconds_count"] == 0
    after = collect(1)
    assert after["slurm_job_wait_seconds_count"] == 1
    assert after["slurm_job_wait_seconds_sum"] == 300
    assert (
        after["slurm_job_wait_seconds_bucket{60.0}"],
        after["slurm_job_wait_seconds_bucket{300.0}"],
    ) == (0, 1)
    assert collect(2)["slurm_job_wait_seconds_count"] == 1
    assert collect(3)["slurm_job_wait_seconds_count"] == 1
    # slurmctld forgot the job (MinJobAge): so does the exporter, which counts what it sees anew
    assert collect(4)["slurm_job_wait_seconds_count"] == 1
    assert collect(5)["slurm_job_wait_seconds_count"] == 2


def test_a_pending_jobs_estimated_start_and_a_job_cancelled_while_pending_are_no_waits():
    row = "|labuser|default|batch|1|1|cpu=1,gres/gpu=1|2026-11-27T10:00:00|{}|UNLIMITED|{}|{}|j\n"
    queue = slurm_text(
        "8|PENDING" + row.format("2027-11-27T10:00:00", "", "Resources")  # a year ahead
        + "9|CANCELLED" + row.format("2026-11-27T10:02:00", "", "None")  # never ran
    )  # fmt: skip
    samples = _collector_over([queue])(0)
    assert samples["slurm_job_wait_seconds_count"] == 0
    (pending, _) = slurm_jobs(queue, ended=True)
    assert pending["start_time"] is None


@pytest.mark.parametrize(
    ("state", "counted"),
    [
        (["IDLE", "MAINTENANCE"], "maint"),
        (["MIXED", "RESERVED"], "resv"),
        (["IDLE", "FAIL"], "fail"),
        (["ERROR"], "err"),
        (["IDLE", "COMPLETING"], "comp"),
        (["IDLE", "PLANNED"], "plnd"),
        (["IDLE", "DRAIN", "MAINTENANCE"], "drain"),
        (["IDLE", "NOT_RESPONDING"], "down"),
        (["FUTURE"], "other"),
        (["IDLE", "CLOUD", "POWERED_DOWN"], "other"),
    ],
)
def test_each_node_state_is_counted_by_its_name(state, counted):
    """What the community exporter counts per state, by the same names: nothing folded."""
    slurm = _gpu_cluster()
    answer = json.loads(slurm.answers["scontrol show nodes --json"])
    answer["nodes"][2]["state"] = state
    slurm.answers["scontrol show nodes --json"] = json.dumps(answer)
    samples = scrape(exporter.SlurmCollector("24.11.5", run=slurm))
    assert samples[f"slurm_nodes_{counted}"] == 1 + (counted in ("down", "mix"))
    assert samples[f"slurm_node_state{{cpu-01,{counted}}}"] == 1


@pytest.mark.parametrize(
    ("command", "series"),
    [("sdiag", "slurm_scheduler_"), (SHARES, "slurm_account_level_fairshare")],
)
def test_sdiag_or_sshare_not_answering_takes_only_its_series_away(command, series):
    """sshare fails where accounting is off: the fair-share series go, the rest stands."""
    slurm = captured("24.11")
    del slurm.answers[command]
    samples = scrape(exporter.SlurmCollector("24.11.5", run=slurm))
    assert samples["slurm_up"] == 1 and samples["slurm_nodes_total"] == 1
    assert not any(name.startswith(series) for name in samples)
    assert samples["slurm_account_jobs_running{default}"] == 1


def test_suspended_configuring_and_dependent_jobs_are_counted_as_the_community_counts_them():
    row = "|labuser|{}|batch|1|4|cpu=4|2026-11-27T10:00:00|{}|UNLIMITED|{}|{}|j\n"
    queue = slurm_text(
        "1|SUSPENDED" + row.format("a", "2026-11-27T10:01:00", "w01", "None")
        + "2|CONFIGURING" + row.format("a", "2026-11-27T10:01:00", "w01", "None")
        + "3|PENDING" + row.format("a", "N/A", "", "Dependency")
        + "4|PENDING" + row.format("b", "N/A", "", "Priority")
    )  # fmt: skip
    samples = _collector_over([queue])(0)
    assert samples["slurm_queue_suspended"] == samples["slurm_queue_configuring"] == 1
    assert (samples["slurm_queue_pending"], samples["slurm_queue_pending_dependency"]) == (2, 1)
    assert samples["slurm_account_jobs_suspended{a}"] == 1
    assert samples["slurm_user_jobs_suspended{labuser}"] == 1
    # a suspended job's CPUs went back to the others; pending ones ask for theirs
    assert samples["slurm_account_cpus_running{a}"] == 0
    assert (samples["slurm_account_cpus_pending{a}"], samples["slurm_account_cpus_pending{b}"]) == (
        4,
        4,
    )


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_only_the_community_names_are_gauges_ending_in_total(version):
    """promtool check metrics flags a gauge named *_total (the e2e runs promtool itself on the
    lab's exporter): the community exporter's names are the only ones, and the counter ends so."""
    registry = CollectorRegistry()
    slurm_version = (FIXTURES / version / "VERSION").read_text().strip()
    registry.register(exporter.SlurmCollector(slurm_version, run=captured(version)))
    kinds = dict(
        line.split()[2:4]
        for line in generate_latest(registry).decode().splitlines()
        if line.startswith("# TYPE ")
    )
    totals = {name for name, kind in kinds.items() if kind == "gauge" and name.endswith("_total")}
    assert totals == set(COMMUNITY_TOTAL_GAUGES)
    assert {name for name, kind in kinds.items() if kind == "counter"} == {
        "slurm_exporter_collect_failures_total"
    }


def test_each_domain_module_is_collected_once():
    """A new Slurm domain is one module of slurm_metrics/ with a Metrics class: the collector
    collects every such module, each once."""
    folder = ROOT / "roles/monitoring/files/slurm_metrics"
    modules = sorted(path.stem for path in folder.glob("*.py") if path.stem != "__init__")
    collector = exporter.SlurmCollector("24.11.5", run=lambda *_, **__: "")
    assert sorted(type(domain).__module__.split(".")[-1] for domain in collector.domains) == modules


def test_every_slurm_series_the_dashboards_and_alerts_read_is_exposed():
    """A panel or an alert on a name the exporter does not expose would stay empty without an
    error: every slurm_* name they read is in the exposition of the 24.11 capture or of the GPU
    cluster (the GPU series)."""
    exposed = set()
    for slurm in (captured("24.11"), _gpu_cluster()):
        registry = CollectorRegistry()
        registry.register(exporter.SlurmCollector("24.11.5", run=slurm))
        text = generate_latest(registry).decode()
        exposed |= {line.split()[0].split("{")[0] for line in text.splitlines() if line[:1] != "#"}
    readers = [
        *(ROOT / "manifests").glob("*/dashboards/*.json"),
        ROOT / "roles/monitoring/templates/rules.yml.j2",
    ]
    read = {
        (path.name, name)
        for path in readers
        # slurm_app_*: the members' records, through node_exporter; a name ending in `_` is the
        # start of a regular expression over names (slurm_nodes_(alloc|...))
        for name in re.findall(r"\bslurm_(?!app_)[a-z0-9_]*[a-z0-9]\b(?!_)", path.read_text())
    }
    assert {name for _, name in read} >= {"slurm_partition_cpus_allocated", "slurm_up"}
    assert not {(path, name) for path, name in read if name not in exposed}
