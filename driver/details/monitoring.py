"""What the monitoring role reports of its host (roles/monitoring/filter_plugins/
monitoring.py's monitoring_report), as `adapter_detail.monitoring` gives it."""

from driver.models.common import OutputModel


class Disk(OutputModel):
    """A watched filesystem: how full it is."""

    host: str | None = None
    """The host it is on (in health's list; the monitoring report's own is its host's)."""
    path: str
    """The watched path (the queue's state, the accounting database, the platform's mount,
    Prometheus's data)."""
    mount: str
    """The mount point of the filesystem that holds it."""
    size_bytes: int
    """The filesystem's size."""
    used_bytes: int
    """What is used on it."""
    percent: int
    """Used, in percent; 85 or more degrades the cluster."""


class ScrapeTarget(OutputModel):
    """One target Prometheus scrapes."""

    job: str | None
    """The scrape job: node, slurm, dcgm, prometheus."""
    node: str | None
    """The member the target is on."""
    instance: str | None
    """Its address and port."""
    health: str
    """up, down, or unknown (not scraped yet)."""
    last_error: str | None
    """The last scrape's error."""


class FiringAlert(OutputModel):
    """An alert that is firing."""

    name: str | None
    """The alert rule's name."""
    severity: str | None
    """critical, warning or info."""
    node: str | None
    """The node it is about, when it is about one."""
    summary: str | None
    """What it says."""
    since: str | None
    """When it became active."""


class MonitoringReport(OutputModel):
    """The monitoring host's state as the run read it."""

    host: str
    """The monitoring host (the controller)."""
    services: dict[str, str]
    """Each monitoring unit's state: running, stopped, failed or absent."""
    disks: list[Disk]
    """Prometheus's data filesystem."""
    prometheus_answers: bool
    """Whether Prometheus's API answered."""
    targets: list[ScrapeTarget]
    """Every scrape target and its health."""
    alerts: list[FiringAlert]
    """The firing alerts."""
    prometheus_flags: dict[str, str | None]
    """The flags Prometheus really runs with (retention, WAL compression, listen address)."""
    scrape_interval: str
    """The scrape interval configured."""
    grafana: bool
    """Whether Grafana is installed."""
    grafana_url: str | None
    """Grafana's URL, when installed."""
    ports: dict[str, str | int]
    """Where each monitoring daemon listens."""
    paths: dict[str, str]
    """The monitoring configuration's files and folders."""
