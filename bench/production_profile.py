"""The production profile's cgroup confinement, started and proved on the lab.

The lab's hosts are containers, where the roles choose the container profile
(`proctrack/linuxproc`, `task/none`). This deploys a Debian 13 lab of 1 controller and 1
worker with two GPU device files through the driver, switches it to the production profile as
an operator would (`ansible-playbook playbooks/deploy.yml -e slurm_common_profile=production`
on the driver's own inventory for the deploy: `proctrack/cgroup`, `task/cgroup,task/affinity`,
`jobacct_gather/cgroup`, cgroup.conf constraining cores, devices and RAM), then proves it with
jobs of `labuser` on the worker:

- devices: a job holding `gpu:1` opens every `/dev/nvidia*`. Its own gives ENXIO (no driver
  behind the file: the device cgroup let the open through), the other EPERM (the device cgroup
  refused it); and CUDA_VISIBLE_DEVICES;
- cores: a job of one CPU has one CPU in its affinity and its cpuset;
- memory: a job of `--mem=64M` that fills 256 MiB: with the roles' default
  `SelectTypeParameters=CR_Core` (memory not a consumable) and again with `CR_Core_Memory`,
  with the memory limit of each cgroup from the task's up;
- tracking: a process the job leaves behind (`setsid`, reparented to init) is gone once the
  job ends; the same job before the switch, in the container profile, is the control;
- a portal session of 1 CPU and 512 MiB (issue 72, point 1): the sbatch options the apps'
  submit.yml.erb makes of that form, its CPUs and memory limit read inside the job, with
  `CR_Core_Memory`.

At the end slurmd is stopped and the cgroups Slurm made are removed: the lab's hosts share the
machine's cgroup v1 hierarchies, so they would outlive the containers.

The host here mounts cgroup v1 (DESIGN §7), so Slurm's `cgroup/v1` plugin runs; cgroup v2
(the GPU hosts' Debian 12 and 13 default) cannot be started on this kernel's mounts.

Usage: python -m bench.production_profile [--keep]. The lab is `prof`; removed unless --keep.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from driver.lab import lab as lab_hosts
from driver.lab.lab import host_container
from driver.lab.spec import lab_dir

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
LAB = "prof"

# Each job prints its evidence; the name says what it proves.
JOBS = {
    "devices": (
        ["--gres=gpu:1"],
        "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; "
        "python3 -c 'import errno, glob, os\n"
        'for path in sorted(glob.glob("/dev/nvidia[0-9]*")):\n'
        "    try:\n"
        '        os.close(os.open(path, os.O_RDWR)); print(path, "opened")\n'
        "    except OSError as e:\n"
        "        print(path, errno.errorcode[e.errno])'",
    ),
    "cores": (
        ["-c1"],
        "grep Cpus_allowed_list /proc/self/status; "
        "cat /sys/fs/cgroup/cpuset$(sed -n 's/^[0-9]*:cpuset://p' /proc/self/cgroup)/cpuset.cpus",
    ),
    "memory": (
        ["--mem=64M"],
        "p=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); while [ \"$p\" != / ]; do "
        'echo "$p $(cat /sys/fs/cgroup/memory$p/memory.limit_in_bytes)"; p=$(dirname $p); '
        "done; python3 -c 'b = bytearray(256 << 20); print(\"filled\", len(b))'",
    ),
    "tracking": (["-c1"], "setsid sleep 7777 < /dev/null > /dev/null 2>&1 & echo left sleep 7777"),
    # the options open_ondemand's submit.yml.erb.j2 gives a form of cpus=1, memory_mib=512
    "session": (
        ["--nodes=1", "--ntasks-per-node=1", "--cpus-per-task=1", "--mem=512M"],
        "grep Cpus_allowed_list /proc/self/status; "
        "p=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup); while [ \"$p\" != / ]; do "
        'echo "$p $(cat /sys/fs/cgroup/memory$p/memory.limit_in_bytes)"; p=$(dirname $p); '
        "done",
    ),
}


def on(host: str, command: str, user: str | None = None) -> str:
    argv = ["runuser", "-u", user, "--"] if user else []
    ran = host_container(LAB, host).exec_run([*argv, "bash", "-c", command])
    return ran.output.decode()


def switch_to_production(*settings: str) -> float:
    """The deploy's playbook with the production profile (and `settings`, more extra vars),
    as an operator runs it."""
    inventory = lab_dir(LAB) / "production-inventory.yml"
    inventory.write_text(
        subprocess.run([str(BIN / "slurm-app-driver"), "inventory",
                        str(lab_dir(LAB) / "deploy.json")],
                       capture_output=True, text=True, check=True).stdout
    )  # fmt: skip
    known_hosts = lab_dir(LAB) / "production-known-hosts"
    env = {
        **os.environ,
        "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=60s "
        f"-o StrictHostKeyChecking=accept-new -o UserKnownHostsFile={known_hosts}",
    }
    started = time.perf_counter()
    done = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), "playbooks/deploy.yml",
         "-e", "slurm_common_profile=production", *(f"-e{v}" for v in settings)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"the production deploy failed:\n{done.stdout[-4000:]}")
    print(done.stdout[done.stdout.rindex("PLAY RECAP") :].strip())
    return time.perf_counter() - started


def run_job(name: str, options: list[str], script: str) -> tuple[str, str, str]:
    """The job on the worker, waited for: its state, exit code and output."""
    output = f"/home/labuser/profile-{name}.out"
    argv = " ".join(["sbatch", "--wait", "-w", f"{LAB}-w01", "-o", output, *options])
    quoted = script.replace("'", "'\\''")
    job_id = on(f"{LAB}-ctl", f"{argv} --parsable --wrap '{quoted}' ; true", "labuser")
    job_id = job_id.strip().splitlines()[0] if job_id.strip() else "?"
    state = on(f"{LAB}-ctl", f"sacct -X -n -P -j {job_id} -o State,ExitCode").strip()
    return job_id, state, on(f"{LAB}-w01", f"cat {output}")


def report(name: str, profile: str) -> None:
    options, script = JOBS[name]
    job_id, state, output = run_job(name, options, script)
    print(f"## {name} ({profile}): job {job_id} {state}\n{output.strip()}")
    if name == "tracking":
        left = on(f"{LAB}-w01", "pgrep -a -f '^sleep 7777' || echo none")
        print(f"processes left after the job: {left.strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="leave the lab running")
    args = parser.parse_args()
    try:
        up = ["lab", "up", "--name", LAB, "--workers", "1", "--gpus", "2"]
        subprocess.run([str(BIN / "slurm-app-driver"), *up], check=True, capture_output=True)
        report("tracking", "container profile, before the switch")
        on(f"{LAB}-w01", "pkill -f '^sleep 7777' || true")
        print(f"production deploy: {switch_to_production():.1f} s")
        plugins = "ProctrackType|TaskPlugin |JobAcctGatherType|CgroupPlugin|SelectTypeP"
        print(on(f"{LAB}-ctl", f"scontrol show config | grep -E '^({plugins})'"))
        for name in JOBS:
            if name != "session":
                report(name, "production profile")
        memory = switch_to_production("slurm_controller_select_type_parameters=CR_Core_Memory")
        print(f"production deploy, CR_Core_Memory: {memory:.1f} s")
        report("memory", "production profile, CR_Core_Memory")
        report("session", "production profile, CR_Core_Memory")
        print(on(f"{LAB}-w01", "systemctl stop slurmd; "
                 "find /sys/fs/cgroup/*/slurm_* -depth -type d -exec rmdir {} + ; "
                 "ls -d /sys/fs/cgroup/*/slurm_* 2>&1"))  # fmt: skip
    finally:
        if not args.keep:
            lab_hosts.down(LAB)


if __name__ == "__main__":
    main()
