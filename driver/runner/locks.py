"""One operation at a time per instance, and never while the last run's playbook still ends."""

import fcntl
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from driver.catalog import state_dir
from driver.runner.guard import GRACE_S


class InstanceBusy(Exception):
    """Another operation holds this instance's lock."""


def tree_lock(instance_id: str) -> Path:
    """Held by the guard of the instance's playbook for as long as any of its tree lives."""
    return state_dir() / "locks" / f"{instance_id}.tree"


def renewal_tree_lock(instance_id: str) -> Path:
    """Held by the guard of a renewal of the run's lease (driver.runner.lease), which runs
    beside the run's own playbook and must not wait for its tree lock."""
    return state_dir() / "locks" / f"{instance_id}.renewal.tree"


# How long a new run waits for a killed run's playbook to end: the guard's SIGTERM, its grace
# time, then SIGKILL and the reaping.
TREE_WAIT_S = 3 * GRACE_S


@contextmanager
def instance_lock(instance_id: str) -> Iterator[Path]:
    """A non-blocking per-instance lock: a second concurrent operation fails at once. A run
    whose driver was killed releases it at once, while its guard may still be ending the
    playbook's tree: the next run waits for that tree's lock before it goes on."""
    folder = state_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{instance_id}.lock"
    with path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InstanceBusy(f"instance {instance_id} is busy: {path} is locked") from None
        try:
            _wait_for_the_last_tree(tree_lock(instance_id))
            yield path
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _wait_for_the_last_tree(path: Path) -> None:
    deadline = time.monotonic() + TREE_WAIT_S
    with path.open("a") as tree:
        while True:
            try:
                fcntl.flock(tree, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise InstanceBusy(
                        f"the playbook of the instance's previous run is still ending ({path} "
                        "is held)"
                    ) from None
                time.sleep(0.1)
                continue
            fcntl.flock(tree, fcntl.LOCK_UN)
            return
