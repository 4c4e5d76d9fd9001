"""Validation and inventory cost of an add_worker request against cluster size.

Generates add_worker requests for clusters of N existing workers (from the shipped example),
then runs `slurm-app-driver validate-request` and `slurm-app-driver inventory` on each as the
platform would (a fresh process per call) and reports wall time and peak memory (max RSS of
that process). Then, at the largest size, requests with one fault deep inside: how long the
platform waits for the finding and its line; and at each size, a request whose every
allocation is a finding (one host key on all of them). Usage: python bench/validate_inventory.py
[--sizes 10,1000,10000] [--repeat 3]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from bench import markdown
from bench.requests import EXAMPLES, add_worker_request, one_host_key_request

DRIVER = Path(sys.executable).parent / "slurm-app-driver"
MANIFESTS = EXAMPLES.parent / "manifests"


def measure(argv: list[str], exit_code: int = 0) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MiB and stdout of one driver process that exits `exit_code`."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        out.seek(0)
        output = out.read().decode()
    if os.waitstatus_to_exitcode(status) != exit_code:
        raise SystemExit(f"{' '.join(argv)} failed:\n{output[-2000:]}")
    return elapsed, usage.ru_maxrss / 1024, output


def worker_limit() -> int:
    """The most workers the shipped manifest allows (its worker component's max_count)."""
    manifest = yaml.safe_load((MANIFESTS / "slurm-reference" / "manifest.yaml").read_text())
    (version,) = manifest["versions"]
    return next(c["max_count"] for c in version["components"] if c["key"] == "worker")


def faulty_requests(size: int) -> dict[str, str]:
    """Request texts with one fault each, late in the text, by what is wrong: `size` workers,
    and for the last one more worker than the manifest allows."""
    late = size * 9 // 10
    bad_address = add_worker_request(size)
    bad_address["allocations"][late]["address"] = "not an address"
    request = add_worker_request(size)
    text = json.dumps(request, indent=2)
    marker = f'"hostname": "{request["allocations"][late]["hostname"]}",'
    assert text.count(marker) == 1, marker
    limit = worker_limit()
    return {
        "an address 90 % down": json.dumps(bad_address, indent=2),
        "a key twice 90 % down": text.replace(marker, marker + '\n      "hostname": "node-x",'),
        f"{limit + 1:,} workers, one more than allowed": json.dumps(
            add_worker_request(limit + 1), indent=2
        ),
    }


def faults(size: int, folder: Path, repeat: int) -> None:
    print(f"\nvalidate-request of a request with one fault (exit 2), {size:,} workers:\n")
    print(
        markdown.header(
            ["what is wrong", "finding", "line", "s", "peak MiB"], text={"what is wrong", "finding"}
        )
    )
    for fault, text in faulty_requests(size).items():
        request = folder / "faulty.json"
        request.write_text(text)
        argv = [str(DRIVER), "validate-request", str(request), "--format", "json"]
        runs = [measure(argv, exit_code=2) for _ in range(repeat)]
        (finding, *_) = json.loads(runs[0][2])["findings"]
        print(
            markdown.row(
                fault, f"`{finding['code']}` at `{finding['path']}`", finding.get("line") or "",
                f"{min(r[0] for r in runs):.2f}", f"{max(r[1] for r in runs):.0f}",
            )
        )  # fmt: skip


def many_findings(sizes: list[int], folder: Path, repeat: int) -> None:
    """A request of N workers every allocation of which carries one host key: N findings."""
    print("\nvalidate-request of a request whose allocations all carry one host key (exit 2):\n")
    print(markdown.header(["workers", "request KiB", "findings", "listed", "s", "peak MiB"]))
    for size in sizes:
        request = folder / f"one-key-{size}.json"
        data = one_host_key_request(size)
        request.write_text(json.dumps(data, indent=2))
        argv = [str(DRIVER), "validate-request", str(request), "--format", "json"]
        runs = [measure(argv, exit_code=2) for _ in range(repeat)]
        findings = json.loads(runs[0][2])["findings"]
        total = f"{len(data['allocations']) - 1:,}"  # each allocation's key but the first's
        print(
            markdown.row(
                f"{size:,}", f"{request.stat().st_size // 1024:,}", total, len(findings),
                f"{min(r[0] for r in runs):.2f}", f"{max(r[1] for r in runs):.0f}",
            )
        )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,1000,10000")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs per cell")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            request = Path(folder) / f"add_worker-{size}.json"
            request.write_text(json.dumps(add_worker_request(size), indent=2))
            row = {"workers": size, "request_kib": request.stat().st_size // 1024}
            for command in ("validate-request", "inventory"):
                argv = [str(DRIVER), command, str(request), "--format", "json"]
                runs = [measure(argv) for _ in range(args.repeat)]
                row[command] = min(r[0] for r in runs)
                row[f"{command} MiB"] = max(r[1] for r in runs)
                if command == "inventory":
                    hosts = json.loads(runs[0][2])["all"]["hosts"]
                    row["inventory hosts"] = len(hosts)
            rows.append(row)
    baseline = measure([str(DRIVER), "--version"])
    print(f"driver start (--version): {baseline[0]:.2f} s, {baseline[1]:.0f} MiB")
    columns = ["workers", "request KiB", "validate-request s", "peak MiB", "inventory s"]
    print(markdown.header([*columns, "peak MiB", "hosts"]))
    for r in rows:
        print(
            markdown.row(
                f"{r['workers']:,}", f"{r['request_kib']:,}", f"{r['validate-request']:.2f}",
                f"{r['validate-request MiB']:.0f}", f"{r['inventory']:.2f}",
                f"{r['inventory MiB']:.0f}", r["inventory hosts"],
            )
        )  # fmt: skip
    with tempfile.TemporaryDirectory() as folder:
        faults(max(sizes), Path(folder), args.repeat)
        many_findings(sizes, Path(folder), args.repeat)


if __name__ == "__main__":
    main()
