"""The scheduler's own figures, from `sdiag`: its threads and queues, the main scheduling
loop's and the backfill loop's cycles. sdiag's text has read the same in every version the
bundle runs (22.05 to 24.11); its --json form does not exist in 22.05."""

from __future__ import annotations

# (section, sdiag's label) -> the figure's name; a label sdiag prints in both loops' sections
# (Last cycle, Mean cycle) is told apart by its section. Times are sdiag's microseconds.
_FIGURES = {
    (None, "Server thread count"): "threads",
    (None, "Agent queue size"): "queue_size",
    (None, "DBD Agent queue size"): "dbd_queue_size",
    ("main", "Last cycle"): "last_cycle",
    ("main", "Mean cycle"): "mean_cycle",
    ("main", "Cycles per minute"): "cycle_per_minute",
    ("main", "Last queue length"): "last_queue_length",
    ("backfill", "Total backfilled jobs (since last slurm start)"): (
        "backfilled_jobs_since_start_total"
    ),
    ("backfill", "Total backfilled jobs (since last stats cycle start)"): (
        "backfilled_jobs_since_cycle_total"
    ),
    ("backfill", "Total backfilled heterogeneous job components"): (
        "backfilled_heterogeneous_total"
    ),
    ("backfill", "Total cycles"): "backfill_cycles",
    ("backfill", "Last cycle"): "backfill_last_cycle",
    ("backfill", "Mean cycle"): "backfill_mean_cycle",
    ("backfill", "Last depth cycle"): "backfill_last_depth",
    ("backfill", "Depth Mean"): "backfill_depth_mean",
}
FIGURES = tuple(_FIGURES.values())


def slurm_scheduler(output: str) -> dict[str, float]:
    """sdiag's answer as {figure: value} for the figures it printed (FIGURES): a loop that has
    not run yet prints no mean, and that figure is left out rather than made 0."""
    section: str | None = None
    figures: dict[str, float] = {}
    for line in output.splitlines():
        if not line.strip() or line.startswith("*"):
            continue
        label, sep, value = line.strip().partition(":")
        if not line[0].isspace():
            lowered = line.lower()
            if lowered.startswith("main schedule statistics"):
                section = "main"
                continue
            if lowered.startswith("backfilling stats"):
                section = "backfill"
                continue
            if not sep or not value.strip():
                section = "other"  # another section's title: its figures are not read
                continue
            section = None  # a figure of the daemon's own, between the sections
        name = _FIGURES.get((section, label.strip()))
        number = _number(value) if sep else None
        if name and number is not None:
            figures[name] = number
    return figures


def _number(text: str) -> float | None:
    """sdiag's value: '123', '0.50', or '1 (some words)'."""
    first = text.strip().split(" ", 1)[0]
    try:
        return float(first)
    except ValueError:
        return None
