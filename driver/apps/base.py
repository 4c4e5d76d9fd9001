"""What an app adapter is: the knowledge of one app the manifest cannot carry.

The validator, the inventory builder and the runner ask the adapter of the request's app and
know no app by name. A new app is a manifest, an adapter module registered in
`driver/apps/__init__.py`, and its playbooks and roles.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

from driver.apps.sources import NeededSource
from driver.details.common import CommonDetail
from driver.documents import LinePath
from driver.events import Health, InstanceStatus
from driver.inventory import Inventory
from driver.models.manifest import Version
from driver.models.request import MemberStatus, OperationRequest
from driver.site import Site


@dataclass(frozen=True)
class Violation:
    """A semantic rule the request breaks: a finding code, its JSON path, what was expected."""

    code: str
    path: LinePath
    message: str


def observed(classification: str) -> tuple[InstanceStatus, Health]:
    """The instance's status and health for a status run's classification."""
    return {
        "healthy": (InstanceStatus.RUNNING, Health.HEALTHY),
        "degraded": (InstanceStatus.DEGRADED, Health.DEGRADED),
    }.get(classification, (InstanceStatus.FAILED, Health.FAILED))


@dataclass(frozen=True)
class OperationError:
    """A failure the playbook reports deliberately (see AppAdapter.operation_errors)."""

    meaning: str
    target_status: MemberStatus | None
    instance: tuple[InstanceStatus, Health]


class AppAdapter:
    """Defaults for an app that needs nothing beyond its manifest."""

    slug: ClassVar[str] = ""
    # The inventory group whose host keeps the instance's lease (slurm_common's lease.yml).
    lease_group: ClassVar[str] = ""
    # The model of the app's adapter_detail (published in `schema operation-result`).
    detail_model: ClassVar[type[CommonDetail]] = CommonDetail
    # The member status an operation leaves on the members it touched when it succeeds
    # (None: unchanged), and the instance's status and health after it.
    status_after: ClassVar[dict[str, MemberStatus | None]] = {
        "deploy": MemberStatus.READY,
        "add_worker": MemberStatus.READY,
        "resume_worker": MemberStatus.READY,
        "start": MemberStatus.READY,
        "restart": MemberStatus.READY,
        "drain_worker": MemberStatus.DRAINED,
        "remove_worker": MemberStatus.REMOVED,
        "replace_worker": MemberStatus.REMOVED,
        "stop": MemberStatus.STOPPED,
        "decommission": MemberStatus.REMOVED,
        "status": None,
        # members stay as they were (a drained node stays drained through both)
        "upgrade": None,
        "rollback": None,
    }
    # The operations that end an operator's drain: every other one that leaves members ready
    # (a deploy, a start, a restart) leaves a drained or draining member as it was, as Slurm
    # keeps the node's drain through them.
    ends_drain: ClassVar[frozenset[str]] = frozenset({"resume_worker"})
    # A replacement's status once it joined (replace_worker's new allocation).
    replacement_status_after: ClassVar[MemberStatus] = MemberStatus.READY
    instance_after: ClassVar[dict[str, tuple[InstanceStatus, Health]]] = {
        "stop": (InstanceStatus.STOPPED, Health.UNKNOWN),
        "decommission": (InstanceStatus.DELETED, Health.UNKNOWN),
    }
    # Refusals and timeouts a playbook reports on purpose, as a failure message that starts
    # with "[code]": the target member's status afterwards (None: as it was) and the
    # instance's. Any other failure marks the failed hosts' members failed.
    operation_errors: ClassVar[dict[str, "OperationError"]] = {}
    # Top-level config fields passed on to the roles, and those not yet with the reason: a
    # test checks that together they are exactly the config schema's properties.
    config_fields: ClassVar[frozenset[str]] = frozenset()
    pending_config: ClassVar[dict[str, str]] = {}
    # Where the config names a host the app's hosts contact (an alert webhook, a mail relay,
    # an OIDC issuer): its path in the config and how the host is written ("url", or "relay"
    # for host:port). request_check.addresses holds each to the request's address policy.
    address_fields: ClassVar[tuple[tuple[tuple[str, ...], str], ...]] = ()
    # The operations that carry the instances attached to this one (their placement names it)
    # in linked_instances, and act on them too (a cluster's replace_controller re-points its
    # portals at the new controller).
    carries_attached: ClassVar[frozenset[str]] = frozenset()

    def rules(self, request: OperationRequest, version: Version) -> Iterator[Violation]:
        """Semantic rules beyond the schemas (the generic ones run for every app)."""
        return self.config_rules(request.instance.config, ("instance", "config"))

    def config_rules(self, config: dict[str, Any], base: LinePath) -> Iterator[Violation]:
        """The rules over one config of this app, wherever it appears: the instance's own, or
        a linked instance's (whose values reach the roles too)."""
        return iter(())

    def inventory_vars(
        self, request: OperationRequest, version: Version, inventory: Inventory
    ) -> None:
        """Role variables (and hosts a topology adds) for the operation's inventory."""

    def hosts_done(self, request: OperationRequest, reported: dict[str, Any]) -> set[str] | None:
        """The hosts the run finished its work on, where the app can tell from what its
        playbook reported: a target (of several) or a replacement that did not fail is only
        counted done when it is in this set. None: the app cannot tell, so a run that failed
        counts no replacement done and every target that did not fail done."""
        return None

    def hosts_left_out(self, request: OperationRequest, reported: dict[str, Any]) -> set[str]:
        """Hosts the run went on without because they did not answer, where the operation
        does not end their members (a start, stop or restart): those members are failed."""
        return set()

    def sources(
        self, request: OperationRequest, version: Version, site: Site
    ) -> list[NeededSource]:
        """The sources the operation installs from (driver/apps/sources.py names them all):
        request_check holds each to the site's deny list and the request's overlay, and the
        result lists them. None for an operation that installs nothing."""
        return []

    def previews(self, request: OperationRequest) -> bool:
        """Whether the request only previews its operation: the run must change nothing, and
        members and instance stay as they were."""
        return False

    def failed_past_return(
        self, request: OperationRequest, reported: dict[str, Any]
    ) -> tuple[InstanceStatus, Health, str] | None:
        """Where a run failed past a point the cluster cannot run from (the operation took
        something down it had not yet put back): the instance's status and health, and what
        the platform does next, for the error's message. None: the failed hosts decide."""
        return None

    def observed_state(
        self, request: OperationRequest, reported: dict[str, Any]
    ) -> tuple[InstanceStatus, Health] | None:
        """The instance's status and health as a successful run observed them (status, or a
        deploy that found something wrong); None: the operation's default (instance_after)."""
        return None

    def detail(
        self,
        request: OperationRequest,
        inventory: Inventory,
        reported: dict[str, Any],
        failed: bool,
    ) -> dict[str, Any]:
        """The app's part of `adapter_detail`, from what the playbook reported (set_stats)."""
        return {}
