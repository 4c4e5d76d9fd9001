"""Readable progress for operators (`--format text`): plays done, current task, hosts."""

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class TextProgress:
    def __init__(self, console: Console, plays: int, hosts: int) -> None:
        self.console = console
        self.hosts = hosts
        self.done_hosts: set[str] = set()
        self.progress = Progress(
            TextColumn("[bold]{task.fields[play]}[/bold]"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.description}"),
            TextColumn("[dim]hosts {task.fields[hosts]}[/dim]"),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.task_id = self.progress.add_task("starting", total=plays, play="", hosts="")

    def __enter__(self) -> "TextProgress":
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "playbook_on_play_start":
            if self.progress.tasks[0].fields["play"]:
                self.progress.advance(self.task_id)
            self.progress.update(self.task_id, play=data.get("play", ""))
        elif kind == "playbook_on_task_start":
            self.done_hosts.clear()
            self.progress.update(
                self.task_id, description=data.get("task", ""), hosts=f"0/{self.hosts}"
            )
        elif kind.startswith("runner_on_") and data.get("host"):
            self.done_hosts.add(data["host"])
            self.progress.update(self.task_id, hosts=f"{len(self.done_hosts)}/{self.hosts}")
            if kind in ("runner_on_failed", "runner_on_unreachable") and not data.get(
                "ignore_errors"
            ):
                message = (data.get("res") or {}).get("msg", "")
                if (data.get("res") or {}).get("censored"):
                    message = "output hidden (no_log)"
                self.console.print(
                    f"[red]{kind.removeprefix('runner_on_')}[/red] {data['host']}: "
                    f"{escape(data.get('task', ''))}: {escape(str(message))}",
                    highlight=False,
                )
        elif kind == "playbook_on_stats":
            self.progress.update(
                self.task_id, completed=self.progress.tasks[0].total, description="done"
            )
