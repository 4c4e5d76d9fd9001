"""Prometheus on a lab: resident memory and disk growth while it scrapes the lab's members,
extrapolated to the retention time and to larger clusters.

Samples the controller's Prometheus every --every seconds for --minutes: its RSS (VmRSS of the
unit's main process), the size of its data folder, head series per job and the samples it
ingests per second (from Prometheus's own metrics). Then extrapolates to 7 days and to 100 and
1,000 nodes two ways: the measured data-folder growth rate (the WAL: an upper bound, since
compaction into blocks shrinks it), and Prometheus's sizing rule, ingested samples/s x
retention seconds x bytes per sample (its documentation gives 1-2 bytes; 2 is used).
Per-node series are what node_exporter and the Slurm exporter's per-node metrics add per member.

Usage: python -m bench.prometheus_growth --lab NAME [--minutes 15] [--every 60]
"""

import argparse
import json
import time

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lab", required=True)
    parser.add_argument("--minutes", type=float, default=15)
    parser.add_argument("--every", type=float, default=60)
    args = parser.parse_args()
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
