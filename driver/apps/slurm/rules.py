"""The slurm-reference rules a request's schema cannot state: placement, partitions, users,
fair share and how secrets travel."""

from collections import Counter
from collections.abc import Iterator
from typing import Any
from uuid import UUID

from driver.apps.base import Violation
from driver.apps.slurm.replacement import same_node_worker
from driver.documents import LinePath
from driver.models.request import MemberStatus, OperationRequest
from driver.role_code import controller_rules, reserved_accounts, role_filters


def placement_rules(request: OperationRequest) -> Iterator[Violation]:
    placement = request.instance.placement_intent
    controller = placement.get("controller_allocation_id")
    if request.operation.type == "replace_controller" and controller is not None:
        yield from _replacement_rules(request, UUID(controller))
    if placement.get("worker_placement") == "separate":
        for index, member in enumerate(request.members):
            if member.component_key == "worker" and member.allocation_id == UUID(controller):
                yield Violation(
                    "member-mismatch",
                    ("members", index, "allocation_id"),
                    "separate placement: no worker runs on the controller's allocation",
                )


def _replacement_rules(request: OperationRequest, controller: UUID) -> Iterator[Violation]:
    """A same_node controller's allocation runs a worker too: the replacement takes both, so
    the platform sends a pending worker member on it beside the pending controller member (the
    old allocation's two members end removed). A separate cluster's replacement runs no
    worker."""
    replacement = request.operation.replacement
    if replacement is None:
        return
    same_node = same_node_worker(request, controller)
    on_replacement = [
        index
        for index, m in enumerate(request.members)
        if m.component_key == "worker" and m.allocation_id == replacement.allocation_id
    ]
    if same_node is not None and not any(
        request.members[i].status is MemberStatus.PENDING for i in on_replacement
    ):
        yield Violation(
            "member-mismatch",
            ("members",),
            f"the controller's allocation also runs worker member {same_node.member_id} "
            f"(same_node): the replacement becomes the controller and the worker; expected a "
            f"pending worker member on allocation {replacement.allocation_id} beside the "
            "pending controller member",
        )
    if same_node is None:
        for index in on_replacement:
            if request.members[index].status is not MemberStatus.PENDING:
                continue  # an allocation already backing a worker: the target checks say so
            yield Violation(
                "member-mismatch",
                ("members", index, "allocation_id"),
                "the controller's allocation runs no worker (worker_placement separate): the "
                "replacement becomes the controller alone",
            )


def config_rules(config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
    partitions = config.get("partitions")
    if isinstance(partitions, list):
        names = [p.get("name") for p in partitions]
        for name, count in Counter(names).items():
            if count > 1:
                yield Violation(
                    "duplicate-key",
                    (*base, "partitions", names.index(name, names.index(name) + 1), "name"),
                    f"partition {name!r} appears {count} times",
                )
        defaults = sum(1 for p in partitions if p.get("default"))
        if defaults != 1:
            yield Violation(
                "config-inconsistent",
                (*base, "partitions"),
                f"expected exactly one default partition, got {defaults}",
            )
    users = config.get("users")
    if isinstance(users, list):
        yield from _user_rules(users, (*base, "users"))
    yield from _fair_share_rules(config, base)
    yield from _secret_transport_rules(config, base)
    storage = config.get("storage") if isinstance(config.get("storage"), dict) else {}
    model = storage.get("model", "allocation_local")
    if model != "platform_mount":
        for field in ("mount_path", "holds"):
            if field in storage:
                yield Violation(
                    "config-inconsistent",
                    (*base, "storage", field),
                    f"{field} is for model platform_mount: expected no {field} with model {model}",
                )
        accounting = config.get("accounting")
        if isinstance(accounting, dict) and accounting.get("archive") is True:
            yield Violation(
                "config-inconsistent",
                (*base, "accounting", "archive"),
                "the archive of purged records goes to the platform's mount: expected "
                "storage.model platform_mount with accounting.archive",
            )
        backup = config.get("backup")
        if isinstance(backup, dict) and "interval" in backup:
            yield Violation(
                "config-inconsistent",
                (*base, "backup", "interval"),
                "scheduled backups go to the platform's mount: expected storage.model "
                "platform_mount with backup.interval (without a mount the platform runs the "
                "backup operation)",
            )


def _secret_transport_rules(config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
    """A bearer token goes only over https, an SMTP password only over STARTTLS."""
    monitoring = config.get("monitoring") if isinstance(config.get("monitoring"), dict) else {}
    alerting = monitoring.get("alerting") if isinstance(monitoring.get("alerting"), dict) else {}
    webhook = alerting.get("webhook") if isinstance(alerting.get("webhook"), dict) else {}
    path = (*base, "monitoring", "alerting")
    if webhook.get("bearer_token_secret_ref") and not str(webhook.get("url", "")).startswith(
        "https://"
    ):
        yield Violation(
            "config-inconsistent",
            (*path, "webhook", "url"),
            "expected an https:// url: a bearer token is sent only over TLS",
        )
    email = alerting.get("email") if isinstance(alerting.get("email"), dict) else {}
    if email.get("auth_password_secret_ref") and email.get("require_tls") is False:
        yield Violation(
            "config-inconsistent",
            (*path, "email", "require_tls"),
            "expected require_tls true: an SMTP password is sent only after STARTTLS",
        )


def _names(items: Any) -> list[Any]:
    return [i.get("name") for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _fair_share_rules(config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
    """Accounts, QoS and AllowAccounts name each other and the users, and all of them need
    slurmdbd; the schema checks each value alone."""
    accounting = config.get("accounting")
    accounting = accounting if isinstance(accounting, dict) else {}
    partitions = config.get("partitions") if isinstance(config.get("partitions"), list) else []
    accounts = accounting.get("accounts") if isinstance(accounting.get("accounts"), list) else []
    if accounting.get("enabled", True) is False:
        for field in ("accounts", "qos", "fair_share", "retention", "archive"):
            if accounting.get(field):
                yield Violation(
                    "config-inconsistent",
                    (*base, "accounting", field),
                    f"{field} needs slurmdbd: expected no {field} with accounting.enabled false",
                )
        for index, partition in enumerate(partitions):
            if isinstance(partition, dict) and partition.get("allow_accounts"):
                yield Violation(
                    "config-inconsistent",
                    (*base, "partitions", index, "allow_accounts"),
                    "AllowAccounts needs accounting: expected no allow_accounts with "
                    "accounting.enabled false",
                )
        return
    for field, items in (("accounts", accounts), ("qos", accounting.get("qos"))):
        names = _names(items)
        for name, count in Counter(names).items():
            if count > 1:
                yield Violation(
                    "duplicate-key",
                    (*base, "accounting", field, names.index(name, names.index(name) + 1), "name"),
                    f"{field} {name!r} appears {count} times",
                )
    users = config.get("users") if isinstance(config.get("users"), list) else []
    qos = accounting.get("qos") if isinstance(accounting.get("qos"), list) else []
    # slurm_sacctmgr refuses the same (one source: the role's own code)
    if accounts:
        rules = controller_rules("slurm_accounting")
        for path, message in rules.reference_problems(users, accounts, qos):
            yield Violation("config-inconsistent", (*base, *path), message)
    account_names = {*_names(accounts), accounting.get("default_account", "default")}
    for index, partition in enumerate(partitions):
        if not isinstance(partition, dict):
            continue
        for position, name in enumerate(partition.get("allow_accounts") or []):
            if name not in account_names:
                yield Violation(
                    "config-inconsistent",
                    (*base, "partitions", index, "allow_accounts", position),
                    f"expected an account of accounting.accounts or the default account, "
                    f"got {name!r}",
                )


def _user_rules(users: list[dict[str, Any]], base: LinePath) -> Iterator[Violation]:
    """The rules slurm_common applies to its users, from the role itself (one source)."""
    rules = role_filters("slurm_users")
    for problem in rules.user_problems(users, *reserved_accounts()):
        yield Violation(
            problem["code"], (*base, problem["index"], problem["field"]), problem["message"]
        )
