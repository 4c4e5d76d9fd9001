"""The access bundle: how the customer reaches, uses and checks the cluster."""

from typing import Any
from uuid import UUID

from driver.apps.shared import storage_vars
from driver.models.request import OperationRequest


def controller_allocation_id(request: OperationRequest) -> UUID:
    """Where the controller runs once the operation succeeded: the placement's, or the
    replacement replace_controller makes the controller."""
    replacement = request.operation.replacement
    if request.operation.type == "replace_controller" and replacement is not None:
        return replacement.allocation_id
    return UUID(request.instance.placement_intent["controller_allocation_id"])


def access_bundle(
    request: OperationRequest,
    controller_report: dict[str, Any],
    worker_files: dict[str, Any],
    first_user: str | None,
    monitoring: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """How the customer reaches and checks the cluster. Ports and paths are the ones the roles
    reported (slurm_controller's report.yml, slurm_worker's start.yml), never repeated here."""
    controller = request.allocation(controller_allocation_id(request))
    assert controller is not None
    # The customer's own access credential, never the platform's key file or any of its paths.
    ssh = f"ssh -p {controller.ssh_port} {controller.ssh_user}@{controller.address}"
    run_as = f"sudo -u {first_user} " if first_user else ""
    storage = storage_access(request.instance.config)
    storage_note = storage.pop("note")
    # job output where every member and the portal see it, when there is such a place
    shared = storage.get("job_directories") or (
        storage["homes"] if storage["model"] == "platform_mount" else None
    )
    output = f"-D {shared}/{first_user} -o %j.out" if shared and first_user else "-o /tmp/%j.out"
    worker_logs = {
        daemon: f"{path} (on each worker)"
        for daemon, path in (worker_files.get("log_paths") or {}).items()
    }
    bundle: dict[str, Any] = {
        "cluster_name": controller_report.get("cluster_name"),
        "controller": {
            "hostname": controller.hostname,
            "address": controller.address,
            "slurmctld_port": controller_report.get("slurmctld_port"),
            "ssh": ssh,
        },
        "config_paths": {
            **(controller_report.get("config_paths") or {}),
            **(worker_files.get("config_paths") or {}),
        },
        "log_paths": {**(controller_report.get("log_paths") or {}), **worker_logs},
        "commands": {
            "nodes": "sinfo -N -l",
            "partitions": "sinfo -s",
            "queue": "squeue -l",
            "submit_example": f"{run_as}sbatch -N1 {output} --wrap 'hostname; sleep 5'",
            "interactive_example": f"{run_as}srun -N1 --pty bash",
            "job_history": "sacct -X -o JobID,JobName,User,State,Elapsed,NodeList",
            "accounts": "sacctmgr show assoc format=cluster,account,user",
        },
        "health_checks": {
            "controller_up": "scontrol ping",
            "nodes_not_responding_or_drained": "sinfo -R",
            "scheduler_statistics": "sdiag",
            "daemons": "systemctl status munge slurmctld slurmdbd mariadb",
            "munge_round_trip": "munge -n | unmunge",
        },
        "notes": [
            "Workers run configless: slurm.conf exists only on the controller; edit the "
            "fragments through the bundle, not the assembled file.",
            storage_note,
        ],
        "storage": storage,
    }
    if monitoring:
        bundle["monitoring"] = monitoring_access(controller, ssh, monitoring)
    return bundle


def storage_access(config: dict[str, Any]) -> dict[str, Any]:
    """Where the users' homes and job output are, and what decommission does to them."""
    role = storage_vars(config)
    if role["slurm_common_storage_model"] != "platform_mount":
        return {
            "model": "allocation_local",
            "homes": "/home/<user> on each member",
            "note": "Home directories and job output are allocation-local and are destroyed by "
            "decommission (decommission with preview: true lists them first).",
        }
    mount = role["slurm_common_storage_mount_path"]
    on_mount = role["slurm_common_storage_holds"] == "homes"
    return {
        "model": "platform_mount",
        "mount_path": mount,
        "homes": f"{mount}/home" if on_mount else "/home/<user> on each member",
        "job_directories": None if on_mount else f"{mount}/jobs",
        "note": f"Files under {mount} are on the platform's storage, shared by every member "
        "and the portal; remove_worker and decommission never delete them.",
    }


def monitoring_access(controller: Any, ssh: str, monitoring: dict[str, Any]) -> dict[str, Any]:
    """Grafana's URL, Prometheus through an SSH tunnel (it answers on the controller only),
    and where the monitoring files are; ports and paths as the role reported them."""
    ports = monitoring.get("ports") or {}
    paths = monitoring.get("paths") or {}
    prometheus = str(ports.get("prometheus", "127.0.0.1:9090"))
    local_port = prometheus.rsplit(":", 1)[-1]
    access: dict[str, Any] = {
        "prometheus": {
            "tunnel": f"{ssh} -N -L {local_port}:{prometheus}",
            "url_through_tunnel": f"http://127.0.0.1:{local_port}/",
            "config": paths.get("prometheus_config"),
            "alert_rules": paths.get("alert_rules"),
            "scrape_targets": paths.get("scrape_targets"),
        },
        "exporters": {
            "slurm": f"http://{controller.address}:{ports.get('slurm_exporter')}/metrics",
            "node": f"http://<member address>:{ports.get('node_exporter')}/metrics",
        },
    }
    if monitoring.get("grafana"):
        access["grafana"] = {
            "url": f"{str(monitoring.get('grafana_url') or '').rstrip('/')}/d/slurm-overview",
            "admin_password_file": f"{paths.get('grafana_admin_password')} (on the controller)",
        }
    else:
        access["grafana"] = None
        access["notes"] = ["Grafana is not installed: the site settings choose no Grafana source."]
    return access
