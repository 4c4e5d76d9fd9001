"""What both bundled apps need: the errors of slurm_common's checks (the portal's host runs
slurm_common too), its storage variables, the login-user rule and the teardown report."""

from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from driver.apps.base import OperationError, Violation
from driver.documents import LinePath
from driver.events import Health, InstanceStatus, connection_reason
from driver.models.request import OperationRequest
from driver.role_code import reserved_accounts

# slurm_common refuses a cluster user whose name a host already has (the image's login user, a
# service account) as a user or group it did not create: the portal's companion host too.
ACCOUNT_EXISTS = OperationError(
    "a cluster user's name is an account the host already had (not created by this bundle); "
    "nothing was changed on that host",
    None,
    (InstanceStatus.FAILED, Health.UNKNOWN),
)


# storage.model platform_mount: a host whose mount is missing, not writable or not the
# controller's (slurm_common's storage_check.yml), found before anything was installed.
STORAGE_NOT_SHARED = OperationError(
    "the platform's storage is not mounted, not writable or not shared on a host; nothing was "
    "changed on any host",
    None,
    (InstanceStatus.FAILED, Health.UNKNOWN),
)


# storage.model platform_mount: a link, a folder not root's alone, or another uid's folder
# where the roles' homes or job directories go (slurm_common's slurm_folder), found before
# anything was changed: what a cluster user planted on the mount is never followed.
STORAGE_CONFLICT = OperationError(
    "a symbolic link, or a folder that another uid owns, is where the bundle's folders go on "
    "the platform's storage (the path is named); nothing was changed on any host",
    None,
    (InstanceStatus.FAILED, Health.UNKNOWN),
)


def storage_vars(config: dict[str, Any]) -> dict[str, Any]:
    """slurm_common's storage variables from a cluster config's `storage` (defaults applied)."""
    storage = config.get("storage") or {}
    return {
        "slurm_common_storage_model": storage.get("model", "allocation_local"),
        "slurm_common_storage_mount_path": storage.get("mount_path", "/workspace"),
        "slurm_common_storage_holds": storage.get("holds", "homes"),
    }


def login_user_rules(
    request: OperationRequest, config: dict[str, Any], base: LinePath
) -> Iterator[Violation]:
    """No cluster user is the account the driver logs in with on any of the request's hosts:
    the role would renumber it, and a decommission would delete it with its home."""
    # root and the like are refused already as reserved names: one finding per name
    logins = {allocation.ssh_user for allocation in request.allocations} - set(
        reserved_accounts()[0]
    )
    users = config.get("users")
    for index, user in enumerate(users if isinstance(users, list) else []):
        if isinstance(user, dict) and user.get("name") in logins:
            yield Violation(
                "reserved-name",
                (*base, "users", index, "name"),
                "expected a name other than the SSH login user of the request's allocations",
            )


# What a teardown's removed paths held, for the result: the first prefix that matches
# (most specific first).
DESTROYED_KINDS = (
    ("/home/", "home directory: the user's files and job output"),
    ("/var/lib/mysql", "accounting database: every job record and association"),
    ("/var/lib/slurm-app", "the bundle's records of the last deploy"),
    ("/var/lib/slurm", "Slurm state and spool: queued jobs, node states, job scripts"),
    ("/var/lib/prometheus", "Prometheus's metrics history"),
    ("/var/lib/grafana", "Grafana's database: users, sessions, dashboard edits"),
    ("/var/log/", "logs"),
    ("/etc/munge", "munge key"),
    ("/var/lib/munge", "munge state"),
    ("/etc/", "configuration"),
    ("/run/", "runtime files"),
)


def teardown_data(reported: dict[str, Any], preview: bool) -> dict[str, Any]:
    """What a teardown destroyed and what it left on the platform's storage, per host with
    sizes; a preview's are what it would destroy and keep."""
    destroyed, kept = ("would_destroy", "would_keep") if preview else ("destroyed", "kept")
    detail: dict[str, Any] = {"preview": True} if preview else {}
    if reported.get("slurm_app_destroyed"):
        detail[destroyed] = destroyed_data(reported["slurm_app_destroyed"])
    if reported.get("slurm_app_kept"):
        detail[kept] = kept_data(reported["slurm_app_kept"])
    # hosts a forced remove or a decommission left behind because they did not answer: their
    # packages, keys and data are still there, for the platform to reclaim or wipe
    detail.update(hosts_not_reached(reported, "not_cleaned"))
    return detail


def hosts_not_reached(reported: dict[str, Any], key: str) -> dict[str, Any]:
    """The hosts the run left out because they did not answer, with the SSH error, under
    `key` (none: nothing)."""
    if not reported.get("slurm_app_not_reached"):
        return {}
    return {
        key: [
            {"host": host, "reason": connection_reason(str(reason))}
            for host, reason in sorted(reported["slurm_app_not_reached"].items())
        ]
    }


# What a path left on the platform's storage holds, by its folder there (slurm_common's
# <mount>/home/<user> and <mount>/jobs/<user>).
KEPT_KINDS = {
    "home": "home directory on the platform's storage: the user's files and job output",
    "jobs": "job directory on the platform's storage: the user's job output",
    "slurm-app-backups": "the cluster's backups on the platform's storage: state, accounting "
    "database, munge key (root's alone)",
    "slurm-app-archive": "the accounting records slurmdbd purged, archived on the platform's "
    "storage (sacctmgr load reads them)",
}


def kept_data(reported: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per host, each path left on the platform's storage with its size and what it holds."""
    return {
        host: [
            {**entry, "held": KEPT_KINDS.get(PurePosixPath(entry["path"]).parent.name, "data")}
            for entry in entries
        ]
        for host, entries in sorted(reported.items())
    }


def destroyed_data(reported: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per host, each removed (or kept) path with its size and what it held."""
    return {
        host: [
            {
                **entry,
                "held": next(
                    (what for prefix, what in DESTROYED_KINDS if entry["path"].startswith(prefix)),
                    "data",
                ),
            }
            for entry in entries
        ]
        for host, entries in sorted(reported.items())
    }
