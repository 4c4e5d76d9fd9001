"""What slurm_sacctmgr plans, apart from how it talks to slurmdbd: the accounts, QoS and
users a config asks for, the rules on what they name, and the sacctmgr commands that bring
slurmdbd's state there. Standard library only: the driver loads this file to refuse a config
with the same rules before any host is touched (driver/role_code.py)."""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

SACCTMGR = "sacctmgr"
ADMIN_LEVELS = ("None", "Operator", "Administrator")
# Every association inherits this QoS from the root account unless told otherwise.
BASE_QOS = "normal"
# sacctmgr's word for "no limit" when a limit is set; `show` prints an empty field for it.
UNLIMITED = -1
# The QoS limits this module manages: option -> the sacctmgr field that sets it.
QOS_LIMITS = {
    "max_gpus_per_user": "MaxTRESPerUser",
    "max_gpus": "GrpTRES",
    "max_jobs_per_user": "MaxJobsPerUser",
    "max_wall": "MaxWall",
}
GPU_TRES = "gres/gpu"
SLURM_TIME = re.compile(r"(?:(?P<days>\d+)-)?(?P<a>\d+)(?::(?P<b>\d+))?(?::(?P<c>\d+))?")


def slurm_minutes(value: str) -> int:
    """Minutes in a Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS), the
    form a config gives and the one `sacctmgr show` prints alike; seconds round up."""
    match = SLURM_TIME.fullmatch(value.strip())
    if match is None:
        raise ValueError(f"not a Slurm time: {value!r}")
    days, a, b, c = (int(g) if g is not None else None for g in match.group("days", "a", "b", "c"))
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = a, b or 0, c or 0
    elif c is not None:  # HH:MM:SS
        days, hours, minutes, seconds = 0, a, b, c
    elif b is not None:  # MM:SS
        days, hours, minutes, seconds = 0, 0, a, b
    else:  # minutes
        days, hours, minutes, seconds = 0, 0, a, 0
    return ((days * 24 + hours) * 60 + minutes) + (1 if seconds else 0)


def _gpu_count(tres: str) -> int | None:
    """The gres/gpu count in a TRES list such as 'cpu=4,gres/gpu=2'; None when absent."""
    for item in tres.split(","):
        name, _, count = item.partition("=")
        if name == GPU_TRES and count.isdigit():
            return int(count)
    return None


def qos_row(row: list[str]) -> dict[str, Any]:
    priority, maxtrespu, grptres, maxjobspu, maxwall = row[1:6]
    return {
        "priority": int(priority or 0),
        "max_gpus_per_user": _gpu_count(maxtrespu),
        "max_gpus": _gpu_count(grptres),
        "max_jobs_per_user": int(maxjobspu) if maxjobspu.isdigit() else None,
        "max_wall": slurm_minutes(maxwall) if maxwall else None,
    }


def reference_problems(
    users: Sequence[Any], accounts: Sequence[Any], qos: Sequence[Any]
) -> list[tuple[tuple[str | int, ...], str]]:
    """What the accounts name that the config does not hold (a QoS, a default QoS outside the
    account's own list, a user), each with its path in the instance's config. The one source
    of these rules: the driver reports them as findings before any host is touched (it loads
    this file), and this module refuses them."""
    known_qos = {q.get("name") for q in qos if isinstance(q, dict)} | {BASE_QOS}
    known_users = {u.get("name") for u in users if isinstance(u, dict)}
    problems: list[tuple[tuple[str | int, ...], str]] = []
    for index, account in enumerate(accounts):
        if not isinstance(account, dict):
            continue
        where = ("accounting", "accounts", index)
        listed = account.get("qos") or []
        for position, name in enumerate(listed):
            if name not in known_qos:
                problems.append(
                    (
                        (*where, "qos", position),
                        f"expected a QoS of accounting.qos or {BASE_QOS}, got {name!r}",
                    )
                )
        default_qos = account.get("default_qos")
        if default_qos and default_qos not in (listed or [BASE_QOS]):
            problems.append(
                ((*where, "default_qos"), f"expected one of the account's qos, got {default_qos!r}")
            )
        for position, name in enumerate(account.get("users") or []):
            if name not in known_users:
                problems.append(
                    ((*where, "users", position), f"expected a name from users, got {name!r}")
                )
    return problems


def wanted_users(
    users: list[dict[str, Any]], default_account: str, accounts: Sequence[dict[str, Any]] = ()
) -> list[dict[str, Any]]:
    """users[i] as {name, accounts (the default first), admin_level}, or a ValueError naming
    the entry."""
    wanted = []
    for index, user in enumerate(users):
        name = user.get("name")
        level = user.get("admin_level") or ("Administrator" if user.get("admin") else "None")
        if not isinstance(name, str) or not name:
            raise ValueError(f"users[{index}].name: expected a login name")
        member_of = [a["name"] for a in accounts if name in a.get("users", [])]
        if not member_of and user.get("account"):
            member_of = [user["account"]]
        if not member_of and not default_account:
            raise ValueError(f"users[{index}] ({name}): no account and no default_account")
        if level not in ADMIN_LEVELS:
            raise ValueError(f"users[{index}].admin_level: expected one of {ADMIN_LEVELS}")
        wanted.append(
            {"name": name, "accounts": member_of or [default_account], "admin_level": level}
        )
    return wanted


def wanted_accounts(accounts: list[dict[str, Any]], default_account: str) -> list[dict[str, Any]]:
    """Every account to describe (the default account too, with Slurm's defaults when no
    entry names it), each with its qos list and default_qos settled (reference_problems has
    checked what they name)."""
    described = [dict(account) for account in accounts]
    if default_account and default_account not in {a["name"] for a in described}:
        described.insert(0, {"name": default_account, "description": "default account"})
    for account in described:
        account.setdefault("description", "")
        account.setdefault("organization", "")
        account["fairshare"] = account.get("fairshare") or 1
        listed = account.get("qos") or [BASE_QOS]
        # the first listed, before the list is sorted for comparing with slurmdbd's
        account["default_qos"] = account.get("default_qos") or listed[0]
        account["qos"] = sorted(set(listed))
    return described


def _qos_settings(qos: dict[str, Any]) -> list[str]:
    settings = [f"Priority={qos.get('priority') or 0}"]
    for option, field in QOS_LIMITS.items():
        value = qos.get(option)
        if value is None:
            value = UNLIMITED
        elif option == "max_wall":
            value = slurm_minutes(value)
        if field in ("MaxTRESPerUser", "GrpTRES"):
            value = f"{GPU_TRES}={value}"
        settings.append(f"{field}={value}")
    return settings


def _qos_reading(qos: dict[str, Any]) -> dict[str, Any]:
    """A QoS entry as current_state reads it back."""
    wall = qos.get("max_wall")
    return {
        "priority": qos.get("priority") or 0,
        "max_gpus_per_user": qos.get("max_gpus_per_user"),
        "max_gpus": qos.get("max_gpus"),
        "max_jobs_per_user": qos.get("max_jobs_per_user"),
        "max_wall": slurm_minutes(wall) if wall else None,
    }


def _account_settings(account: dict[str, Any]) -> dict[str, Any]:
    return {k: account[k] for k in ("fairshare", "qos", "default_qos")}


def _account_fields(account: dict[str, Any]) -> list[str]:
    return [
        f"Fairshare={account['fairshare']}",
        f"QOS={','.join(account['qos'])}",
        f"DefaultQOS={account['default_qos']}",
    ]


def plan(state: dict[str, Any], params: dict[str, Any]) -> tuple[list[list[str]], dict[str, Any]]:
    """The sacctmgr commands that make `state` match `params` (users from wanted_users,
    accounts from wanted_accounts), and the state after them."""
    cluster = params["cluster"]
    commands: list[list[str]] = []
    after = copy.deepcopy(state)
    if not state["cluster"] and params["create_cluster"]:
        commands.append([SACCTMGR, "-i", "add", "cluster", cluster])
        after["cluster"] = True
    for qos in params.get("qos", []):
        reading = _qos_reading(qos)
        if qos["name"] not in after["qos"]:
            commands.append([SACCTMGR, "-i", "add", "qos", qos["name"], *_qos_settings(qos)])
        elif after["qos"][qos["name"]] != reading:
            commands.append(
                [
                    SACCTMGR,
                    "-i",
                    "modify",
                    "qos",
                    "where",
                    f"name={qos['name']}",
                    "set",
                    *_qos_settings(qos),
                ]
            )
        else:
            continue
        after["qos"][qos["name"]] = reading
    for account in params["accounts"]:
        wanted = _account_settings(account)
        if account["name"] not in after["accounts"]:
            commands.append(
                [
                    SACCTMGR,
                    "-i",
                    "add",
                    "account",
                    account["name"],
                    f"Cluster={cluster}",
                    f"Description={account['description'] or account['name']}",
                    f"Organization={account['organization'] or account['name']}",
                    *_account_fields(account),
                ]
            )
            after["accounts"] = sorted([*after["accounts"], account["name"]])
        elif after["account_settings"].get(account["name"]) != wanted:
            commands.append(
                [
                    SACCTMGR,
                    "-i",
                    "modify",
                    "account",
                    "where",
                    f"name={account['name']}",
                    f"cluster={cluster}",
                    "set",
                    *_account_fields(account),
                ]
            )
        after["account_settings"][account["name"]] = wanted
    associations = set(after["associations"])
    for user in params["users"]:
        for account in user["accounts"]:
            if f"{user['name']}@{account}" not in associations:
                commands.append(
                    [
                        SACCTMGR,
                        "-i",
                        "add",
                        "user",
                        user["name"],
                        f"Account={account}",
                        f"Cluster={cluster}",
                    ]
                )
                associations.add(f"{user['name']}@{account}")
                after["default_accounts"].setdefault(user["name"], account)
                after["admin_levels"].setdefault(user["name"], "None")
        settings = []
        if after["default_accounts"].get(user["name"]) != user["accounts"][0]:
            settings.append(f"DefaultAccount={user['accounts'][0]}")
            after["default_accounts"][user["name"]] = user["accounts"][0]
        if after["admin_levels"].get(user["name"]) != user["admin_level"]:
            settings.append(f"AdminLevel={user['admin_level']}")
            after["admin_levels"][user["name"]] = user["admin_level"]
        if settings:
            commands.append(
                [
                    SACCTMGR,
                    "-i",
                    "modify",
                    "user",
                    "where",
                    f"name={user['name']}",
                    "set",
                    *settings,
                ]
            )
    # Only now, with each user's default account moved: sacctmgr refuses to take a user out
    # of the account that is still their default.
    described = {account["name"] for account in params["accounts"]}
    members = {(user["name"], account) for user in params["users"] for account in user["accounts"]}
    # a user the config does not name (made by hand) keeps every association it has
    managed = {user["name"] for user in params["users"]}
    for association in sorted(associations):
        name, _, account = association.partition("@")
        if account in described and name in managed and (name, account) not in members:
            commands.append(
                [
                    SACCTMGR,
                    "-i",
                    "delete",
                    "user",
                    "where",
                    f"name={name}",
                    f"account={account}",
                    f"cluster={cluster}",
                ]
            )
            associations.discard(association)
    after["associations"] = sorted(associations)
    return commands, after
