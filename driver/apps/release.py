"""Releases, for both apps: the role variables that name them, the refusals of an upgrade and a
rollback, and what the result says of each member's release and of what an upgrade or a
rollback did (playbooks/upgrade.yml, rollback.yml and their open_ondemand_ twins)."""

from typing import Any

from driver import __version__
from driver.apps.base import OperationError
from driver.events import Health, InstanceStatus
from driver.models.manifest import Version
from driver.models.request import OperationRequest

RELEASE_OPERATIONS = {"upgrade", "rollback"}
# The refusals an upgrade or a rollback makes before any host changed (Slurm's own: both apps
# share the rest).
RELEASE_CODES = {
    "upgrade_mismatch": "a member records another version than the request's",
    "upgrade_unsupported": "Slurm cannot take the version the package sources offer in place",
    "upgrade_unhealthy": "a member's daemon or a node is down, and force is false",
    "rollback_unavailable": "no upgrade leads back there, or the cluster changed since",
    "rollback_unsupported": "Slurm's version changed since the upgrade, or its sources no longer "
    "offer the backup's",
    "rollback_loses_jobs": "the upgrade to another Slurm finished, and force is false: a "
    "rollback would lose the queue since its backup and end the jobs running (their records "
    "are kept)",
}
RELEASE_ERRORS = {
    code: OperationError(
        f"{meaning}; nothing was changed on any host",
        None,
        (InstanceStatus.RUNNING, Health.UNKNOWN),
    )
    for code, meaning in RELEASE_CODES.items()
}


def release_vars(slug: str, request: OperationRequest, version: Version) -> dict[str, Any]:
    """The release this run converges to (the version checked: an upgrade's target), and for
    an upgrade or a rollback the version the instance is at."""
    found: dict[str, Any] = {
        "slurm_common_release": {
            "app_slug": slug,
            "app_version": version.version,
            "bundle_version": __version__,
        }
    }
    if request.operation.type in RELEASE_OPERATIONS:
        found["slurm_common_release_from"] = request.instance.version
    return found


def member_releases(reported: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Host to the release that last converged it ({app_slug, app_version, bundle_version}),
    None for a member no release recorded (one deployed before 1.1.0, or by hand)."""
    return {
        host: ({**record} if record else None)
        for host, record in sorted((reported.get("slurm_app_releases") or {}).items())
    }


def member_converged_by(reported: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Host to the operation that last converged it ({operation_id, operation,
    correlation_id, instance_id, app_slug, at}), None where none was recorded (a member of an
    earlier release, or one converged by hand)."""
    return {
        host: ({**record} if record else None)
        for host, record in sorted((reported.get("slurm_app_converged_by") or {}).items())
    }


def upgrade_detail(reported: dict[str, Any], operation: str) -> dict[str, Any]:
    """From where to where, with which backup, and each member's version: as the run left it
    where it got to the report, else as it found it (the Slurm a batch upgraded included), so
    a run that stopped half-way says which member is on which version."""
    done = reported.get(f"slurm_app_{operation}") or {}
    found = reported.get("slurm_app_release_found") or {}
    upgraded = reported.get("slurm_app_upgraded") or {}
    releases = reported.get("slurm_app_releases") or {}
    detail: dict[str, Any] = {
        field: done.get(field)
        for field in (
            "from",
            "to",
            "backup_id",
            "slurm_version_before",
            "slurm_version",
            "slurmdbd_conversion_s",
            "state_from",
            "jobs_ended_since",
            "accounting_carried",
        )
        if field in done
    }
    detail["completed"] = bool(done)
    # a member with no record after a rollback is back on a release before records were kept
    arrived = (done.get("to") or {}).get("app_version")
    detail["members"] = {
        host: {
            "app_version": (releases.get(host) or {}).get("app_version")
            or arrived
            or (found.get(host) or {}).get("app_version"),
            "slurm_version": upgraded.get(host) or (found.get(host) or {}).get("slurm_version"),
        }
        for host in sorted(set(found) | set(releases))
    }
    return detail
