"""What the driver knows about the slurm-reference app beyond its manifest."""

from typing import Any
from uuid import UUID

from driver.models.manifest import Version
from driver.models.request import OperationRequest
from driver.runner.inventory import Inventory, apply_defaults

CONFIG_PATHS = {
    "slurm_conf": "/etc/slurm/slurm.conf",
    "slurm_conf_fragments": "/etc/slurm/slurm-app.d/slurm.conf.d",
    "gres_conf": "/etc/slurm/gres.conf",
    "cgroup_conf": "/etc/slurm/cgroup.conf",
    "slurmdbd_conf": "/etc/slurm/slurmdbd.conf",
    "munge_key": "/etc/munge/munge.key",
    "worker_slurmd_options": "/etc/default/slurmd",
}
LOG_PATHS = {
    "slurmctld": "/var/log/slurm/slurmctld.log",
    "slurmdbd": "/var/log/slurm/slurmdbd.log",
    "slurmd": "/var/log/slurm/slurmd.log (on each worker)",
    "munge": "/var/log/munge/munged.log",
}


def inventory_vars(request: OperationRequest, version: Version, inventory: Inventory) -> None:
    """Role variables from the instance config, and same_node's controller-as-worker."""
    config = apply_defaults(version.config_schema, request.instance.config)
    placement = request.instance.placement_intent
    if request.operation.type == "deploy" and placement.get("worker_placement") == "same_node":
        controller = request.allocation(UUID(placement["controller_allocation_id"]))
        if controller is not None:
            inventory.add(controller, ["slurm_workers"], request.credentials.ssh_private_key_file)
    accounting = config["accounting"]
    inventory.group_vars.update(
        {
            "slurm_controller_cluster_name": config["cluster_name"],
            "slurm_controller_partitions": config["partitions"],
            "slurm_controller_accounting_enabled": accounting["enabled"],
            "slurm_controller_default_account": accounting["default_account"],
            "slurm_common_users": config["users"],
            "slurm_common_munge_key_src": request.credentials.munge_key_file or "",
        }
    )
    options = request.operation.options
    if "wait_idle_timeout_s" in options:
        inventory.group_vars["slurm_worker_wait_idle_timeout"] = options["wait_idle_timeout_s"]


def access_bundle(
    request: OperationRequest, inventory: Inventory, cluster_name: str, first_user: str | None
) -> dict[str, Any]:
    placement = request.instance.placement_intent
    controller = request.allocation(UUID(placement["controller_allocation_id"]))
    assert controller is not None
    # The customer's own access credential, never the platform's key file or any of its paths.
    ssh = f"ssh -p {controller.ssh_port} {controller.ssh_user}@{controller.address}"
    run_as = f"sudo -u {first_user} " if first_user else ""
    return {
        "cluster_name": cluster_name,
        "controller": {
            "hostname": controller.hostname,
            "address": controller.address,
            "slurmctld_port": 6817,
            "ssh": ssh,
        },
        "config_paths": CONFIG_PATHS,
        "log_paths": LOG_PATHS,
        "commands": {
            "nodes": "sinfo -N -l",
            "partitions": "sinfo -s",
            "queue": "squeue -l",
            "submit_example": f"{run_as}sbatch -N1 -o /tmp/%j.out --wrap 'hostname; sleep 5'",
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
            "Home directories and job output are allocation-local and are destroyed by "
            "decommission.",
        ],
    }
