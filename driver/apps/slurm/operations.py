"""One declaration per slurm-reference operation: what the driver adds to its inventory and
reads from its report beyond the manifest. tests/unit/test_operation_traits.py holds each
trait against the operation's playbook."""

from dataclasses import dataclass


@dataclass(frozen=True)
class OperationTraits:
    # its playbook includes the monitoring role: the monitoring variables go in
    monitoring: bool = False
    # it prepares workers (slurm_worker's main): the sessions' runtimes go in
    prepares_workers: bool = False
    # it runs the backup's tasks: the driver host's fetch folder and limits go in
    backup: bool = False
    # the result reports only the workers that joined (slurm_app_workers): one that failed
    # before, or was never reached, is not in the report
    reports_joined_workers: bool = False
    # it goes on without a worker whose host does not answer (preflight's
    # slurm_app_may_be_gone) and reports it as not reached
    leaves_workers_behind: bool = False
    # it installs software on the hosts: its sources are held to the source policy
    installs: bool = False


LIFECYCLE = OperationTraits(leaves_workers_behind=True)

OPERATIONS: dict[str, OperationTraits] = {
    "deploy": OperationTraits(monitoring=True, prepares_workers=True, installs=True),
    "add_worker": OperationTraits(
        monitoring=True, prepares_workers=True, reports_joined_workers=True, installs=True
    ),
    "drain_worker": OperationTraits(),
    "resume_worker": OperationTraits(),
    "remove_worker": OperationTraits(monitoring=True),
    "replace_worker": OperationTraits(
        monitoring=True, prepares_workers=True, reports_joined_workers=True, installs=True
    ),
    "start": LIFECYCLE,
    "stop": LIFECYCLE,
    "restart": LIFECYCLE,
    "status": OperationTraits(monitoring=True),
    "decommission": OperationTraits(monitoring=True),
    "rotate_munge_key": OperationTraits(),
    "backup": OperationTraits(backup=True),
    "replace_controller": OperationTraits(
        monitoring=True, prepares_workers=True, backup=True, installs=True
    ),
    "upgrade": OperationTraits(monitoring=True, prepares_workers=True, backup=True, installs=True),
    "rollback": OperationTraits(monitoring=True, backup=True, installs=True),
}


def traits(operation: str) -> OperationTraits:
    """The operation's traits; one the manifest has and this table does not is a defect of the
    bundle (tests/unit/test_operation_traits.py holds the two equal)."""
    return OPERATIONS[operation]
