"""The one way the driver prints for people: Rich, with emoji codes off (`loop.json:100:` in a
path or a message must print as written, not as an emoji) and no guessing at highlights."""

from typing import TextIO

from rich.console import Console


def console(stream: TextIO) -> Console:
    return Console(file=stream, emoji=False, highlight=False)
