"""ansible-runner's events as the driver's: progress events, the run's error (a refusal a
playbook reports on purpose included) and what the roles reported."""

import re
from collections.abc import Callable
from typing import Any

from driver.events import ErrorInfo, EventSink, EventType, HostStats, connection_reason
from driver.traces import OperationTrace

# How a playbook marks a failure it reports on purpose: a fail or assert task whose msg starts
# "[drain_timeout] node w01 still ...". Nothing else a host prints (a module's output, stderr,
# a path in du's answer) can carry a code.
DELIBERATE_ERROR = re.compile(r"\[(?P<code>[a-z][a-z_]{2,40})\]\s*")


# slurm_accounts (slurm_common's action plugin) builds its refusals on the control side, as an
# assert would; every other message of its starts with a word of its own, never a host's.
REFUSING_ACTIONS = frozenset({"fail", "assert", "slurm_accounts"})


# What OpenSSH, then Mitogen (through which the driver's runs connect), say when a host's key
# is not the one known for it.
HOST_KEY_SIGNS = (
    "Host key verification failed",
    "REMOTE HOST IDENTIFICATION HAS CHANGED",
    "SSH reported an unrecognized or mismatching host key",
)


class Collector:
    """Turns ansible-runner events into ours; keeps nothing of task results but names and msg."""

    def __init__(
        self,
        sink: EventSink,
        on_progress: Callable[[str, dict[str, Any]], None] | None,
        trace: OperationTrace | None = None,
    ) -> None:
        self.sink = sink
        self.on_progress = on_progress
        self.trace = trace or OperationTrace(None, None)
        self.play = ""
        # every play started so far, in order (the lease's keeper reads it from its thread)
        self.plays_started: list[str] = []
        self.task = ""
        self.first_error: ErrorInfo | None = None
        # each host's latest failure: where a rescue handled the first, it reports the cause
        self.last_error: dict[str, ErrorInfo] = {}
        self.artifact_data: dict[str, Any] = {}
        # what ansible-playbook printed outside any task (its own errors), last lines only
        self.verbose_tail: list[str] = []
        # From the stats event itself: runner.stats reads the on-disk events we never write.
        self.stats: dict[str, Any] = {}

    def _refusal(self, data: dict[str, Any]) -> tuple[str, str] | None:
        """A fail or assert task's "[code] ..." msg: (code, the message less the marker)."""
        action = str(data.get("task_action") or "").rsplit(".", 1)[-1]
        result = data.get("res") or {}
        message = str(result.get("msg") or "")
        match = DELIBERATE_ERROR.match(message)
        if action not in REFUSING_ACTIONS or result.get("censored") or match is None:
            return None
        return match["code"], f"{self.task}: {message[match.end() :]}"

    def _failure_message(self, data: dict[str, Any]) -> str:
        result = data.get("res") or {}
        if result.get("censored"):
            return f"{self.task}: output hidden (no_log)"
        message = str(result.get("msg") or "failed")
        # a loop's failure says only that an item failed: each failed item's own message,
        # under its label (a host, a user), is what names the field
        items = [item for item in result.get("results") or [] if item.get("failed")]
        if any(item.get("censored") for item in items):
            return f"{self.task}: output hidden (no_log)"
        if items:
            message = "; ".join(
                f"{item.get('_ansible_item_label', item.get('item'))}: {item.get('msg', 'failed')}"
                for item in items
            )
        stderr = [line for line in str(result.get("stderr") or "").splitlines() if line][-3:]
        return f"{self.task}: {message}" + (f" ({' | '.join(stderr)})" if stderr else "")

    def error(self) -> ErrorInfo | None:
        """The run's error: the first failure, unless a rescue handled it on its host; then
        that host's last failure, which a rescue raises with what it did about the first."""
        first = self.first_error
        if first is not None and first.host and (self.stats.get("rescued") or {}).get(first.host):
            return self.last_error.get(first.host, first)
        return first

    def ansible_said(self) -> str:
        """Its error lines first, then the last lines (where it shows the origin)."""
        errors = [line for line in self.verbose_tail if "ERROR" in line][:2]
        tail = [line for line in self.verbose_tail[-5:] if line not in errors]
        return " | ".join(errors + tail)[:1500]

    def __call__(self, raw: dict[str, Any]) -> bool:
        kind = raw.get("event", "")
        data = raw.get("event_data") or {}
        host = data.get("host")
        if kind == "playbook_on_play_start":
            self.play = data.get("play", "")
            self.plays_started.append(self.play)
            self.sink(EventType.PLAY_STARTED, play=self.play)
            self.trace.play(self.play, str(data.get("play_pattern") or ""))
        elif kind in ("playbook_on_task_start", "playbook_on_handler_task_start"):
            # a handler's failure is its own, not the task's before it
            self.task = data.get("task", "")
            self.sink(EventType.TASK_STARTED, play=self.play, task=self.task)
            self.trace.task(self.task, str(data.get("task_action") or ""))
        elif kind == "runner_on_ok":
            changed = bool((data.get("res") or {}).get("changed"))
            self.trace.host(host, "changed" if changed else "ok")
            self.sink(
                EventType.HOST_CHANGED if changed else EventType.HOST_OK,
                play=self.play,
                task=self.task,
                host=host,
            )
        elif kind == "runner_on_skipped":
            self.trace.host(host, "skipped")
        elif kind == "runner_on_failed" and data.get("ignore_errors"):
            self.trace.host(host, "ignored")
        elif kind == "runner_on_failed":
            message = self._failure_message(data)
            self.trace.host(host, "failed", message)
            self.sink(
                EventType.HOST_FAILED, play=self.play, task=self.task, host=host, message=message
            )
            error = ErrorInfo(code="host_failed", message=message, host=host)
            refusal = self._refusal(data)
            if refusal is not None:
                error.refused(*refusal)
            self.first_error = self.first_error or error
            if host:
                self.last_error[host] = error
        elif kind == "runner_on_unreachable":
            said = str((data.get("res") or {}).get("msg") or "")
            message = f"{self.task}: {connection_reason(said)}"
            code = "host_unreachable"
            if any(sign in said for sign in HOST_KEY_SIGNS):
                code = "host_key_mismatch"
                message = (
                    f"{self.task}: the host did not present the SSH host key the request "
                    "carries for it; nothing was sent to it"
                )
            self.trace.host(host, "unreachable", message)
            self.sink(
                EventType.HOST_UNREACHABLE,
                play=self.play,
                task=self.task,
                host=host,
                message=message,
            )
            self.first_error = self.first_error or ErrorInfo(code=code, message=message, host=host)
        elif kind == "verbose":
            lines = [line for line in str(raw.get("stdout", "")).splitlines() if line.strip()]
            self.verbose_tail = (self.verbose_tail + lines)[-50:]
        elif kind == "playbook_on_stats":
            self.artifact_data = data.get("artifact_data") or {}
            self.stats = data
        if self.on_progress is not None:
            self.on_progress(kind, data)
        # Returning False keeps the event out of the on-disk artifacts altogether.
        return False


def host_stats(stats: dict[str, Any] | None) -> dict[str, HostStats]:
    hosts: dict[str, HostStats] = {}
    keys = {
        "ok": "ok",
        "changed": "changed",
        "failures": "failed",
        "dark": "unreachable",
        "skipped": "skipped",
    }
    for source, target in keys.items():
        for host, count in ((stats or {}).get(source) or {}).items():
            setattr(hosts.setdefault(host, HostStats()), target, count)
    return hosts
