"""slurm_common's filters over cluster users: `slurm_user_problems` (what is wrong with a list
of them), where their homes are (`passwd_homes`, `moved_homes`, `homes_by_place`), and the
folders made for them (`user_folders`), and the one message for the folders slurm_folder
refused (`slurm_storage_conflict`).

The same rules guard the driver (driver/role_code.py loads this file), so a request
and an operator's inventory are judged alike: unique names; no system or daemon account (a
user's group takes its name); no uid or gid twice (the gid defaults to the uid); uid/gid of a
cloud image's first login user only when claimed.
"""

from collections.abc import Iterable
from typing import Any


def user_problems(
    users: list[dict[str, Any]],
    reserved: Iterable[str],
    reserved_prefixes: Iterable[str],
    first_login_id: int,
) -> list[dict[str, Any]]:
    """Each problem: index (in users), field, code (a driver finding code), message."""
    reserved, prefixes = set(reserved), tuple(reserved_prefixes)
    problems: list[dict[str, Any]] = []

    def problem(index: int, field: str, code: str, message: str) -> None:
        problems.append({"index": index, "field": field, "code": code, "message": message})

    first_with_name: dict[str, int] = {}
    owner: dict[tuple[str, int], int] = {}
    for index, user in enumerate(users):
        name = str(user.get("name", ""))
        if first_with_name.setdefault(name, index) != index:
            problem(index, "name", "duplicate-key", f"user {name!r} appears more than once")
        if name in reserved or name.startswith(prefixes):
            problem(
                index,
                "name",
                "reserved-name",
                "expected a name that no system account, group or bundle daemon uses",
            )
        ids = {"uid": user.get("uid"), "gid": user.get("gid", user.get("uid"))}
        for kind, value in ids.items():
            if not isinstance(value, int):
                continue
            field = kind if kind in user else "uid"
            if value == first_login_id and not user.get("claim_id_1000"):
                problem(
                    index,
                    field,
                    "reserved-id",
                    f"{first_login_id} is the first login user of most cloud images; set "
                    "claim_id_1000 to take it over deliberately",
                )
            first = owner.setdefault((kind, value), index)
            if first != index:
                problem(
                    index,
                    field,
                    "duplicate-id",
                    f"{kind} {value} is already used by users[{first}]"
                    + ("" if kind in user else " (the gid defaults to the uid)"),
                )
    return problems


def slurm_user_problems(
    users: list[dict[str, Any]],
    reserved: Iterable[str],
    reserved_prefixes: Iterable[str],
    first_login_id: int,
) -> list[str]:
    """What is wrong with the cluster's users as given (a reserved name or prefix, an id
    below first_login_id, a duplicate), one `users[i].field: message` line each."""
    return [
        f"users[{p['index']}].{p['field']}: {p['message']}"
        for p in user_problems(users, reserved, reserved_prefixes, first_login_id)
    ]


def passwd_homes(passwd_lines: Iterable[str]) -> dict[str, str]:
    """`getent passwd` lines: each account's home directory."""
    fields = (line.split(":") for line in passwd_lines)
    return {f[0]: f[5] for f in fields if len(f) >= 7}


def moved_homes(passwd_lines: Iterable[str], home_base: str) -> list[str]:
    """The accounts whose home is not <home_base>/<name>: a storage change would move them."""
    return [
        f"{name} (home {home})"
        for name, home in sorted(passwd_homes(passwd_lines).items())
        if home.rstrip("/") != f"{home_base.rstrip('/')}/{name}"
    ]


def homes_by_place(passwd_lines: Iterable[str], local_base: str = "/home") -> dict[str, list[str]]:
    """`getent passwd` lines: the accounts whose home is this host's own (<local_base>/<name>),
    and the homes that are elsewhere (the platform's mount)."""
    places: dict[str, list[str]] = {"local": [], "elsewhere": []}
    for name, home in sorted(passwd_homes(passwd_lines).items()):
        if home.rstrip("/") == f"{local_base}/{name}":
            places["local"].append(name)
        else:
            places["elsewhere"].append(home)
    return places


def user_folders(users: list[dict[str, Any]], base: str, mode: str = "0700") -> list[dict]:
    """<base> (root's, 0755) and <base>/<name> for each user (theirs, `mode`): what slurm_folder
    makes or checks, in that order."""
    base = base.rstrip("/")
    return [{"path": base, "uid": 0, "gid": 0, "mode": "0755"}] + [
        {
            "path": f"{base}/{user['name']}",
            "uid": int(user["uid"]),
            "gid": int(user.get("gid") if user.get("gid") is not None else user["uid"]),
            "mode": mode,
        }
        for user in users
    ]


def slurm_storage_conflict(refused: Iterable[dict[str, Any]], host: str) -> str:
    """slurm_folder's refusals on `host` (its failed results, each with `msg`) as the one
    [storage_conflict] failure naming every path: the fail task's and slurm_accounts' alike."""
    messages = list(dict.fromkeys(str(folder.get("msg")) for folder in refused))
    return f"[storage_conflict] {host}: {'; '.join(messages)}; nothing was changed there"


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "user_folders": user_folders,
            "slurm_user_problems": slurm_user_problems,
            "passwd_homes": passwd_homes,
            "moved_homes": moved_homes,
            "homes_by_place": homes_by_place,
            "slurm_storage_conflict": slurm_storage_conflict,
        }
