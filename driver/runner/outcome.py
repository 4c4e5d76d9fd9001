"""A run's outcome: each member's status, the instance's status and health, the app's detail."""

import sys
from typing import Any

from pydantic import ValidationError

from driver.apps.base import OperationError
from driver.details.common import CommonDetail
from driver.events import (
    ErrorInfo,
    Health,
    InstanceOutcome,
    InstanceStatus,
    MemberResult,
    Result,
)
from driver.models.request import MemberStatus, OperationRequest
from driver.runner.plan import RunPlan


def untouched(request: OperationRequest, error: ErrorInfo) -> Result:
    """The result of an operation that never reached a host: members and instance as sent."""
    error.message += "; nothing was changed on any host"
    return Result(
        status="failed",
        error=error,
        touched_hosts=False,
        members=members_as_sent(request),
        instance=InstanceOutcome(id=str(request.instance.id), status=InstanceStatus.UNCHANGED),
    )


def members_as_sent(request: OperationRequest) -> list[MemberResult]:
    return [
        MemberResult(
            member_id=m.member_id,
            component_key=m.component_key,
            allocation_id=str(m.allocation_id),
            status=m.status,
        )
        for m in request.members
    ]


# A member an operator drained, or whose drain waits for its jobs.
DRAINED_STATUSES = frozenset({MemberStatus.DRAINED, MemberStatus.DRAINING})


def _deliberate_error(plan: RunPlan, error: ErrorInfo | None) -> OperationError | None:
    """A playbook's "[code] ..." failure that the app declares; the error takes its code."""
    if error is None or error.code != "host_failed" or error.refusal is None:
        return None
    code, message = error.refusal
    if code not in plan.adapter.operation_errors:
        return None
    error.code, error.message = code, message.strip()
    return plan.adapter.operation_errors[code]


def member_statuses(plan: RunPlan, result: Result, failed: bool, reported: dict[str, Any]) -> None:
    """Members' and the instance's status after the run. A targeted operation (add, drain,
    resume, remove) changes its targets' statuses only; a failure of targets alone leaves the
    rest of the cluster as it was (degraded, not failed), and where it acts on several, the
    targets that did not fail got what it did (a join of k: those that joined are ready). A
    replacement joins before its target leaves: it is ready once the run got past the join."""
    request = plan.request
    if plan.adapter.previews(request) and not failed:
        # a preview changes nothing: members and the instance stay as they were
        result.members = members_as_sent(request)
        result.instance = InstanceOutcome(
            id=str(request.instance.id), status=InstanceStatus.UNCHANGED
        )
        return
    after = plan.adapter.status_after.get(request.operation.type)
    targets = set(request.operation.target_ids)
    touched = plan.inventory.allocation_hosts
    target_hosts = {touched[t] for t in targets if t in touched}
    replacement = request.operation.replacement
    replacement_id = replacement.allocation_id if replacement is not None else None
    replacement_host = touched.get(replacement_id) if replacement_id is not None else None
    bad_hosts = {h for h, s in result.hosts.items() if s.failed or s.unreachable}
    joining = {replacement_host} if replacement_host is not None else set()
    targets_alone = failed and bool(bad_hosts) and bad_hosts <= target_hosts | joining
    # where several targets were acted on, those the run finished with got what it did
    partly_done = targets_alone and len(target_hosts) > 1
    reported_done = plan.adapter.hosts_done(request, reported)
    done = {h for h in target_hosts if reported_done is None or h in reported_done}
    done |= joining & (reported_done or set())
    done -= bad_hosts
    deliberate = _deliberate_error(plan, result.error) if failed else None
    left_out = plan.adapter.hosts_left_out(request, reported)
    for member in request.members:
        status = member.status
        host = touched.get(member.allocation_id)
        changes = member.allocation_id in targets if targets else host is not None
        if member.allocation_id == replacement_id:
            # a host that refused on purpose (replace_controller's check of the backup runs on
            # the replacement) failed nothing: the replacement is as the refusal found it
            refused_on = {result.error.host} if deliberate is not None and result.error else set()
            status = _replacement_status(plan, member.status, failed, bad_hosts - refused_on, done)
        elif deliberate is not None:
            if member.allocation_id in targets and deliberate.target_status is not None:
                status = deliberate.target_status
        elif (failed and host is not None and host in bad_hosts) or host in left_out:
            status = MemberStatus.FAILED
        elif (not failed or (partly_done and host in done)) and changes and after is not None:
            status = after
            if (
                member.status in DRAINED_STATUSES
                and after is MemberStatus.READY
                and request.operation.type not in plan.adapter.ends_drain
            ):
                status = member.status
        result.members.append(
            MemberResult(
                member_id=member.member_id,
                component_key=member.component_key,
                allocation_id=str(member.allocation_id),
                status=status,
            )
        )
    if partly_done and result.error is not None:
        finished = sorted(done & target_hosts)
        result.error.message += (
            f"; failed on {len(bad_hosts)} of {len(target_hosts)} targets "
            f"({', '.join(sorted(bad_hosts))}), done on "
            + (", ".join(finished) if finished else "none")
        )
    past_return = plan.adapter.failed_past_return(request, reported) if failed else None
    if deliberate is not None:
        status, health = deliberate.instance
    elif past_return is not None:
        status, health, next_step = past_return
        if result.error is not None:
            result.error.message += f"; {next_step}"
    elif targets_alone:
        status, health = InstanceStatus.RUNNING, Health.DEGRADED
    elif failed:
        status, health = InstanceStatus.FAILED, Health.FAILED
    else:
        status, health = plan.adapter.observed_state(
            request, reported
        ) or plan.adapter.instance_after.get(
            request.operation.type, (InstanceStatus.RUNNING, Health.HEALTHY)
        )
    result.instance = InstanceOutcome(id=str(request.instance.id), status=status, health=health)


def _replacement_status(
    plan: RunPlan, sent: MemberStatus, failed: bool, bad_hosts: set[str], done: set[str]
) -> MemberStatus:
    """The replacement joins first: failed where its host failed, joined where the run
    succeeded or the app reports the join done before a later step failed (the target's drain
    ran out of time, its host could not be cleaned), else as sent."""
    operation = plan.request.operation
    assert operation.replacement is not None
    host = plan.inventory.allocation_hosts.get(operation.replacement.allocation_id)
    if host in bad_hosts:
        return MemberStatus.FAILED
    if not failed or host in done:
        return plan.adapter.replacement_status_after
    return sent


def adapter_detail(plan: RunPlan, reported: dict[str, Any], failed: bool) -> CommonDetail:
    """The app's detail, as its model (the published schema) types it. A detail the model
    refuses is a bundle defect: the tests check every result against the schema, and the
    platform still gets the outcome (the fields the model knows, as they were), with the
    defect on the driver's stderr."""
    detail = {
        "app_version_label": plan.request.instance.version,
        "hosts_touched": sorted(plan.inventory.hosts),
        **plan.adapter.detail(plan.request, plan.inventory, reported, failed),
    }
    model = plan.adapter.detail_model
    try:
        return model.model_validate(detail)
    except ValidationError as exc:
        print(f"slurm-app-driver: adapter_detail breaks its schema: {exc}", file=sys.stderr)
        return model.model_construct(**detail)
