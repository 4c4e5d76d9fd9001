"""The parts of `adapter_detail` both apps give: the hosts a run touched, what a teardown
destroyed and kept, the members' releases and what an upgrade or a rollback did. Each app's
own detail model (slurm.py, open_ondemand.py beside this) adds its part; `schema operation-result`
publishes them."""

from pydantic import Field

from driver.models.common import OutputModel, SparseOutput


class Release(OutputModel):
    """A release of the bundle that converged a host, as the host recorded it."""

    app_slug: str
    """The app the release belongs to."""
    app_version: str
    """The catalog version (the instance's version on the platform)."""
    bundle_version: str
    """The bundle's own version (`slurm-app-driver --version`)."""


class ConvergedBy(OutputModel):
    """The operation that last converged a host, as the host recorded it."""

    operation_id: str
    """The platform's id of the operation."""
    operation: str
    """Its type (deploy, add_worker, upgrade, ...)."""
    correlation_id: str
    """The platform's trace id: `journalctl SLURM_APP_CORRELATION_ID=<it>` on the host."""
    instance_id: str
    """The instance the operation belonged to."""
    app_slug: str
    """The app."""
    trace_id: str | None = None
    """The run's trace id: `journalctl SLURM_APP_TRACE_ID=<it>` on the host (null in a record
    that a release before 1.1.0 wrote)."""
    at: str
    """When the host recorded it (UTC, ISO 8601)."""


class NamedRelease(OutputModel):
    """A release an upgrade or a rollback went from or to. Release 1.0 recorded none on its
    hosts: of such a release only the version the platform gave is known."""

    app_slug: str | None = None
    """The app the release belongs to; null for release 1.0."""
    app_version: str | None
    """The catalog version (the instance's version on the platform)."""
    bundle_version: str | None = None
    """The bundle's own version (`slurm-app-driver --version`); null for release 1.0."""


class HostReason(OutputModel):
    """A host the run could not reach, and why."""

    host: str
    """The host's name."""
    reason: str
    """SSH's own words, on one line."""


class PathData(OutputModel):
    """A path a teardown removed (or would remove, or left on the platform's storage)."""

    path: str
    """The path on the host."""
    bytes: int | None
    """Its size, measured before the teardown; null for a path reached through a symbolic
    link, which is never followed."""
    linked: bool = False
    """A symbolic link is on its way: reported, never measured or followed."""
    held: str
    """What it held, in words (home directories, the accounting database, ...)."""


class MemberRelease(OutputModel):
    """A member's versions as an upgrade or a rollback left it."""

    app_version: str | None
    """The catalog version that last converged it; null where none was recorded."""
    slurm_version: str | None
    """Its Slurm's version; null on a host without Slurm."""


class BackupFile(OutputModel):
    """One file of a backup."""

    name: str
    """Its name in the backup's folder."""
    bytes: int
    """Its size."""
    sha256: str
    """Its SHA-256, checked before a restore."""


class BackupMetrics(OutputModel):
    """Prometheus's history in a backup (metrics.tar): its persisted blocks and its
    write-ahead log, from which a restored Prometheus rebuilds the last two to three hours."""

    blocks: int
    """Persisted blocks (each about two hours, compacted up to a tenth of the retention)."""
    wal_segments: int
    """Files of the write-ahead log, its checkpoint's included."""
    oldest_sample: str | None
    """Where the oldest block starts (UTC, ISO 8601): how far back the history goes; null when
    all of it is still in the write-ahead log."""


class BackupManifest(OutputModel):
    """What a backup holds, as its manifest says (never the files' contents)."""

    format: int | None
    """The manifest's format (1)."""
    backup_id: str | None
    """The backup's id."""
    instance_id: str | None
    """The instance the backup was taken of."""
    cluster_name: str | None
    """The Slurm cluster's name."""
    slurm_version: str | None
    """The Slurm release that wrote the state."""
    bundle_version: str | None
    """The bundle's version that took it."""
    created_at: str | None
    """When the backup was taken (UTC, ISO 8601)."""
    state_from: str | None
    """The moment the queue's state is from: what happened after it is not in the backup."""
    accounting: bool | None
    """Whether it holds the accounting database."""
    metrics: BackupMetrics | None = None
    """Prometheus's history it holds; null where it holds none (Prometheus not on the
    controller, slurm_controller_backup_metrics off, or a backup of an earlier release)."""
    files: list[BackupFile] | None
    """Its files."""


class BackupDetail(SparseOutput):
    """A backup the run took (`path` only where it is on the platform's storage)."""

    backup_id: str | None
    """The backup's id (replace_controller names it)."""
    destination: str | None
    """platform_mount or control_plane."""
    path: str | None = None
    """Its folder on the platform's storage (platform_mount only; a control-plane copy is
    named by its id alone)."""
    manifest: BackupManifest
    """The backup's manifest."""
    scheduler_paused_s: float | None
    """How long slurmctld paused while its state was copied, in seconds."""
    pruned: list[str]
    """The backups the retention removed."""


class AccountingCarried(OutputModel):
    """rollback: the job records made since the backup, put back after its database was
    loaded, so that a rollback loses or falsifies no record of a job that ran."""

    jobs: int
    """Job records put back in place of the restored ones: jobs submitted since the backup,
    and jobs that ended otherwise than the backup says."""
    steps: int
    """Their step records."""
    ended_by_rollback: int
    """Of those jobs, the ones submitted since the backup that had not ended: gone with the
    restored queue, recorded CANCELLED at the rollback."""
    first_job_id: int
    """The first id new jobs get (slurm.conf's FirstJobId): past every id recorded, where the
    restored queue would have given ids again."""


class ReleaseChange(OutputModel):
    """What an upgrade or a rollback did, also when it stopped half-way."""

    from_: NamedRelease | None = Field(default=None, alias="from")
    """The release the instance was at."""
    to: NamedRelease | None = None
    """The release it is at now; on success the platform records `to.app_version`."""
    backup_id: str | None = None
    """The backup taken before the upgrade (a rollback restores it)."""
    backup: BackupDetail | None = None
    """That backup, when this run took it."""
    slurm_version_before: str | None = None
    """Slurm's version before the upgrade."""
    slurm_version: str | None = None
    """Slurm's version after it."""
    slurmdbd_conversion_s: float | None = None
    """upgrade to another Slurm: from slurmdbd's restart on the new version until it answered
    again, its accounting database converted, in seconds."""
    state_from: str | None = None
    """rollback: the moment the restored queue and accounting are from."""
    jobs_ended_since: list[str] | None = None
    """rollback: the jobs the restored queue held (running, or pending) that had ended since,
    and were ended; their records are the ones they ended with."""
    accounting_carried: AccountingCarried | None = None
    """rollback with accounting: the records made since the backup that were put back."""
    completed: bool
    """Whether the run got to its end."""
    members: dict[str, MemberRelease]
    """Host to its versions as the run left it."""


class CommonDetail(SparseOutput):
    """What every operation's detail gives, whatever the app."""

    app_version_label: str
    """The instance's version as the request gave it."""
    hosts_touched: list[str]
    """The hosts the run's inventory held."""
    destroyed: dict[str, list[PathData]] | None = None
    """remove_worker, decommission: per host, each path removed."""
    kept: dict[str, list[PathData]] | None = None
    """What stays on the platform's storage, per host."""
    not_cleaned: list[HostReason] | None = None
    """Forced remove_worker, decommission, replace_controller's old controller: the hosts
    that did not answer and were left as they were."""
    preview: bool | None = None
    """decommission with preview: true; nothing was changed."""
    would_destroy: dict[str, list[PathData]] | None = None
    """A preview: what a decommission would remove."""
    would_keep: dict[str, list[PathData]] | None = None
    """A preview: what a decommission would leave on the platform's storage."""
    releases: dict[str, Release | None] | None = None
    """Host to the release that last converged it; null where none was recorded (a member
    of release 1.0, or one deployed by hand)."""
    converged_by: dict[str, ConvergedBy | None] | None = None
    """Host to the operation that last converged it; null where none was recorded (a member
    of an earlier release, or one converged by hand)."""
    upgrade: ReleaseChange | None = None
    """upgrade: what it did."""
    rollback: ReleaseChange | None = None
    """rollback: what it did."""
