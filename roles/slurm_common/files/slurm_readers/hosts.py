"""What a host says of its units and its disk: systemd's unit states, du's sizes."""

from __future__ import annotations

from typing import Any


def slurm_unit_states_command(units: list[str]) -> list[str]:
    """One `systemctl show` for every unit: a fraction of what service_facts costs a host."""
    return [
        "systemctl",
        "show",
        "--property=Id,LoadState,ActiveState,SubState",
        "--",
        *(f"{unit}.service" for unit in units),
    ]


def slurm_unit_states(output: str, units: list[str]) -> dict[str, str]:
    """{unit: state} from slurm_unit_states_command's answer: 'running', 'failed', 'stopped',
    or 'absent' when the unit is not installed."""
    shown: dict[str, dict[str, str]] = {}
    for block in output.strip().split("\n\n"):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if "Id" in fields:
            shown[fields["Id"].removesuffix(".service")] = fields
    states = {}
    for unit in units:
        fields = shown.get(unit, {})
        if fields.get("LoadState", "not-found") == "not-found":
            states[unit] = "absent"
        elif fields.get("ActiveState") == "failed":
            states[unit] = "failed"
        elif fields.get("SubState") == "running":
            states[unit] = "running"
        else:
            states[unit] = "stopped"
    return states


# What `df` prints for the filesystems the report watches: sizes in bytes, the file asked about
# and the filesystem's mount point last (a mount point may hold spaces; our paths do not).
DISK_USAGE_COMMAND = ["df", "-B1", "--output=size,used,avail,pcent,file,target", "--"]


def disk_usage_command(paths: list[str]) -> list[str]:
    """One `df` for every path (a missing one is left out of its answer)."""
    return [*DISK_USAGE_COMMAND, *paths]


def disk_usage(output: str) -> list[dict[str, Any]]:
    """disk_usage_command's answer as [{path, mount, size_bytes, used_bytes, percent}]; percent
    is df's own (used of what users may use, rounded up)."""
    disks = []
    for line in output.splitlines()[1:]:
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[0].isdigit() and fields[3].rstrip("%").isdigit():
            size, used, _avail, percent, path, mount = fields
            disks.append(
                {
                    "path": path,
                    "mount": mount,
                    "size_bytes": int(size),
                    "used_bytes": int(used),
                    "percent": int(percent.rstrip("%")),
                }
            )
    return disks


def du_sizes(output: str) -> list[dict[str, Any]]:
    """`du -sb -- PATH...` as [{path, bytes}] (what a teardown reports it destroyed); a
    `linked<TAB>PATH` line (measure.yml: a link on its way, not followed) as bytes None and
    linked true."""
    sizes: list[dict[str, Any]] = []
    for line in output.splitlines():
        size, _, path = line.partition("\t")
        if path and size.isdigit():
            sizes.append({"path": path, "bytes": int(size)})
        elif path and size == "linked":
            sizes.append({"path": path, "bytes": None, "linked": True})
    return sizes


def outside_of(paths: list[str], measured: list[dict[str, Any]]) -> list[str]:
    """The paths that are not, and are not inside, one already measured on this host: a
    teardown that removed /var/lib/prometheus took /var/lib/prometheus/node-exporter with it,
    so its preview must not count that twice either."""
    taken = [str(entry["path"]).rstrip("/") for entry in measured]
    return [
        path
        for path in paths
        if not any(path == done or path.startswith(done + "/") for done in taken)
    ]
