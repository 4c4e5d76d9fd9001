"""The one way the driver prints for people: Rich, with emoji codes off (`loop.json:100:` in a
path or a message must print as written, not as an emoji) and no guessing at highlights."""

import os
import sys
from typing import TextIO

from rich.console import Console


def console(stream: TextIO) -> Console:
    return Console(file=stream, emoji=False, highlight=False)


def silence_stdout() -> None:
    """Once stdout cannot be written (its reader went away, its disk is full), what is still
    buffered or written after goes nowhere: Python's own flush at exit then raises nothing."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
