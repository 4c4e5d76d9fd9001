"""What the result says of a backup: where it went and its manifest, from what the backup
command reported (roles/slurm_controller/files/slurm_app_backup.py)."""

from typing import Any

from driver.role_code import controller_rules

# The manifest's fields the result repeats (its files: name, bytes and sha256 each; never
# their content, the munge key's included): the backup format's, as the roles admit it.
MANIFEST_FIELDS = controller_rules("slurm_backup").MANIFEST_FIELDS


def backup_detail(reported: dict[str, Any]) -> dict[str, Any]:
    """The backup's id, where it is (the mount's path; a control-plane copy is named by its id
    only, the platform's own folder never enters the result), its manifest, how long slurmctld
    paused and the backups the retention removed."""
    manifest = reported.get("manifest") or {}
    detail: dict[str, Any] = {
        "backup_id": reported.get("backup_id"),
        "destination": reported.get("destination"),
        "manifest": {field: manifest.get(field) for field in MANIFEST_FIELDS},
        "scheduler_paused_s": reported.get("scheduler_paused_s"),
        "pruned": list(reported.get("pruned") or []),
    }
    if reported.get("path"):
        detail["path"] = reported["path"]
    return detail


# What replace_controller reports of the backup the new controller was made from
# (playbooks/replace_controller.yml).
RESTORE_FIELDS = (
    "backup_id",
    "source",
    "state_from",
    "created_at",
    "slurm_version",
    "bundle_version",
    "restored_now",
    "metrics",
)


def restore_detail(reported: dict[str, Any], jobs_at_loss: dict[str, Any]) -> dict[str, Any]:
    """The backup restored and from when its state is: what happened on the cluster after
    `state_from` (jobs submitted, records written) is not in it. `restored_now` is false where
    a re-run found the new controller already made from it. On 22.05, the jobs that ran
    through the loss and were requeued or cancelled (slurm_worker's stale_steps.yml)."""
    detail = {field: reported.get(field) for field in RESTORE_FIELDS}
    detail["restored_now"] = str(detail["restored_now"]).lower() == "true"
    # a backup without Prometheus's history templates to an empty value
    if not isinstance(detail["metrics"], dict):
        detail["metrics"] = None
    for ended in ("requeued", "cancelled"):
        if ended in jobs_at_loss:
            detail[f"jobs_{ended}"] = [str(job) for job in jobs_at_loss[ended]]
    return detail
