"""Prometheus on a lab: resident memory and disk growth while it scrapes the lab's members,
extrapolated to the retention time and to larger clusters.

Samples the controller's Prometheus every --every seconds for --minutes: its RSS (VmRSS of the
unit's main process), the size of its data folder, head series per job and the samples it
ingests per second (from Prometheus's own metrics). Then extrapolates to 7 days and to 100 and
1,000 nodes two ways: the measured data-folder growth rate (the WAL: an upper bound, since
compaction into blocks shrinks it), and Prometheus's sizing rule, ingested samples/s x
retention seconds x bytes per sample (its documentation gives 1-2 bytes; 2 is used).
Per-node series are what node_exporter and the Slurm exporter's per-node metrics add per member.

With --exporter-series (no lab), counts the series the Slurm exporter's own code produces for
100 and 1,000 nodes at 1,000 to 100,000 jobs spread over --users users in 40 accounts (the
answers bench.slurm_exporter builds from the captured records), and sizes them the same way:
the per-user and per-account series are bounded by the exporter's --top, so they must not
grow with the job count.

Usage: python -m bench.prometheus_growth --lab NAME [--minutes 15] [--every 60]
       python -m bench.prometheus_growth --exporter-series [--users 500]
"""

import argparse
import json
import sys
import time

from bench import markdown
from bench import slurm_exporter as exporter_bench
from driver.lab.lab import controller_container

RETENTION_S = 7 * 86400
BYTES_PER_SAMPLE = 2


def _on_controller(lab: str, script: str) -> str:
    done = controller_container(lab).exec_run(["/bin/bash", "-c", script])
    if done.exit_code != 0:
        raise SystemExit(f"{script!r} failed: {done.output.decode()[-1000:]}")
    return done.output.decode()


def _query(lab: str, expr: str) -> list[dict]:
    script = (
        "python3 -c 'import sys, urllib.parse, urllib.request; "
        'print(urllib.request.urlopen("http://127.0.0.1:9090/api/v1/query?query="'
        " + urllib.parse.quote(sys.argv[1])).read().decode())' " + json.dumps(expr)
    )
    return json.loads(_on_controller(lab, script))["data"]["result"]


def sample(lab: str) -> dict:
    pid = _on_controller(lab, "systemctl show -p MainPID --value prometheus").strip()
    rss_kib = int(_on_controller(lab, f"awk '/^VmRSS/ {{print $2}}' /proc/{pid}/status"))
    disk = int(_on_controller(lab, "du -sb /var/lib/prometheus/metrics2").split()[0])
    series = {
        r["metric"].get("job", "?"): int(float(r["value"][1]))
        for r in _query(lab, 'count by (job) ({__name__=~".+"})')
    }
    rate = _query(lab, "rate(prometheus_tsdb_head_samples_appended_total[5m])")
    return {
        "t": time.monotonic(),
        "rss_mib": rss_kib / 1024,
        "disk_bytes": disk,
        "series": series,
        "samples_per_s": float(rate[0]["value"][1]) if rate else 0.0,
    }


def exporter_series(users: int) -> None:
    """The Slurm exporter's series by cluster size and job count, from its own collection."""
    for path in ("roles/slurm_common/filter_plugins", "roles/monitoring/files"):
        sys.path.insert(0, str(exporter_bench.ROOT / path))
    import slurm_exporter

    exporter_bench.USERS = users
    interval_s = 30
    columns = ["nodes", "jobs", "users", "series", "of them per user/account/partition"]
    print(markdown.header([*columns, "samples/s", "7 days, sizing rule"]))
    for nodes in (100, 1000):
        for jobs in (1000, 10000, 100000):
            command, node_answer, job_answer = exporter_bench.answers("24.11", nodes, jobs)
            # by the command's name: the jobs query's separator is new at each call
            replies = {command.split()[0]: node_answer, "squeue": json.loads(job_answer)}
            collector = slurm_exporter.SlurmCollector(
                "24.11.5", run=lambda argv, r=replies: r[argv[0]]
            )
            families = list(collector.collect())
            series = sum(len(f.samples) for f in families)
            owners = sum(
                len(f.samples)
                for f in families
                if f.name.startswith(("slurm_user_", "slurm_account_", "slurm_partition_"))
            )
            rate = series / interval_s
            disk = rate * RETENTION_S * BYTES_PER_SAMPLE / 2**30
            print(
                markdown.row(
                    f"{nodes:,}", f"{jobs:,}", f"{users:,}", f"{series:,}", f"{owners:,}",
                    f"{rate:.1f}", f"{disk:.3f} GiB",
                )
            )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lab")
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--every", type=float, default=60)
    parser.add_argument("--exporter-series", action="store_true")
    parser.add_argument("--users", type=int, default=500)
    args = parser.parse_args()
    if args.exporter_series:
        exporter_series(args.users)
        return
    if not args.lab:
        parser.error("--lab NAME, or --exporter-series")
    members = int(_on_controller(args.lab, "ls /etc/prometheus/slurm-app-targets | wc -l"))
    samples = [sample(args.lab)]
    deadline = samples[0]["t"] + args.minutes * 60
    while time.monotonic() < deadline:
        time.sleep(args.every)
        samples.append(sample(args.lab))
        last = samples[-1]
        print(
            f"{(last['t'] - samples[0]['t']) / 60:5.1f} min  RSS {last['rss_mib']:6.1f} MiB  "
            f"data {last['disk_bytes'] / 2**20:6.2f} MiB  {last['samples_per_s']:.1f} samples/s",
            flush=True,
        )
    first, last = samples[0], samples[-1]
    elapsed = last["t"] - first["t"]
    growth = (last["disk_bytes"] - first["disk_bytes"]) / elapsed
    per_node_series = last["series"].get("node", 0) / members
    fixed_series = sum(v for k, v in last["series"].items() if k != "node")
    interval_s = 30
    report = {
        "members": members,
        "minutes": round(elapsed / 60, 1),
        "rss_mib": {"first": round(first["rss_mib"], 1), "last": round(last["rss_mib"], 1)},
        "data_mib": {
            "first": round(first["disk_bytes"] / 2**20, 2),
            "last": round(last["disk_bytes"] / 2**20, 2),
        },
        "series": last["series"],
        "samples_per_s": round(last["samples_per_s"], 1),
        "per_node_series": round(per_node_series),
    }
    for nodes in (members, 100, 1000):
        series = fixed_series + per_node_series * nodes
        rate = series / interval_s
        report[f"7d_at_{nodes}_nodes"] = {
            "series": round(series),
            "samples_per_s": round(rate, 1),
            "sizing_rule_gib": round(rate * RETENTION_S * BYTES_PER_SAMPLE / 2**30, 2),
            "wal_rate_gib": round(growth * nodes / members * RETENTION_S / 2**30, 2),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
