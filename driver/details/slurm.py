"""slurm-reference's `adapter_detail`: the cluster as the run left it (driver/apps/slurm/
adapter.py builds it from what the roles reported)."""

from typing import Any

from pydantic import Field

from driver.details.common import BackupDetail, BackupMetrics, CommonDetail, HostReason
from driver.details.monitoring import Disk, MonitoringReport
from driver.models.common import OutputModel


class DaemonVersions(OutputModel):
    """Each daemon's version, read from the hosts."""

    slurmctld: str | None = None
    """slurmctld's version on the controller."""
    slurmdbd: str | None = None
    """slurmdbd's, when accounting is on."""
    munge: str | None = None
    """munge's on the controller."""
    slurmd: dict[str, str]
    """Node to its slurmd's version."""


class NodeState(OutputModel):
    """A Slurm node as slurmctld sees it."""

    name: str | None
    """The node's name (its allocation's hostname)."""
    state: str | None
    """Its state as sinfo words it (idle, mixed, drained, down*, ...)."""
    reason: str | None
    """Why it is drained or down, when it is."""
    reason_set_by: str | None = None
    """Who drained it or set it down: an operator's user, or `slurm` where slurmctld did
    itself (a prolog or epilog that failed, a job it could not end, slurmd's hardware short of
    its configuration)."""
    cpus: int | None
    """CPUs Slurm schedules on it."""
    alloc_cpus: int | None
    """CPUs jobs hold now."""
    real_memory: int | None
    """Memory Slurm schedules, in MiB."""
    gres: str | None
    """Its generic resources (gpu:TYPE:N)."""
    gpus: int | None
    """Its GPU count."""
    partitions: list[str] | None
    """The partitions it is in."""


class AccountingRecord(OutputModel):
    """One sacct record of the readiness job."""

    id: str
    """The job or step id (1, 1.batch, 1.0)."""
    job_id: str
    """The job's id."""
    state: str
    """Its state (COMPLETED)."""
    user: str | None
    """The user it ran as."""
    nodes: int | None
    """How many nodes it ran on; null where it ran on none."""
    node_list: str | None
    """Which nodes."""
    exit_code: str | None
    """Its exit code and signal."""


class Readiness(OutputModel):
    """The proof that the cluster runs jobs: a batch job over its nodes."""

    job_id: str | None
    """The readiness job's id."""
    nodes: int | None
    """How many nodes it covered."""
    drained: list[str]
    """The nodes its operator drained: they take no job and are left out of the proof."""
    busy: list[str] = Field(default_factory=list)
    """The nodes with no CPU free (their jobs hold every one): left out of the proof and named,
    not waited for. Where every node in service is busy, the last proof stands (reused)."""
    accounting_record: list[AccountingRecord]
    """Its sacct records (none when accounting is off or the proof was reused)."""
    proven_at: str | None
    """When the proof was made (UTC)."""
    reused: bool
    """True when an earlier job's proof still holds and no new job ran."""


class BackupAttempt(OutputModel):
    """A backup attempted (slurm_app_backup.py's record of it)."""

    at: str
    """When (UTC)."""
    ok: bool
    """Whether it succeeded."""
    to: str | None = None
    """Where it went: mount, or staging (for the control plane to collect)."""
    backup_id: str | None = None
    """Its id, when it succeeded."""
    reason: str | None = None
    """Why it failed."""
    age_s: int | None = None
    """last_success: how long ago, in seconds."""


class BackupStatus(OutputModel):
    """How the scheduled backups go."""

    scheduled: bool
    """Whether backups run on a timer."""
    interval_s: int | None
    """The timer's interval."""
    keep: int | None
    """How many backups the retention keeps."""
    last_success: BackupAttempt | None
    """The last backup that succeeded."""
    last_attempt: BackupAttempt | None
    """The last backup attempted."""
    overdue: bool
    """No backup succeeded for two intervals: the cluster is degraded."""


class ClusterHealth(OutputModel):
    """The cluster's health, with the evidence."""

    classification: str
    """healthy, degraded or failed."""
    problems: list[str]
    """What is wrong, each naming its host and daemon, or node and reason."""
    services: dict[str, dict[str, str] | None]
    """Host to each of its units' states; null for a host that did not answer."""
    accounting_reachable: bool | None
    """Whether slurmdbd answered (null when accounting is off)."""
    disks: list[Disk]
    """The watched filesystems."""
    backup: BackupStatus | None
    """How the scheduled backups go; null on a controller deployed before backups existed."""
    read: str = "every_member"
    """through_controller (the workers as Prometheus holds them) or every_member (each read
    over SSH)."""
    unknown: dict[str, str] = Field(default_factory=dict)
    """Worker to why Prometheus cannot answer for it; its units are `unknown`."""
    observed_at: dict[str, str] = Field(default_factory=dict)
    """Worker to when its node exporter was last scraped (through_controller)."""


class MungeKeyRotation(OutputModel):
    """rotate_munge_key: what it did."""

    rotated: bool
    """Whether the key changed."""
    source: str
    """Where the new key came from: platform (credentials.munge_key_file) or generated."""


class Restore(OutputModel):
    """replace_controller: the backup the new controller was made from."""

    backup_id: str | None
    """Its id."""
    source: str | None
    """platform_mount or control_plane."""
    state_from: str | None
    """The moment the restored state is from: what happened after it is lost."""
    created_at: str | None
    """When the backup was taken."""
    slurm_version: str | None
    """The Slurm that wrote it."""
    bundle_version: str | None
    """The bundle that took it."""
    restored_now: bool
    """False where a re-run found the controller already made from it."""
    metrics: BackupMetrics | None = None
    """Prometheus's history put back on the new controller, as the backup's manifest says;
    null where the backup holds none. What Prometheus scraped after the backup was taken is
    not in it."""
    jobs_requeued: list[str] | None = None
    """Slurm 22.05: the jobs that ran through the loss and still ran, requeued (they run
    again at once). A 22.05 slurmstepd keeps the lost controller's address, so their end could
    never be recorded; the record of the run that was cut says REQUEUED, its AdminComment
    why."""
    jobs_cancelled: list[str] | None = None
    """Slurm 22.05: the jobs that ran through the loss whose work had ended, or that may not
    be requeued: cancelled, their record saying why in its AdminComment."""


class ControllerAccess(OutputModel):
    """Where the controller is."""

    hostname: str
    """Its host's name."""
    address: str
    """Its address."""
    slurmctld_port: int | None
    """slurmctld's port."""
    ssh: str
    """How the customer logs in to it."""


class StorageAccess(OutputModel):
    """Where the users' homes and job output are."""

    model: str
    """allocation_local or platform_mount."""
    mount_path: str | None = None
    """The platform's mount (platform_mount)."""
    homes: str
    """Where the homes are."""
    job_directories: str | None = None
    """Where job output goes when the homes are not on the mount."""


class PrometheusAccess(OutputModel):
    """Prometheus, which answers on the controller only."""

    tunnel: str
    """The SSH tunnel to it."""
    url_through_tunnel: str
    """Its URL through that tunnel."""
    config: str | None
    """Its configuration file."""
    alert_rules: str | None
    """Its alert rules."""
    scrape_targets: str | None
    """Its scrape targets' folder."""


class GrafanaAccess(OutputModel):
    """Grafana's dashboard and where its admin password is."""

    url: str
    """The overview dashboard's URL."""
    admin_password_file: str
    """Where the admin password is kept."""


class MonitoringAccess(OutputModel):
    """How the customer reaches the monitoring."""

    prometheus: PrometheusAccess
    """Prometheus through an SSH tunnel."""
    exporters: dict[str, str]
    """Each exporter's URL."""
    grafana: GrafanaAccess | None
    """Grafana, when installed."""
    notes: list[str] | None = None
    """What is missing and why."""


class AccessBundle(OutputModel):
    """How the customer reaches and checks the cluster: only in a successful result."""

    cluster_name: str | None
    """The Slurm cluster's name."""
    controller: ControllerAccess
    """The controller's address, port and SSH login."""
    config_paths: dict[str, str]
    """Slurm's and munge's configuration files."""
    log_paths: dict[str, str]
    """The daemons' logs."""
    commands: dict[str, str]
    """Common commands, ready to paste."""
    health_checks: dict[str, str]
    """Commands that check the cluster's health."""
    notes: list[str]
    """What the customer should know."""
    storage: StorageAccess
    """Where homes and job output are."""
    monitoring: MonitoringAccess | None = None
    """How to reach the monitoring, when it is on."""


class PortalFollowed(OutputModel):
    """replace_controller: an attached portal (from linked_instances) and whether its Slurm
    client now reaches the new controller."""

    instance_id: str
    """The portal's instance."""
    host: str
    """Its host."""
    followed: bool
    """Its client points at the new controller and `sinfo` answers there."""
    reason: str | None = None
    """Why not, and what to do."""


class SlurmDetail(CommonDetail):
    """slurm-reference's detail; which keys an operation gives is in the operations table."""

    cluster_name: str | None = None
    """The Slurm cluster's name."""
    daemon_versions: DaemonVersions | None = None
    """Each daemon's version, read from the hosts."""
    nodes: list[NodeState] | None = None
    """Every node as slurmctld sees it."""
    accounting: bool | None = None
    """Whether accounting (slurmdbd) is on."""
    profile: str | None = None
    """container or production: the process tracking and task plugins in use."""
    readiness: Readiness | None = None
    """The proof that the cluster runs jobs."""
    health: ClusterHealth | None = None
    """The cluster's health, with the evidence."""
    monitoring: MonitoringReport | None = None
    """The monitoring host's state."""
    munge_key: MungeKeyRotation | None = None
    """rotate_munge_key: what it did."""
    restore: Restore | None = None
    """replace_controller: the backup restored."""
    placement_intent: dict[str, Any] | None = None
    """replace_controller, on success: the placement the platform records from now on."""
    portals: list[PortalFollowed] | None = None
    """replace_controller with attached portals in linked_instances: each one re-pointed at
    the new controller, or why not."""
    backup: BackupDetail | None = None
    """backup: the backup taken."""
    not_reached: list[HostReason] | None = None
    """start, stop, restart: the workers whose hosts did not answer and were left out."""
    access_bundle: AccessBundle | None = None
    """How the customer reaches and checks the cluster (only after a success)."""
