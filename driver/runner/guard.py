"""`python -m driver.runner.guard TREE_LOCK PROGRAM ARGS...`: runs ansible-playbook so that no
part of it outlives the driver's run, however the run ends.

ansible-runner starts the playbook in a session of its own, and Ansible's workers each start
another (setsid), so neither a process-group kill nor the driver's death reaches them: a
worker would finish its task on the hosts after the driver gave its result and released the
instance lock. The guard is the playbook's parent; it adopts every orphan of the tree (child
subreaper), is told by the kernel when the driver dies (parent-death signal), and on SIGTERM
ends the whole tree before it exits. It holds TREE_LOCK (flock) until then: the instance lock
dies with a SIGKILLed driver at once, so the next run of the instance also waits for this one
(driver.runner.locks.instance_lock) rather than start while the old tree is still ending.
"""

import contextlib
import ctypes
import fcntl
import os
import signal
import subprocess
import sys
from types import FrameType

import psutil

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
# Seconds the tree gets between SIGTERM and SIGKILL.
GRACE_S = 5
# Snapshots of the tree ended, at most, before the guard gives up on late forks.
ROUNDS = 10


def end_tree(root: psutil.Process) -> None:
    """End every descendant of `root`, again while any is left: a worker can fork (an ssh, a
    task's fork) between one snapshot of the tree and its end, and a loaded machine widens that
    window. Orphans of the tree stay `root`'s descendants while it is their subreaper."""
    for _ in range(ROUNDS):
        tree = root.children(recursive=True)
        if not tree:
            return
        end_processes(tree)


def end_processes(processes: list[psutil.Process]) -> None:
    """SIGTERM them all, SIGKILL those still there after the grace time. Processes that are
    not our children are only polled, never reaped."""
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=GRACE_S)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=GRACE_S)


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        sys.exit(f"prctl({option}) failed: {os.strerror(ctypes.get_errno())}")


def main() -> None:
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:
        sys.exit("the driver is already gone")  # it died before the signal was armed

    def stop(number: int, _frame: FrameType | None) -> None:
        end_tree(psutil.Process())
        os._exit(128 + number)

    signal.signal(signal.SIGTERM, stop)
    tree_lock, command = sys.argv[1], sys.argv[2:]
    with open(tree_lock, "a") as held:  # noqa: PTH123 - the descriptor is the lock
        fcntl.flock(held, fcntl.LOCK_EX)
        # Children do not inherit the descriptor (close_fds): the lock ends with the guard.
        playbook = subprocess.Popen(command)
        code = playbook.wait()
        # what the playbook left (its ssh control masters, a worker it did not wait for) goes
        # before the lock does
        end_tree(psutil.Process())
        sys.exit(code)


if __name__ == "__main__":
    main()
