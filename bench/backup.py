"""The backup against the accounting database's size, on the container lab, in one run.

Deploys a lab of one host (controller and worker, same_node) on the platform's storage, and for
each size asked (job records in the accounting database, reached with real array jobs of
`true`, each task one record) measures:

- the backup operation through `slurm-app-driver` called by its full path with a minimal
  environment, as the platform calls it: wall seconds, the run's duration, how long slurmctld
  was paused (`scheduler_paused_s`) and each file's size;
- the accounting database's restore from the backup's dump (`zcat | mariadb` into a scratch
  database on the same host: the part of a controller replacement that grows with the
  records).

Usage: python -m bench.backup [--distro trixie] [--records 1000 10000] [--keep]
The lab is named `benchbk`; it is removed at the end unless --keep.
"""

import argparse
import json
import time
from typing import Any

from bench import markdown
from bench.member_operations import driver, on_host, result_of
from driver.lab import lab

LAB = "benchbk"
HOST = f"{LAB}-ctl"
ARRAY = 1000  # Slurm's default MaxArraySize is 1001
MAX_JOBS = 10000  # Slurm's default MaxJobCount


def job_records() -> int:
    query = f"SELECT COUNT(*) FROM slurm_acct_db.{LAB}_job_table"
    return int(on_host(LAB, HOST, f'mariadb -N -B -e "{query}"').strip())


def fill_accounting(records: int) -> float:
    """Array jobs of `true` until the database holds `records` job records; the seconds."""
    started = time.perf_counter()
    missing = records - job_records()
    while missing > 0:
        size = min(ARRAY, missing)
        # slurmctld keeps each finished job for MinJobAge (300 s) and counts every array task,
        # pending ones too, against MaxJobCount (10,000): the next array waits for room
        on_host(
            LAB,
            HOST,
            f"while [ $(squeue -h -r -t all -o %i | wc -l) -gt {MAX_JOBS - size - 500} ]; "
            "do sleep 5; done",
        )
        on_host(
            LAB,
            HOST,
            f"cd /tmp && runuser -u labuser -- sbatch -Q --array=1-{size} -o /dev/null --wrap true",
        )
        missing -= size
    on_host(LAB, HOST, 'while [ -n "$(squeue -h -o %i)" ]; do sleep 2; done')
    # slurmctld sends the last records to slurmdbd shortly after the jobs end
    deadline = time.monotonic() + 120
    while job_records() < records and time.monotonic() < deadline:
        time.sleep(2)
    return time.perf_counter() - started


def backup() -> dict[str, Any]:
    wall = driver("lab", "op", "backup", "--name", LAB, "--format", "json")
    result = result_of(LAB, "backup")
    detail = result["adapter_detail"]["backup"]
    sizes = {entry["name"]: entry["bytes"] for entry in detail["manifest"]["files"]}
    return {
        "wall_s": round(wall, 1),
        "duration_s": result["duration_s"],
        "paused_s": detail["scheduler_paused_s"],
        "sizes": sizes,
        "path": detail["path"],
    }


def restore_database(path: str) -> float:
    """The dump loaded into a scratch database, as a new controller would load it; seconds."""
    script = (
        "set -euo pipefail; mariadb -e 'DROP DATABASE IF EXISTS restore_probe'; "
        f"start=$(date +%s.%N); zcat {path}/accounting.sql.gz "
        "| sed 's/`slurm_acct_db`/`restore_probe`/g' | mariadb; end=$(date +%s.%N); "
        "mariadb -e 'DROP DATABASE restore_probe'; echo \"$end - $start\" | bc"
    )
    return float(on_host(LAB, HOST, script).strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--distro", default="trixie", choices=["trixie", "bookworm"])
    parser.add_argument("--records", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    lab.down(LAB)
    driver(
        *("lab", "up", "--name", LAB, "--distro", args.distro, "--workers", "1"),
        *("--placement", "same_node", "--storage", "platform_mount"),
    )
    on_host(LAB, HOST, "command -v bc >/dev/null || apt-get install -y -qq bc >/dev/null")
    rows = []
    try:
        for records in sorted(args.records):
            filled = fill_accounting(records)
            taken = backup()
            restored = restore_database(taken["path"])
            rows.append(
                {"records": job_records(), "fill_s": round(filled), **taken, "restore_s": restored}
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if not args.keep:
            lab.down(LAB)
    columns = [
        "job records",
        "backup wall s",
        "run s",
        "slurmctld paused s",
        "accounting.sql.gz KiB",
        "state.tar.gz KiB",
        "database restore s",
    ]
    print(markdown.header(columns))
    for row in rows:
        print(
            markdown.row(
                row["records"],
                row["wall_s"],
                row["duration_s"],
                row["paused_s"],
                round(row["sizes"].get("accounting.sql.gz", 0) / 1024),
                round(row["sizes"]["state.tar.gz"] / 1024),
                round(row["restore_s"], 2),
            )
        )


if __name__ == "__main__":
    main()
