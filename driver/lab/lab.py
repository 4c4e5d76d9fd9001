"""`slurm-app-driver lab up|down|status`: a Slurm cluster deployed through the driver, locally.

The lab plays the platform: it starts systemd containers as allocations, writes the
allocations and a deploy request exactly as the platform would send them, and runs the driver.
"""

import json
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from driver.catalog import instance_credentials_dir, state_dir
from driver.lab.engine import log
from driver.lab.errors import LabError
from driver.lab.hosts import (
    LABEL,
    LabHost,
    generate_ssh_key,
    lab_containers,
    remove_lab,
    start_hosts,
)
from driver.lab.images import build_image, distro
from driver.site import site_file

LAB_PROJECT = "lab-project"
LAB_NAMESPACE = uuid.UUID("8a7d6f3e-52c1-4b8e-9f0a-3d2c1b0a9e8f")
LAB_USER = {"name": "labuser", "uid": 2000, "gid": 2000}
LAB_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
STORAGE_MODELS = ("allocation_local", "platform_mount")
# Where a platform_mount lab's storage volume is mounted on every host (the config's default).
LAB_MOUNT = "/workspace"


MAX_LAB_GPUS = 8


@dataclass(frozen=True)
class LabSpec:
    name: str = "lab"
    workers: int = 2
    distro: str = "trixie"
    placement: str = "separate"
    # allocation_local, or platform_mount: one volume mounted at LAB_MOUNT on every host
    storage: str = "allocation_local"
    # what Open OnDemand's sessions start on the workers (the config's interactive_runtimes)
    interactive_runtimes: tuple[str, ...] = ()
    # GPU device files on each host that runs slurmd: the separate workers, or same_node's
    # controller (no GPU behind them: see add_host)
    gpus: int = 0

    def validate(self) -> None:
        if not LAB_NAME.fullmatch(self.name):
            raise LabError("lab name: 1-12 lower-case letters and digits, starting with a letter")
        distro(self.distro)
        if self.placement not in ("separate", "same_node"):
            raise LabError("placement: separate or same_node")
        if self.placement == "separate" and not 1 <= self.workers <= 16:
            raise LabError("workers: 1 to 16 for separate placement")
        if self.storage not in STORAGE_MODELS:
            raise LabError(f"storage: {' or '.join(STORAGE_MODELS)}")
        if not 0 <= self.gpus <= MAX_LAB_GPUS:
            raise LabError(f"gpus: 0 to {MAX_LAB_GPUS}")

    @property
    def mount_path(self) -> str | None:
        return LAB_MOUNT if self.storage == "platform_mount" else None


def lab_dir(name: str) -> Path:
    return state_dir() / "labs" / name


def key_dir(name: str) -> Path:
    """The lab cluster's credentials folder, where the platform keeps an instance's:
    <credentials root>/<project>/<instance id>/ (the driver refuses files anywhere else)."""
    return instance_credentials_dir(LAB_PROJECT, uuid.UUID(_uuid(LabSpec(name=name), "instance")))


def portal_instance_id(name: str, host: str) -> str:
    return _uuid(LabSpec(name=name), f"portal/{host}")


def portal_credentials_dir(name: str, host: str) -> Path:
    """The credentials folder of the lab's portal on `host`: its own, as another instance."""
    return instance_credentials_dir(LAB_PROJECT, uuid.UUID(portal_instance_id(name, host)))


def _uuid(spec: LabSpec, what: str) -> str:
    return str(uuid.uuid5(LAB_NAMESPACE, f"{spec.name}/{what}"))


def host_names(spec: LabSpec) -> list[str]:
    workers = (
        []
        if spec.placement == "same_node"
        else [f"{spec.name}-w{index:02d}" for index in range(1, spec.workers + 1)]
    )
    return [f"{spec.name}-ctl", *workers]


def _allocation(spec: LabSpec, host: LabHost, gpus: int = 0) -> dict[str, Any]:
    return {
        "id": _uuid(spec, f"allocation/{host.name}"),
        "project_id": LAB_PROJECT,
        "hostname": host.name,
        "address": host.address,
        "ssh_user": "root",
        "ssh_port": 22,
        "gpus": gpus,
        "ssh_host_keys": host.ssh_host_keys,
    }


def _gpus(spec: LabSpec, hosts: list[LabHost], host: LabHost) -> int:
    """The GPU device files `host` gets: the spec's on every host that runs slurmd."""
    runs_slurmd = spec.placement == "same_node" or host in hosts[1:]
    return spec.gpus if runs_slurmd else 0


def deploy_request(spec: LabSpec, hosts: list[LabHost], key: Path) -> dict[str, Any]:
    """The deploy request as the platform's app controller would send it."""
    workers = hosts[1:]
    allocations = [_allocation(spec, h, _gpus(spec, hosts, h)) for h in hosts]
    controller_id, worker_ids = allocations[0]["id"], [a["id"] for a in allocations[1:]]
    members = [
        {
            "member_id": f"{spec.name}-controller",
            "component_key": "controller",
            "allocation_id": controller_id,
            "status": "pending",
        }
    ]
    if spec.placement == "same_node":
        members.append(
            {
                "member_id": f"{spec.name}-worker-ctl",
                "component_key": "worker",
                "allocation_id": controller_id,
                "status": "pending",
            }
        )
    members += [
        {
            "member_id": f"{spec.name}-worker-{h.name}",
            "component_key": "worker",
            "allocation_id": a,
            "status": "pending",
        }
        for h, a in zip(workers, worker_ids, strict=True)
    ]
    return {
        "api_version": "v1",
        "correlation_id": f"lab-{uuid.uuid4()}",
        "org_id": "lab-org",
        "project_id": LAB_PROJECT,
        "instance": {
            "id": _uuid(spec, "instance"),
            "app_slug": "slurm-reference",
            "version": "1.0",
            "name": f"{spec.name}-slurm",
            "config": {
                "cluster_name": spec.name,
                "users": [LAB_USER],
                **(
                    {"storage": {"model": "platform_mount", "mount_path": LAB_MOUNT}}
                    if spec.mount_path
                    else {}
                ),
                **(
                    {"interactive_runtimes": list(spec.interactive_runtimes)}
                    if spec.interactive_runtimes
                    else {}
                ),
            },
            "placement_intent": {
                "controller_allocation_id": controller_id,
                "worker_placement": spec.placement,
                "worker_allocation_ids": worker_ids,
                "access_credential_id": _uuid(spec, "credential"),
            },
        },
        "members": members,
        "operation": {"id": f"lab-deploy-{uuid.uuid4()}", "type": "deploy"},
        "allocations": allocations,
        "credentials": {"ssh_private_key_file": str(key)},
    }


def up(spec: LabSpec) -> Path:
    """Start the hosts and write the request; returns the request file (the driver runs it)."""
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
        _make_gpu_devices(spec.name, host.name, _gpus(spec, hosts, host))
    write_lab_site()
    request = folder / "deploy.json"
    (folder / "members.json").unlink(missing_ok=True)  # a new deploy: its members start over
    request.write_text(json.dumps(deploy_request(spec, hosts, key), indent=2) + "\n")
    (folder / "allocations.json").write_text(
        json.dumps([_allocation(spec, h, _gpus(spec, hosts, h)) for h in hosts], indent=2) + "\n"
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


def write_lab_site(path: Path | None = None) -> None:
    """The platform's site settings for the lab (at `path`, default where this process's driver
    reads them), unless an operator wrote their own."""
    path = path or site_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_text(
            "# Written by `slurm-app-driver lab up`: Grafana, dcgm-exporter and OOD cannot be "
            "installed here.\n" + yaml.safe_dump(LAB_SITE)
        )


def _cluster_as_it_stands(name: str) -> dict[str, Any]:
    """The lab's deploy request with its members as the last successful operation left them
    (all ready after the deploy)."""
    folder = lab_dir(name)
    deploy = folder / "deploy.json"
    if not deploy.is_file():
        raise LabError(f"lab {name!r} has no deploy request; run `slurm-app-driver lab up` first")
    request = json.loads(deploy.read_text())
    members = folder / "members.json"
    if members.is_file():
        request["members"] = json.loads(members.read_text())
    else:
        for member in request["members"]:
            member["status"] = "ready"
    return request


def operation_request(
    name: str,
    operation: str,
    target: str | list[str] | None = None,
    options: dict[str, Any] | None = None,
    replacement: str | None = None,
) -> Path:
    """A member operation on a deployed lab, as the platform would send it after the deploy
    succeeded (every member ready); `target` is a lab host name, or several (operation.targets:
    a join of several new hosts in one run); `replacement` the new host that takes the
    target's place (replace_worker). Returns the request file."""
    folder = lab_dir(name)
    request = _cluster_as_it_stands(name)
    known = {a["id"] for a in request["allocations"]}
    request["allocations"] += [
        a for a in json.loads((folder / "allocations.json").read_text()) if a["id"] not in known
    ]
    request["correlation_id"] = f"lab-{uuid.uuid4()}"
    request["operation"] = {"id": f"lab-{operation}-{uuid.uuid4()}", "type": operation}
    hosts = [target] if isinstance(target, str) else list(target or [])
    refs = [
        {"allocation_id": _target_allocation(name, request, host, operation == "add_worker")}
        for host in hosts
    ]
    if len(refs) == 1:
        request["operation"]["target"] = refs[0]
    elif refs:
        request["operation"]["targets"] = refs
    if replacement is not None:
        request["operation"]["replacement"] = {
            "allocation_id": _target_allocation(name, request, replacement, joining=True)
        }
    if options:
        request["operation"]["options"] = options
    path = folder / f"{operation}.json"
    path.write_text(json.dumps(request, indent=2) + "\n")
    return path


def _target_allocation(name: str, request: dict[str, Any], host: str, joining: bool) -> str:
    """The allocation of the lab host an operation targets; a host added after the deploy
    enters the request's members as a worker (pending where the operation joins it)."""
    allocation = next((a for a in request["allocations"] if a["hostname"] == host), None)
    if allocation is None:
        hosts = ", ".join(a["hostname"] for a in request["allocations"])
        raise LabError(f"lab {name!r} has no host {host!r} (hosts: {hosts})")
    if not any(m["allocation_id"] == allocation["id"] for m in request["members"]):
        request["members"].append(
            {
                "member_id": f"{name}-worker-{host}",
                "component_key": "worker",
                "allocation_id": allocation["id"],
                "status": "pending" if joining else "ready",
            }
        )
    return str(allocation["id"])


def task_request(
    name: str, task: str, user: str | None = None, given: dict[str, Any] | None = None
) -> Path:
    """One of the app's typed tasks on the deployed lab's controller, as the platform's node
    agent would be asked to run it (`slurm-app-driver task`). Returns the request file."""
    deploy = _cluster_as_it_stands(name)
    controller_id = deploy["instance"]["placement_intent"]["controller_allocation_id"]
    controller = next(a for a in deploy["allocations"] if a["id"] == controller_id)
    request = {
        "api_version": "v1",
        "correlation_id": f"lab-{uuid.uuid4()}",
        "org_id": deploy["org_id"],
        "project_id": deploy["project_id"],
        "instance": {k: deploy["instance"][k] for k in ("id", "app_slug", "version")},
        "allocation": controller,
        "credentials": {"ssh_private_key_file": deploy["credentials"]["ssh_private_key_file"]},
        "task": {"name": task, "input": given or {}, **({"user": user} if user else {})},
    }
    path = lab_dir(name) / f"task-{task}.json"
    path.write_text(json.dumps(request, indent=2) + "\n")
    return path


def portal_request(
    name: str, host: str, operation: str, config: dict[str, Any], secrets_dir: Path
) -> Path:
    """An open-ondemand request attached to the lab's cluster, as the platform would send it:
    the portal on lab host `host` (another host added with add_host: a companion; the
    controller: co-hosted), the cluster in linked_instances with its members as they stand.
    `config` is the portal's config (its oidc names a secret file in `secrets_dir`, a folder
    inside portal_credentials_dir). The lab's SSH key is copied into the portal's own
    credentials folder, as the platform keeps one per instance."""
    folder = lab_dir(name)
    cluster = _cluster_as_it_stands(name)
    allocations = json.loads((folder / "allocations.json").read_text())
    portal = next((a for a in allocations if a["hostname"] == host), None)
    if portal is None:
        hosts = ", ".join(a["hostname"] for a in allocations)
        raise LabError(f"lab {name!r} has no host {host!r} (hosts: {hosts})")
    instance_id = portal_instance_id(name, host)
    key = portal_credentials_dir(name, host) / "id_ed25519"
    key.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key.touch(mode=0o600)  # private before the key's bytes are in it
    shutil.copyfile(key_dir(name) / "id_ed25519", key)
    request = {
        "api_version": "v1",
        "correlation_id": f"lab-{uuid.uuid4()}",
        "org_id": cluster["org_id"],
        "project_id": cluster["project_id"],
        "instance": {
            "id": instance_id,
            "app_slug": "open-ondemand",
            "version": "4.2",
            "name": f"{name}-portal",
            "config": config,
            "placement_intent": {
                "host_allocation_id": portal["id"],
                "slurm_instance_id": cluster["instance"]["id"],
            },
        },
        "linked_instances": [
            {
                "id": cluster["instance"]["id"],
                "project_id": cluster["project_id"],
                "app_slug": cluster["instance"]["app_slug"],
                "version": cluster["instance"]["version"],
                "config": cluster["instance"]["config"],
                "members": cluster["members"],
            }
        ],
        "members": [
            {
                "member_id": f"{name}-portal-{host}",
                "component_key": "portal",
                "allocation_id": portal["id"],
                "status": "pending" if operation == "deploy" else "ready",
            }
        ],
        "operation": {"id": f"lab-portal-{operation}-{uuid.uuid4()}", "type": operation},
        "allocations": allocations,
        "credentials": {"ssh_private_key_file": str(key), "secrets_dir": str(secrets_dir)},
    }
    path = folder / f"portal-{host}-{operation}.json"
    path.write_text(json.dumps(request, indent=2) + "\n")
    return path


def record_members(name: str, result_file: Path) -> None:
    """After an operation on the lab succeeded, its members as the result gives them: the
    next `lab op` request carries them, as the platform's would."""
    result = json.loads(result_file.read_text())
    if result.get("status") == "succeeded":
        members = [
            {k: m[k] for k in ("member_id", "component_key", "allocation_id", "status")}
            for m in result["members"]
        ]
        (lab_dir(name) / "members.json").write_text(json.dumps(members, indent=2) + "\n")


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
    path.write_text(json.dumps([*allocations, _allocation(spec, started, gpus)], indent=2) + "\n")


def host_container(name: str, host: str) -> Any:
    """The container standing in for one of the lab's hosts."""
    for container in lab_containers(name):
        if container.labels.get(f"{LABEL}.host") == host:
            return container
    raise LabError(f"lab {name!r} has no host {host}; run `slurm-app-driver lab up` first")


def controller_container(name: str) -> Any:
    return host_container(name, f"{name}-ctl")


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
