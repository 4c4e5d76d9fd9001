"""Slurm itself upgraded on a running lab, 24.11 to 26.05 (slurm-reference 1.1.0 to 2.0.0),
against the cluster's size and the accounting database's, in one run.

For each size asked, `slurm-app-driver lab up` deploys a Debian 13 lab (a controller and
`--workers` separate workers) with this driver at 1.1.0 and writes the lab's site settings;
then the lab is upgraded to 2.0.0 (Slurm 26.05 from the lab's site source: Debian's forky
pinned to Slurm's packages) and rolled back (forced: the upgrade finished), both through
`slurm-app-driver` by its full path. While each runs, bench.upgrade's prober asks `scontrol
ping` every 0.2 s and submits a one-second job every 2 s. Then, on the last lab, for each
`--records` count: the accounting database is filled to that many job records (rows of real
jobs copied with new ids, as a long-running cluster's would be), and the upgrade and the forced
rollback run again: slurmdbd's conversion time is the result's `slurmdbd_conversion_s`, from its
restart on 26.05 until it answered.

Usage: python -m bench.slurm_upgrade [--workers 2 6] [--records 10000 100000] [--keep]
The lab is named `benchslurm`; it is removed at the end unless --keep.
"""

import argparse
import json
import shlex
from typing import Any

from bench.member_operations import driver, on_host, result_of
from bench.upgrade import operation, print_operations
from driver.lab import lab

LAB = "benchslurm"
CONTROLLER = f"{LAB}-ctl"
FROM, TO = "1.1.0", "2.0.0"


def _sql(statement: str) -> str:
    return on_host(LAB, CONTROLLER, f"mariadb -N slurm_acct_db -e {shlex.quote(statement)}")


def job_records() -> int:
    return int(_sql(f"SELECT COUNT(*) FROM {LAB}_job_table").strip())


def fill_job_records(records: int) -> None:
    """Copies the job table's rows with new job ids until it holds `records` jobs: what
    slurmdbd converts on an upgrade grows with them."""
    submit = "runuser -u labuser -- sbatch -o /dev/null -D /tmp --wrap true >/dev/null"
    # ended, and no node still completing: the upgrade's health check refuses one
    idle = "until ! squeue -h | grep -q . && ! sinfo -h -o %T | grep -qv idle; do sleep 1; done"
    on_host(LAB, CONTROLLER, f"for i in $(seq 20); do {submit}; done; {idle}")
    table = f"{LAB}_job_table"
    described = [line.split("\t")[0] for line in _sql(f"SHOW COLUMNS FROM {table}").splitlines()]
    fields = [name for name in described if name and name != "job_db_inx"]
    while (have := job_records()) < records:
        offset = int(_sql(f"SELECT MAX(id_job) FROM {table}").strip())
        # quoted: the table has columns named as SQL's words (partition)
        columns = [f"`{name}`" for name in fields]
        copied = [f"`id_job` + {offset}" if name == "id_job" else f"`{name}`" for name in fields]
        _sql(
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {', '.join(copied)} FROM {table} "
            f"ORDER BY job_db_inx LIMIT {min(have, records - have)}"
        )


def upgrade_and_back() -> dict[str, Any]:
    upgrade = operation("upgrade", "--option", f"to_version={TO}", lab_name=LAB)
    detail = result_of(LAB, "upgrade")["adapter_detail"]["upgrade"]
    upgrade["slurmdbd_conversion_s"] = detail["slurmdbd_conversion_s"]
    assert detail["slurm_version"].startswith("26.05"), detail
    rollback = operation(
        "rollback", "--option", f"to_version={FROM}", "--option", "force=true", lab_name=LAB
    )
    return {"upgrade": upgrade, "rollback": rollback}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[2, 6])
    parser.add_argument("--records", type=int, nargs="*", default=[10_000, 100_000])
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    rows = []
    try:
        for workers in args.workers:
            lab.down(LAB)
            driver("lab", "up", "--name", LAB, "--workers", str(workers), "--slurm-26-05")
            rows.append({"workers": workers, "records": job_records(), **upgrade_and_back()})
            print(json.dumps(rows[-1]), flush=True)
        for records in args.records:
            fill_job_records(records)
            rows.append(
                {"workers": args.workers[-1], "records": job_records(), **upgrade_and_back()}
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        if not args.keep:
            lab.down(LAB)
    print_operations(
        rows,
        ["workers", "job records", "slurmdbd conversion s"],
        lambda row, name: [
            row["workers"],
            row["records"],
            row[name].get("slurmdbd_conversion_s", ""),
        ],
    )


if __name__ == "__main__":
    main()
