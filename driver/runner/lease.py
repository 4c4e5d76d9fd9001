"""The instance's lease kept for as long as the run lasts.

The preflight takes the lease with an expiry (the site's `lease.expiry_s`), so that a lease
whose driver died frees itself. A run longer than that would lose it while it still changes
the instance: the keeper takes it again every third of the expiry, from a thread of the
driver, with a playbook of one task on the lease's host (`playbooks/lease_renew.yml`). A
renewal that finds another operation holding the lease, once the preflight had taken it, means
this run lost it (its renewals failed for longer than the expiry, and another driver took it
over): the run is stopped, since the instance is the other operation's now. A renewal that
cannot reach the host is tried again at the next turn.
"""

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from driver.events import EventSink
from driver.runner.collector import Collector

RENEW_PLAYBOOK = Path("playbooks") / "lease_renew.yml"
# The preflight's play that takes the lease (tests/unit/test_lease.py holds it to preflight.yml):
# a busy answer before that play ended is the preflight's own refusal to come, not a loss.
LEASE_PLAY = "Preflight - the instance's lease"


class LeaseKeeper:
    """Renews the run's lease every `expiry_s / 3` seconds while it is entered; `lost` is the
    other holder's description once a renewal found the lease taken from this run."""

    def __init__(
        self,
        renew: Callable[[Collector, Callable[[], bool]], Any],
        expiry_s: int,
        main: Collector,
        sink: EventSink,
    ) -> None:
        self._renew = renew
        self.every_s = expiry_s / 3
        self._main = main
        self._sink = sink
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, name="lease-keeper", daemon=True)
        self.lost: str | None = None

    def __enter__(self) -> "LeaseKeeper":
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _taken_by_the_preflight(self) -> bool:
        started = self._main.plays_started
        return LEASE_PLAY in started and started[-1] != LEASE_PLAY

    def _keep(self) -> None:
        while not self._stop.wait(self.every_s):
            collector = Collector(EventSink(self._sink.context, emit=False), None)
            try:
                self._renew(collector, self._stop.is_set)
            except Exception as exc:  # a renewal never ends the run; the next turn tries again
                print(f"slurm-app-driver: the lease's renewal failed: {exc!r}", file=sys.stderr)
                continue
            error = collector.error()
            refusal = error.refusal if error is not None else None
            if (
                refusal is not None
                and refusal[0] == "instance_busy"
                and self._taken_by_the_preflight()
            ):
                self.lost = refusal[1]
                return
