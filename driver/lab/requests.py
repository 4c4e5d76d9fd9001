"""The requests the lab sends the driver, as the platform's app controller would: the deploy,
an operation on the cluster as it stands, a typed task, the portal's; and the members each
successful operation leaves."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from driver.apps import adapter_for
from driver.catalog import instance_credentials_dir, load_entry
from driver.lab.errors import LabError
from driver.lab.spec import (
    LAB_MOUNT,
    LAB_PROJECT,
    LAB_USER,
    LabSpec,
    host_gpus,
    key_dir,
    lab_dir,
    lab_uuid,
)

if TYPE_CHECKING:  # the lab's hosts need docker, which neither the spec nor a request does
    from driver.lab.hosts import LabHost


def portal_instance_id(name: str, host: str) -> str:
    return lab_uuid(LabSpec(name=name), f"portal/{host}")


def portal_credentials_dir(name: str, host: str) -> Path:
    """The credentials folder of the lab's portal on `host`: its own, as another instance."""
    return instance_credentials_dir(LAB_PROJECT, uuid.UUID(portal_instance_id(name, host)))


def allocation(spec: LabSpec, host: LabHost, gpus: int = 0) -> dict[str, Any]:
    return {
        "id": lab_uuid(spec, f"allocation/{host.name}"),
        "project_id": LAB_PROJECT,
        "hostname": host.name,
        "address": host.address,
        "ssh_user": "root",
        "ssh_port": 22,
        "gpus": gpus,
        "ssh_host_keys": host.ssh_host_keys,
    }


def deploy_request(
    spec: LabSpec, hosts: list[LabHost], key: Path, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The deploy request as the platform's app controller would send it; `config`'s keys
    (an operator's `lab up --config`) replace the lab's own in instance.config."""
    workers = hosts[1:]
    allocations = [allocation(spec, h, host_gpus(spec, hosts, h)) for h in hosts]
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
            "id": lab_uuid(spec, "instance"),
            "app_slug": "slurm-reference",
            "version": "1.1.0",
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
                **(config or {}),
            },
            "placement_intent": {
                "controller_allocation_id": controller_id,
                "worker_placement": spec.placement,
                "worker_allocation_ids": worker_ids,
                "access_credential_id": lab_uuid(spec, "credential"),
            },
        },
        "members": members,
        "operation": {"id": f"lab-deploy-{uuid.uuid4()}", "type": "deploy"},
        "allocations": allocations,
        "credentials": {"ssh_private_key_file": str(key)},
    }


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
    # replace_controller's replacement becomes the controller; replace_worker's a worker
    component = "controller" if operation == "replace_controller" else "worker"
    if refs:
        # the spelling the operation's manifest entry gives: targets where it joins several
        loaded = load_entry(request["instance"]["app_slug"])
        version = loaded.entry.version(request["instance"]["version"]) if loaded else None
        spec = version.operation(operation) if version else None
        if len(refs) > 1 or (spec is not None and spec.max_targets > 1):
            request["operation"]["targets"] = refs
        else:
            request["operation"]["target"] = refs[0]
    if replacement is not None:
        request["operation"]["replacement"] = {
            "allocation_id": _target_allocation(
                name, request, replacement, joining=True, component=component
            )
        }
        # a same_node controller's replacement takes its worker too: the platform gives it a
        # pending worker member beside the controller member
        placement = request["instance"]["placement_intent"]
        if operation == "replace_controller" and placement["worker_placement"] == "same_node":
            request["members"].append(
                {
                    "member_id": f"{name}-worker-{replacement}",
                    "component_key": "worker",
                    "allocation_id": request["operation"]["replacement"]["allocation_id"],
                    "status": "pending",
                }
            )
    if options:
        request["operation"]["options"] = options
    if operation in adapter_for(request["instance"]["app_slug"]).carries_attached:
        request["linked_instances"] = list(attached_portals(name).values())
    path = folder / f"{operation}.json"
    path.write_text(json.dumps(request, indent=2) + "\n")
    return path


def _target_allocation(
    name: str, request: dict[str, Any], host: str, joining: bool, component: str = "worker"
) -> str:
    """The allocation of the lab host an operation targets; a host added after the deploy
    enters the request's members as a worker, or as `component` (pending where the operation
    joins it)."""
    allocation = next((a for a in request["allocations"] if a["hostname"] == host), None)
    if allocation is None:
        hosts = ", ".join(a["hostname"] for a in request["allocations"])
        raise LabError(f"lab {name!r} has no host {host!r} (hosts: {hosts})")
    if not any(m["allocation_id"] == allocation["id"] for m in request["members"]):
        request["members"].append(
            {
                "member_id": f"{name}-{component}-{host}",
                "component_key": component,
                "allocation_id": allocation["id"],
                "status": "pending" if joining else "ready",
            }
        )
    return str(allocation["id"])


def task_request(
    name: str,
    task: str,
    user: str | None = None,
    given: dict[str, Any] | None = None,
    host: str | None = None,
) -> Path:
    """One of the app's typed tasks on a host of the deployed lab (`host`, else the
    controller), as the platform's node agent would be asked to run it (`slurm-app-driver
    task`). Returns the request file."""
    deploy = _cluster_as_it_stands(name)
    if host is None:
        wanted = deploy["instance"]["placement_intent"]["controller_allocation_id"]
        target = next(a for a in deploy["allocations"] if a["id"] == wanted)
    else:
        target = next((a for a in deploy["allocations"] if a["hostname"] == host), None)
        if target is None:
            hosts = ", ".join(a["hostname"] for a in deploy["allocations"])
            raise LabError(f"--host: no host {host!r} in lab {name!r} (its hosts: {hosts})")
    request = {
        "api_version": "v1",
        "correlation_id": f"lab-{uuid.uuid4()}",
        "org_id": deploy["org_id"],
        "project_id": deploy["project_id"],
        "instance": {k: deploy["instance"][k] for k in ("id", "app_slug", "version")},
        "allocation": target,
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
            "version": "1.1.0",
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


def attached_portals(name: str) -> dict[str, dict[str, Any]]:
    """The portals deployed on the lab's hosts and not decommissioned, by host, each as the
    platform would carry it in the cluster's linked_instances."""
    path = lab_dir(name) / "portals.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def record_portal(name: str, host: str, request_file: Path, result: dict[str, Any]) -> None:
    """After a portal operation on `host` succeeded: its deploy attaches it to the lab's
    cluster, its decommission detaches it (the platform keeps that link)."""
    if result.get("status") != "succeeded":
        return
    portals = attached_portals(name)
    request = json.loads(request_file.read_text())
    if request["operation"]["type"] == "decommission":
        portals.pop(host, None)
    else:
        instance = request["instance"]
        portals[host] = {
            "id": instance["id"],
            "project_id": request["project_id"],
            "app_slug": instance["app_slug"],
            "version": instance["version"],
            "config": instance["config"],
            "placement_intent": instance["placement_intent"],
            "members": [
                {k: m[k] for k in ("member_id", "component_key", "allocation_id", "status")}
                for m in result["members"]
            ],
        }
    (lab_dir(name) / "portals.json").write_text(json.dumps(portals, indent=2) + "\n")


def record_members(name: str, result_file: Path) -> None:
    """After an operation on the lab succeeded, its members as the result gives them: the
    next `lab op` request carries them, as the platform's would."""
    result = json.loads(result_file.read_text())
    if result.get("status") != "succeeded":
        return
    folder = lab_dir(name)
    members = [
        {k: m[k] for k in ("member_id", "component_key", "allocation_id", "status")}
        for m in result["members"]
    ]
    (folder / "members.json").write_text(json.dumps(members, indent=2) + "\n")
    detail = result.get("adapter_detail") or {}
    placement = detail.get("placement_intent")
    # an upgrade or a rollback moved the instance to another version: the platform's next
    # requests carry it
    moved = next(
        (detail[op]["to"]["app_version"] for op in ("upgrade", "rollback") if op in detail),
        None,
    )
    if moved:
        deploy = folder / "deploy.json"
        request = json.loads(deploy.read_text())
        request["instance"]["version"] = moved
        deploy.write_text(json.dumps(request, indent=2) + "\n")
    if placement:
        # replace_controller moved the controller: the platform's next deploy request carries
        # the new placement, the members as they are and the new controller's allocation
        deploy = folder / "deploy.json"
        request = json.loads(deploy.read_text())
        request["instance"]["placement_intent"] = placement
        request["members"] = members
        known = {a["id"] for a in request["allocations"]}
        request["allocations"] += [
            a
            for a in json.loads((folder / "allocations.json").read_text())
            if a["id"] not in known and any(m["allocation_id"] == a["id"] for m in members)
        ]
        deploy.write_text(json.dumps(request, indent=2) + "\n")
