"""The command line's building blocks, shared by the driver's commands (driver/cli.py) and the
lab's (driver/lab/commands.py)."""

import argparse
import json
import sys
from typing import Any, cast

import yaml

# `--format` says the same everywhere: text for people (a table, YAML for an inventory) or
# json for programs. The spellings before 1.1.0 still work, with a warning.
FORMATS = ("text", "json")
FORMER_FORMATS = {"human": "text", "yaml": "text"}


def output_format(value: str) -> str:
    if value in FORMER_FORMATS:
        print(
            f"slurm-app-driver: --format {value} is deprecated; use --format "
            f"{FORMER_FORMATS[value]}",
            file=sys.stderr,
        )
        return FORMER_FORMATS[value]
    return value


def add_format_option(parser: argparse.ArgumentParser, default: str, help_text: str) -> None:
    parser.add_argument(
        "--format",
        type=output_format,
        choices=FORMATS,
        default=default,
        help=f"{help_text} (default: {default})",
    )


def add_command(sub: Any, name: str, help_text: str, example: str) -> argparse.ArgumentParser:
    """A subcommand whose --help ends with an example of its use."""
    return cast(
        argparse.ArgumentParser,
        sub.add_parser(
            name,
            help=help_text,
            description=help_text,
            epilog=f"example:\n  {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        ),
    )


def print_document(document: Any, fmt: str, indent: int | None = 2) -> None:
    """A command's answer as `--format` asks: json as programs read it (`indent` None: one
    line), text as YAML for people."""
    if fmt == "json":
        print(json.dumps(document, indent=indent))
    else:
        print(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), end="")
