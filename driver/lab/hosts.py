"""Lab hosts: systemd containers with sshd on a private docker network, one per allocation."""

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docker.errors import NotFound

from driver.lab.engine import docker_client, log
from driver.lab.errors import LabError

LABEL = "io.slurm-app.lab"
# DESIGN §7: what a systemd container needs here (--privileged is not available).
SYSTEMD_RUN_OPTIONS: dict[str, Any] = {
    # SYS_NICE: slurmstepd sets a job's CPU affinity (task/affinity, the production profile)
    "cap_add": ["SYS_ADMIN", "SYS_NICE"],
    "security_opt": ["seccomp=unconfined", "apparmor=unconfined"],
    "tmpfs": {"/run": "", "/run/lock": ""},
    "volumes": {"/sys/fs/cgroup": {"bind": "/sys/fs/cgroup", "mode": "ro"}},
    "command": "/lib/systemd/systemd",
}


@dataclass(frozen=True)
class LabHost:
    name: str
    address: str
    container_id: str
    # what its sshd presents; the platform would register these with the allocation
    ssh_host_keys: list[str]


HOST_KEYS_MADE = "/etc/ssh/.slurm-app-lab-host-keys"
# The hosts reach the internet through this machine's network: the local authorities this
# machine trusts (an intercepting proxy's) they trust too, or npm's registry (code-server) is
# out of their reach. Public certificates only.
LOCAL_AUTHORITIES = Path("/usr/local/share/ca-certificates")


def network_name(lab: str) -> str:
    return f"slurm-app-lab-{lab}"


def generate_ssh_key(folder: Path) -> Path:
    """An ed25519 key pair for the lab, private to its owner."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = folder / "id_ed25519"
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "slurm-app-lab", "-f", str(key)],
            check=True,
        )
    key.chmod(0o600)
    return key


def _exec(container: Any, command: str) -> str:
    result = container.exec_run(["/bin/sh", "-c", command])
    if result.exit_code != 0:
        raise LabError(f"{container.name}: {command!r} failed: {result.output.decode()[-500:]}")
    output: str = result.output.decode()
    return output


def storage_volume(lab: str) -> str:
    """The docker volume standing in for the platform's storage of a platform_mount lab."""
    return f"{network_name(lab)}-storage"


def start_hosts(
    lab: str, names: list[str], image: str, public_key: str, storage_path: str | None = None
) -> list[LabHost]:
    """Start (or find) the lab's hosts; with `storage_path`, the lab's storage volume is
    mounted there on each host started now, as the platform mounts a tenant's storage."""
    client = docker_client()
    network = network_name(lab)
    if not client.networks.list(names=[network]):
        client.networks.create(network, driver="bridge", labels={LABEL: lab})
    hosts = []
    for name in names:
        container_name = f"{network}-{name}"
        try:
            container = client.containers.get(container_name)
            if container.status != "running":
                container.start()
        except NotFound:
            options = dict(SYSTEMD_RUN_OPTIONS)
            if storage_path is not None:
                volume = storage_volume(lab)
                if not client.volumes.list(filters={"name": volume}):
                    client.volumes.create(volume, labels={LABEL: lab})
                options["volumes"] = {
                    **SYSTEMD_RUN_OPTIONS["volumes"],
                    volume: {"bind": storage_path, "mode": "rw"},
                }
            container = client.containers.run(
                image,
                name=container_name,
                hostname=name,
                network=network,
                detach=True,
                labels={LABEL: lab, f"{LABEL}.host": name},
                **options,
            )
        hosts.append(container)
    deadline = time.monotonic() + 120
    for container in hosts:
        while True:
            container.reload()
            if container.status != "running":
                said = container.logs(tail=5).decode(errors="replace").strip()
                # systemd's words when the 26th host hit Debian's 128 inotify instances per
                # user (bench/README.md, "24 real workers")
                hint = (
                    "; systemd may have run out of inotify instances: raise "
                    "fs.inotify.max_user_instances (scripts/setup.sh sets 1024)"
                    if any(word in said.lower() for word in ("inotify", "too many open files"))
                    else ""
                )
                raise LabError(
                    f"{container.name}: the container stopped at once ({container.status}, exit "
                    f"{container.attrs['State'].get('ExitCode')}){hint}; it said:\n{said}"
                )
            state = container.exec_run(["systemctl", "is-system-running"]).output.decode().strip()
            if state in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                raise LabError(f"{container.name}: systemd did not finish booting ({state})")
            time.sleep(1)
        _exec(
            container,
            "install -d -m 0700 /root/.ssh && "
            f"printf '%s\\n' '{public_key}' > /root/.ssh/authorized_keys && "
            "chmod 0600 /root/.ssh/authorized_keys && "
            # the image carries the host keys made when it was built: each host gets its own
            f"if [ ! -e {HOST_KEYS_MADE} ]; then rm -f /etc/ssh/ssh_host_* && ssh-keygen -A && "
            f"touch {HOST_KEYS_MADE} && systemctl restart ssh; fi && systemctl is-active ssh",
        )
        authorities = sorted(LOCAL_AUTHORITIES.glob("*.crt"))
        if authorities:
            _exec(
                container,
                "".join(
                    f"cat > {LOCAL_AUTHORITIES}/slurm-app-lab-{path.name} <<'EOF'\n"
                    f"{path.read_text().strip()}\nEOF\n"
                    for path in authorities
                )
                + "update-ca-certificates >/dev/null",
            )
        container.reload()
    return [
        LabHost(
            name=c.labels[f"{LABEL}.host"],
            address=c.attrs["NetworkSettings"]["Networks"][network]["IPAddress"],
            container_id=c.id,
            ssh_host_keys=host_keys(c),
        )
        for c in hosts
    ]


def host_keys(container: Any) -> list[str]:
    """The public host keys the container's sshd presents, without their comments."""
    listed = _exec(container, "cat /etc/ssh/ssh_host_*_key.pub")
    return [" ".join(line.split()[:2]) for line in listed.splitlines() if line.strip()]


def lab_containers(lab: str | None = None) -> list[Any]:
    selector = f"{LABEL}={lab}" if lab else LABEL
    containers: list[Any] = docker_client().containers.list(all=True, filters={"label": selector})
    return containers


def remove_lab(lab: str) -> int:
    """Remove the lab's containers and network: only what carries this lab's label."""
    client = docker_client()
    removed = 0
    for container in lab_containers(lab):
        container.remove(force=True, v=True)
        removed += 1
    for network in client.networks.list(filters={"label": f"{LABEL}={lab}"}):
        network.remove()
    # the platform's storage goes with the lab (a decommission keeps it; `lab down` does not)
    for volume in client.volumes.list(filters={"label": f"{LABEL}={lab}"}):
        volume.remove(force=True)
    if removed:
        log(f"removed {removed} container(s) of lab {lab!r}")
    return removed
