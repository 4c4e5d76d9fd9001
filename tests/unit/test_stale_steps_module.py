"""slurm_worker's slurm_stale_steps module on real processes: slurmstepds named as Slurm names
them (`exec -a`), some started before the process that stands for slurmd and one after, read
back from this machine's /proc. Its run in a replacement is test_slurm_22_05's."""

import subprocess
import time

import pytest

from driver.role_code import role_code

slurm_stale_steps = role_code("slurm_worker", "library", "slurm_stale_steps")

# job ids no lab's slurmctld reaches in a test run: the containers' processes are in /proc too
WORKING, IDLE, LATER = "990041", "990042", "990043"


# a process with a child of its own, as a batch step whose script runs
WITH_A_CHILD = "bash -c 'sleep 60 & wait'"


def _process(title: str, command: str) -> subprocess.Popen:
    """`command` under the process title `title` (its /proc cmdline)."""
    return subprocess.Popen(["bash", "-c", f"exec -a {title!r} {command}"])


@pytest.fixture
def node():
    started: list[subprocess.Popen] = []

    def start(title: str, command: str = "sleep 60") -> int:
        started.append(_process(title, command))
        # /proc's start times count clock ticks (10 ms): the next process starts in a later one
        time.sleep(0.05)
        return started[-1].pid

    yield start
    for process in started:
        process.kill()
        process.wait()


def test_the_steps_older_than_slurmd_are_found_by_job_with_whether_work_goes_on(node):
    batch = node(f"slurmstepd: [{WORKING}.batch]", WITH_A_CHILD)
    extern = node(f"slurmstepd: [{WORKING}.extern]", WITH_A_CHILD)
    idle_extern = node(f"slurmstepd: [{IDLE}.extern]", WITH_A_CHILD)
    idle_batch = node(f"slurmstepd: [{IDLE}.batch]")
    slurmd = node("slurmd --systemd")
    node(f"slurmstepd: [{LATER}.0]", WITH_A_CHILD)
    found = slurm_stale_steps.stale_steps(slurmd)
    ours = {job: found[job] for job in (WORKING, IDLE, LATER) if job in found}
    assert ours == {
        # the batch step's own process still runs: the job's work goes on
        WORKING: {"pids": sorted([batch, extern]), "tasks": True},
        # an extern step's process only holds the cgroup; the batch step has no process left
        IDLE: {"pids": sorted([idle_extern, idle_batch]), "tasks": False},
    }


def test_without_a_running_slurmd_nothing_is_stale(node):
    node(f"slurmstepd: [{WORKING}.batch]", WITH_A_CHILD)
    assert slurm_stale_steps.stale_steps(0) == {}
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert slurm_stale_steps.stale_steps(gone.pid) == {}
