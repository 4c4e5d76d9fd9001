"""`slurm-app-driver lab up|down|status`: a Slurm cluster deployed through the driver, locally.

The lab plays the platform: it starts systemd containers as allocations, writes the
allocations and a deploy request exactly as the platform would send them, and runs the driver.
"""

import json
import re
import shutil
from pathlib import Path
from typing import Any

import yaml

from driver.lab.engine import log
from driver.lab.errors import LabError
from driver.lab.hosts import (
    LABEL,
    generate_ssh_key,
    lab_containers,
    remove_lab,
    start_hosts,
)
from driver.lab.images import MIRROR, build_image
from driver.lab.requests import allocation, deploy_request, portal_credentials_dir
from driver.lab.spec import (
    LAB_USER,
    MAX_LAB_GPUS,
    LabSpec,
    host_gpus,
    host_names,
    key_dir,
    lab_dir,
)
from driver.site import site_file


def up(spec: LabSpec, config: dict[str, Any] | None = None) -> Path:
    """Start the hosts and write the request, `config` laid over the lab's instance.config;
    returns the request file (the driver runs it)."""
    spec.validate()
    folder = lab_dir(spec.name)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = generate_ssh_key(key_dir(spec.name))
    image = build_image(spec.distro)
    log(f"starting {len(host_names(spec))} host(s) from {image}")
    hosts = start_hosts(
        spec.name,
        host_names(spec),
        image,
        key.with_suffix(".pub").read_text().strip(),
        spec.mount_path,
    )
    for host in hosts:
        _make_gpu_devices(spec.name, host.name, host_gpus(spec, hosts, host))
    write_lab_site()
    request = folder / "deploy.json"
    (folder / "members.json").unlink(missing_ok=True)  # a new deploy: its members start over
    request.write_text(json.dumps(deploy_request(spec, hosts, key, config), indent=2) + "\n")
    (folder / "allocations.json").write_text(
        json.dumps([allocation(spec, h, host_gpus(spec, hosts, h)) for h in hosts], indent=2) + "\n"
    )
    (folder / "spec.json").write_text(json.dumps(spec.__dict__) + "\n")
    return request


# The lab stands in for a platform whose hosts reach Debian's mirror only: no Grafana, no
# dcgm-exporter (and no GPU behind a host's GPU device files) and no Open OnDemand source.
LAB_SITE = {
    "grafana": {"source": "none"},
    "dcgm_exporter": {"source": "none"},
    "open_ondemand": {"source": "none"},
}
# Slurm 26.05 (slurm-reference 2.0.0) from Debian's own suites, pinned to its packages: forky
# for Slurm (whose Release on the mirror may have expired), trixie-backports for hwloc
# (docs/operations.md, Slurm 26.05). Apart from LAB_SITE: a release before 2.0.0's driver
# refuses site settings with a `slurm` key.
DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
LAB_SLURM_SOURCE = {
    "source": "repository",
    "repositories": [
        {
            "uri": MIRROR,
            "suite": "forky",
            "packages": [
                *("slurmctld", "slurmd", "slurmdbd", "slurm-client", "sackd"),
                *("slurm-wlm-basic-plugins", "slurm-wlm-mysql-plugin", "libllhttp9.4"),
            ],
            "signed_by": DEBIAN_KEYRING,
            "check_valid_until": False,
        },
        {
            "uri": MIRROR,
            "suite": "trixie-backports",
            "packages": ["libhwloc15", "libhwloc-plugins"],
            "signed_by": DEBIAN_KEYRING,
        },
    ],
}


LAB_SITE_HEADER = (
    "# Written by `slurm-app-driver lab up`: Grafana, dcgm-exporter and OOD cannot be "
    "installed here.\n"
)


def write_lab_site(path: Path | None = None, slurm_26_05: bool | None = None) -> None:
    """The platform's site settings for the lab (at `path`, default where this process's driver
    reads them), unless an operator wrote their own: one an earlier `lab up` wrote is written
    again. With the source of Slurm 26.05 where asked (None: where the earlier one had it)."""
    path = path or site_file()
    earlier = path.read_text() if path.exists() else None
    if earlier is not None and not earlier.startswith(LAB_SITE_HEADER):
        return
    if slurm_26_05 is None:
        slurm_26_05 = earlier is not None and "slurm" in (yaml.safe_load(earlier) or {})
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    site = LAB_SITE | ({"slurm": LAB_SLURM_SOURCE} if slurm_26_05 else {})
    path.write_text(LAB_SITE_HEADER + yaml.safe_dump(site))


def _make_gpu_devices(name: str, host: str, gpus: int) -> None:
    """The NVIDIA driver's GPU device files (character devices 195:N), with no GPU behind them:
    enough for the worker's detection, Slurm's gres and the GPU job mapping."""
    for index in range(gpus):
        device = f"/dev/nvidia{index}"
        made = host_container(name, host).exec_run(
            ["sh", "-c", f"[ -e {device} ] || mknod -m 0666 {device} c 195 {index}"]
        )
        if made.exit_code != 0:
            raise LabError(f"{host}: cannot create {device}: {made.output.decode()[-300:]}")


def add_host(name: str, host: str, storage: bool = True, gpus: int = 0) -> None:
    """Start one more host in a deployed lab, as the platform allocates one for add_worker;
    `lab op add_worker --target HOST` then joins it. A platform_mount lab's storage is mounted
    on it unless `storage` is false (how a broken platform mount looks). With `gpus`, the host
    gets that many NVIDIA GPU device files (/dev/nvidia0..), as the driver makes them, so that
    Slurm's gres and the GPU job mapping run as on a GPU host; no GPU answers behind them."""
    if not re.fullmatch(rf"{re.escape(name)}-[a-z0-9]{{1,20}}", host):
        raise LabError(f"host {host!r}: expected {name}-<letters or digits>, e.g. {name}-w03")
    if not 0 <= gpus <= MAX_LAB_GPUS:
        raise LabError(f"gpus: 0 to {MAX_LAB_GPUS}")
    spec = LabSpec(**json.loads((lab_dir(name) / "spec.json").read_text()))
    key = key_dir(name) / "id_ed25519"
    (started,) = start_hosts(
        name,
        [host],
        build_image(spec.distro),
        key.with_suffix(".pub").read_text().strip(),
        spec.mount_path if storage else None,
    )
    _make_gpu_devices(name, host, gpus)
    path = lab_dir(name) / "allocations.json"
    allocations = [a for a in json.loads(path.read_text()) if a["hostname"] != host]
    path.write_text(json.dumps([*allocations, allocation(spec, started, gpus)], indent=2) + "\n")


def host_container(name: str, host: str) -> Any:
    """The container standing in for one of the lab's hosts."""
    for container in lab_containers(name):
        if container.labels.get(f"{LABEL}.host") == host:
            return container
    raise LabError(f"lab {name!r} has no host {host}; run `slurm-app-driver lab up` first")


def controller_container(name: str) -> Any:
    """The controller's container: <name>-ctl, or the host replace_controller moved it to (the
    placement the lab recorded)."""
    folder = lab_dir(name)
    deploy = folder / "deploy.json"
    if not deploy.is_file():
        return host_container(name, f"{name}-ctl")
    request = json.loads(deploy.read_text())
    controller = request["instance"]["placement_intent"]["controller_allocation_id"]
    known = request["allocations"] + json.loads((folder / "allocations.json").read_text())
    host = next(a["hostname"] for a in known if a["id"] == controller)
    return host_container(name, host)


def test_job(name: str) -> str:
    """A job as the lab user across every node, run on the controller like a user would."""
    container = controller_container(name)
    script = (
        "set -e; cd /tmp; n=$(sinfo -h -N -o %N | sort -u | wc -l); "
        f'runuser -u {LAB_USER["name"]} -- srun -N"$n" --ntasks-per-node=1 -l hostname | sort'
    )
    result = container.exec_run(["/bin/bash", "-c", script])
    output: str = result.output.decode()
    if result.exit_code != 0:
        raise LabError(f"the test job failed: {output.strip()}")
    return output


def status(name: str | None) -> list[dict[str, str]]:
    rows = []
    for container in lab_containers(name):
        rows.append(
            {
                "lab": container.labels.get("io.slurm-app.lab", ""),
                "host": container.labels.get(f"{LABEL}.host", ""),
                "container": container.name,
                "state": container.status,
            }
        )
    return sorted(rows, key=lambda r: (r["lab"], r["host"]))


def sinfo(name: str) -> str:
    result = controller_container(name).exec_run(["sinfo", "-N", "-l"])
    output: str = result.output.decode()
    return output


def down(name: str) -> int:
    removed = remove_lab(name)
    allocations = lab_dir(name) / "allocations.json"
    hosts = (
        [a["hostname"] for a in json.loads(allocations.read_text())]
        if allocations.is_file()
        else []
    )
    portals = [portal_credentials_dir(name, host) for host in hosts]
    for folder in (lab_dir(name), key_dir(name), *portals):
        if folder.exists():
            shutil.rmtree(folder)
    return removed
