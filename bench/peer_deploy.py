"""Our deploy against galaxyproject's Slurm role, side by side in one run, as the cluster grows.

For each size (1 controller + N workers), alternately: our deploy through `slurm-app-driver lab
up` (monitoring on, the lab's default: node_exporter on every member, Prometheus, accounting),
and galaxyproject's role (`galaxyproject/ansible-slurm`, a checkout given by --galaxy; nothing
of it is kept in this repository) on fresh hosts of the same image, over the same SSH, from
the same ansible-playbook. The peer gets what it needs to run jobs in a container (the lab's
munge key, slurm.conf with proctrack/linuxproc and task/none, each node's address); its
packages are downloaded untimed first (the image caches only ours). Each peer row is split into
its playbook and the time until `srun -N <all>` ran on every node, which is where our readiness
proof ends. Each deploy's memory is the peak of its process tree's proportional set sizes
(sampled every second: ours the driver, ansible-runner, ansible-playbook and its workers;
Galaxy's ansible-playbook and its workers). Beside them, the floor of node_exporter alone: its
package installed on a fresh host from the image's cache.

--chart FILE draws control CPU and wall time against the workers, both deploys, as an SVG
(matplotlib: `pip install -e '.[bench]'`).

Usage: python -m bench.peer_deploy --galaxy PATH [--distro bookworm] [--sizes 3 6] [--keep]
[--json FILE] [--chart FILE]
"""

import argparse
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from bench import markdown
from bench.bulk_add import control_cpu_s
from bench.concurrent_operations import MIB, children_sampled
from bench.member_operations import PLATFORM_ENV, driver, figures, on_host, result_of
from driver.lab import lab as lab_hosts
from driver.lab.spec import LabSpec, key_dir, lab_dir

ROOT = Path(__file__).resolve().parent.parent
OURS, PEER = "pdours", "pdpeer"
# what the role installs on a controller and on an execution host alike (its Debian defaults)
PEER_PACKAGES = ("slurm-wlm", "slurm-client", "slurm-wlm-doc", "munge")


def peer_vars(allocations: list[dict[str, Any]], key: Path) -> dict[str, Any]:
    """The role's variables for these hosts: its own defaults but what a container needs."""
    controller = next(a for a in allocations if a["hostname"].endswith("-ctl"))
    workers = [a for a in allocations if a is not controller]
    return {
        "slurm_munge_key": str(key),
        "slurm_config": {
            "ClusterName": PEER,
            "SlurmctldHost": f"{controller['hostname']}({controller['address']})",
            "ProctrackType": "proctrack/linuxproc",
            "TaskPlugin": "task/none",
            "SelectType": "select/cons_tres",
            "SelectTypeParameters": "CR_Core",
            "ReturnToService": 2,
            "MailProg": "/bin/true",
        },
        "slurm_nodes": [
            {"name": w["hostname"], "NodeAddr": w["address"], "CPUs": 2, "State": "UNKNOWN"}
            for w in workers
        ],
        "slurm_partitions": [{"name": "batch", "Default": "YES", "Nodes": "ALL"}],
    }


def peer_deploy(galaxy: Path, codename: str, workers: int) -> dict[str, Any]:
    """Fresh hosts, the role's playbook timed, then the time until a job ran on every node."""
    lab_hosts.up(LabSpec(name=PEER, workers=workers, distro=codename))
    folder = lab_dir(PEER)
    allocations = json.loads((folder / "allocations.json").read_text())
    download = "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --download-only "
    for allocation in allocations:
        on_host(PEER, allocation["hostname"], download + " ".join(PEER_PACKAGES))
    munge_key = folder / "munge.key"
    munge_key.write_bytes(os.urandom(1024))
    inventory = {
        "all": {
            "hosts": {
                a["hostname"]: {
                    "ansible_host": a["address"],
                    "ansible_user": "root",
                    "ansible_ssh_private_key_file": str(key_dir(PEER) / "id_ed25519"),
                }
                for a in allocations
            },
            "children": {
                "slurmservers": {"hosts": {f"{PEER}-ctl": None}},
                "slurmexechosts": {
                    "hosts": {a["hostname"]: None for a in allocations if "-w" in a["hostname"]}
                },
            },
            "vars": peer_vars(allocations, munge_key),
        }
    }
    (folder / "peer-inventory.yml").write_text(yaml.safe_dump(inventory))
    (folder / "peer.yml").write_text(
        yaml.safe_dump([{"name": "Slurm", "hosts": "all", "roles": [{"role": str(galaxy)}]}])
    )
    env = {
        **PLATFORM_ENV,
        "ANSIBLE_HOST_KEY_CHECKING": "False",
        "ANSIBLE_FORKS": "50",
        "ANSIBLE_PIPELINING": "True",
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
    }
    started = time.perf_counter()
    first = peer_playbook(folder, env)
    on_host(PEER, f"{PEER}-ctl", f"timeout 180 srun -N {workers} -t 1 hostname")
    until_a_job_ran = time.perf_counter() - started
    before = control_cpu_s()
    again = peer_playbook(folder, env)
    return {
        **first,
        "until_a_job_ran_s": round(until_a_job_ran, 1),
        "rerun_s": again["playbook_s"],
        "rerun_changed": again["changed"],
        "rerun_cpu_s": round(control_cpu_s() - before, 1),
    }


def peer_playbook(folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """The role's playbook once: its time, changes and tasks."""
    playbook = ROOT / ".venv" / "bin" / "ansible-playbook"
    started = time.perf_counter()
    ran = subprocess.run(
        [str(playbook), "-i", str(folder / "peer-inventory.yml"), str(folder / "peer.yml")],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    playbook_s = time.perf_counter() - started
    if ran.returncode != 0:
        raise SystemExit(f"the peer role failed:\n{ran.stdout[-3000:]}")
    recap = ran.stdout[ran.stdout.rfind("PLAY RECAP") :]
    changed = sum(int(part.split("=")[1]) for part in recap.split() if part.startswith("changed="))
    return {
        "playbook_s": round(playbook_s, 1),
        "changed": changed,
        "tasks": ran.stdout.count("\nTASK ["),
    }


def node_exporter_floor(codename: str) -> float:
    """node_exporter's package alone on a fresh host, from the image's cache, until it serves."""
    lab_hosts.up(LabSpec(name=PEER, workers=1, distro=codename))
    started = time.perf_counter()
    on_host(
        PEER,
        f"{PEER}-w01",
        "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
        'prometheus-node-exporter && until python3 -c "import urllib.request as u; '
        "u.urlopen('http://127.0.0.1:9100/metrics')\" 2>/dev/null; do sleep 0.2; done",
    )
    return time.perf_counter() - started


COLUMNS = {
    "size": "cluster",
    "ours_s": "ours: deploy s (until readiness proven)",
    "ours_changes": "ours: changes",
    "ours_tasks": "ours: tasks",
    "ours_cpu_s": "ours: control CPU s",
    "peer_playbook_s": "Galaxy: playbook s",
    "peer_job_s": "Galaxy: until srun ran on every node s",
    "peer_changes": "Galaxy: changes",
    "peer_tasks": "Galaxy: tasks",
    "peer_cpu_s": "Galaxy: control CPU s",
    "ours_pss_mib": "ours: peak memory MiB",
    "peer_pss_mib": "Galaxy: peak memory MiB",
    "ours_rerun_s": "ours: unchanged re-run s",
    "ours_rerun_cpu_s": "ours: re-run control CPU s",
    "peer_rerun_s": "Galaxy: unchanged re-run s",
    "peer_rerun_cpu_s": "Galaxy: re-run control CPU s",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--galaxy", required=True, type=Path, help="galaxyproject/ansible-slurm")
    parser.add_argument("--distro", default="bookworm")
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--keep", action="store_true", help="leave the last labs running")
    parser.add_argument("--json", help="also write the measurements here")
    parser.add_argument("--chart", type=Path, help="draw the curves into this SVG")
    args = parser.parse_args()
    rows = []
    try:
        for workers in args.sizes:
            for lab in (OURS, PEER):
                lab_hosts.down(lab)
            before = control_cpu_s()
            with children_sampled(1.0) as ours_memory:
                wall = driver("lab", "up", "--name", OURS, "--workers", str(workers),
                              "--distro", args.distro)  # fmt: skip
            ours, ours_cpu = figures(OURS, "deploy", wall), control_cpu_s() - before
            before = control_cpu_s()
            driver("lab", "op", "deploy", "--name", OURS, "--format", "json")
            rerun, rerun_cpu = result_of(OURS, "deploy"), control_cpu_s() - before
            before = control_cpu_s()
            with children_sampled(1.0) as peer_memory:
                peer = peer_deploy(args.galaxy.resolve(), args.distro, workers)
            peer_cpu = control_cpu_s() - before
            rows.append({
                "size": f"1+{workers}", "ours_s": ours["duration_s"],
                "ours_changes": ours["changed"], "ours_tasks": ours["tasks"],
                "ours_cpu_s": round(ours_cpu, 1),
                "peer_playbook_s": peer["playbook_s"], "peer_job_s": peer["until_a_job_ran_s"],
                "peer_changes": peer["changed"], "peer_tasks": peer["tasks"],
                "peer_cpu_s": round(peer_cpu - peer["rerun_cpu_s"], 1),
                "ours_rerun_s": rerun["duration_s"], "ours_rerun_cpu_s": round(rerun_cpu, 1),
                "peer_rerun_s": peer["rerun_s"], "peer_rerun_cpu_s": peer["rerun_cpu_s"],
                "ours_pss_mib": round(ours_memory.peak_pss / MIB),
                "peer_pss_mib": round(peer_memory.peak_pss / MIB),
            })  # fmt: skip
            if args.json:  # each size as it ends: a long run stopped early keeps what it measured
                Path(args.json).write_text(json.dumps({"rows": rows}) + "\n")
        for lab in (OURS, PEER):
            lab_hosts.down(lab)
        exporter_s = node_exporter_floor(args.distro)
    finally:
        if not args.keep:
            for lab in (OURS, PEER):
                lab_hosts.down(lab)
    print(markdown.header(list(COLUMNS.values()), text={"cluster"}))
    for row in rows:
        print(markdown.row(*(row[key] for key in COLUMNS)))
    first, last = rows[0], rows[-1]
    added = int(last["size"][2:]) - int(first["size"][2:])
    if added:
        ours = (last["ours_s"] - first["ours_s"]) / added
        peer = (last["peer_job_s"] - first["peer_job_s"]) / added
        print(
            f"\nper extra worker: ours {ours:.1f} s, Galaxy {peer:.1f} s (until a job ran), "
            f"node_exporter's install alone {exporter_s:.1f} s; "
            f"target {peer + exporter_s:.1f} s"
        )
        print(ratios(first, last, added))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "node_exporter_s": exporter_s}) + "\n")
    if args.chart:
        chart(rows, args.chart)


def chart(rows: list[dict[str, Any]], path: Path) -> None:
    """Control CPU and wall time against the workers, ours and Galaxy's, side by side."""
    # imported here: a bench extra, which the tables need none of
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    workers = [int(row["size"][2:]) for row in rows]
    figure, (cpu, wall) = plt.subplots(1, 2, figsize=(10, 4))
    for axes, ours, peer, label in (
        (cpu, "ours_cpu_s", "peer_cpu_s", "control CPU s"),
        (wall, "ours_s", "peer_job_s", "s until a job ran on every node"),
    ):
        axes.plot(workers, [row[ours] for row in rows], marker="o", label="ours")
        axes.plot(workers, [row[peer] for row in rows], marker="s", label="galaxyproject's role")
        axes.set_xlabel("workers (1 controller + N)")
        axes.set_ylabel(label)
        axes.set_xticks(workers)
        axes.grid(alpha=0.3)
        axes.legend()
    figure.suptitle("A deploy's control side against the cluster's size (2 cores, one run)")
    figure.tight_layout()
    figure.savefig(path, metadata={"Date": None})


def ratios(first: dict[str, Any], last: dict[str, Any], added: int) -> str:
    """Issue 67's three: the deploy (until a job ran) ours / Galaxy's at each size, the control
    CPU per extra worker, and the unchanged re-run."""
    deploy = ", ".join(
        f"{row['size']} {row['ours_s'] / row['peer_job_s']:.2f}" for row in (first, last)
    )
    cpu = ((last["ours_cpu_s"] - first["ours_cpu_s"]) / added) / (
        (last["peer_cpu_s"] - first["peer_cpu_s"]) / added
    )
    rerun = ", ".join(
        f"{row['size']} {row['ours_rerun_s'] / row['peer_rerun_s']:.2f}" for row in (first, last)
    )
    return (
        f"ours / Galaxy: deploy {deploy}; control CPU per extra worker {cpu:.2f}; "
        f"unchanged re-run {rerun}"
    )


if __name__ == "__main__":
    main()
