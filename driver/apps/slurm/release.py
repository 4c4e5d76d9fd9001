"""What the result says of the releases: each member's (every operation that reports members),
and what an upgrade or a rollback did (playbooks/upgrade.yml, playbooks/rollback.yml)."""

from typing import Any


def member_releases(reported: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Host to the release that last converged it ({app_slug, app_version, bundle_version}),
    None for a member no release recorded (one deployed before 1.1.0, or by hand)."""
    return {
        host: ({**record} if record else None)
        for host, record in sorted((reported.get("slurm_app_releases") or {}).items())
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
            "state_from",
            "jobs_ended_since",
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
