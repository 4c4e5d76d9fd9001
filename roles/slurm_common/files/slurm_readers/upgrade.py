"""Whether a cluster can be upgraded now, judged from every member's reading before any host
changes (slurm_common's release_read.yml reads each; the controller judges them all)."""

from __future__ import annotations

from typing import Any

from .nodes import slurm_taking_jobs
from .versions import slurm_upgrade_refusal, slurm_version

SLURM_PACKAGES = ("slurmdbd", "slurmctld", "slurmd")
# The drain reason of a node the upgrade holds out of scheduling while Slurm's packages change
# under its slurmd (slurm_worker's upgrade_hold.yml): only a node drained with it is given back.
UPGRADE_HOLD_REASON = "slurm-app: Slurm's packages upgrading"


def _refusal(code: str, message: str) -> str:
    return f"[{code}] {message}"


def slurm_upgrade_verdict(
    members: dict[str, dict[str, Any]],
    controller: str,
    versions: dict[str, str],
    nodes: list[dict[str, Any]],
    force: bool = False,
    offered: bool = True,
) -> dict[str, Any]:
    """members: each host's reading ({release, packages, units}); versions: {from, to}, the
    app versions the request goes between, and `series`, the Slurm major release `to` runs
    where it is not the distribution's ('' or absent: whatever the package sources offer).
    offered: whether the readings' candidates are what this upgrade installs; false before the
    site's source of the series is placed, when the window is judged against the series alone
    and nothing is said of what changes. Returns the Slurm version running and the one the
    upgrade brings, the packages that change on each host, the reason its hold of a node
    drains it with, and `refusal` ('' when none): the first of [upgrade_mismatch],
    [upgrade_unsupported], [upgrade_unhealthy]. A node that only finishes a job (completing)
    or that an earlier run of this upgrade holds is healthy."""
    from_version, to_version = versions["from"], versions["to"]
    series = versions.get("series") or ""
    packages = members[controller]["packages"]
    running = packages["slurmctld"]["installed"]
    wanted = (packages["slurmctld"]["candidate"] or running) if offered else series or running
    verdict: dict[str, Any] = {
        "running": slurm_version(running),
        "candidate": slurm_version(wanted),
        "changes": {},
        "hold_reason": UPGRADE_HOLD_REASON,
        "refusal": "",
    }
    off_path = [
        f"{host} records {reading['release'].get('app_version')}"
        for host, reading in sorted(members.items())
        if reading["release"].get("app_version", from_version) not in (from_version, to_version)
    ]
    if off_path:
        verdict["refusal"] = _refusal(
            "upgrade_mismatch",
            f"the request says the instance is at {from_version} (or {to_version}, an upgrade "
            f"taken up again); {', '.join(off_path)}",
        )
        return verdict
    if offered and series and not verdict["candidate"].startswith(f"{series}."):
        verdict["refusal"] = _refusal(
            "upgrade_unsupported",
            f"{to_version} runs Slurm {series}; the controller's package sources offer "
            f"slurmctld {wanted}: the site settings' slurm source must name where {series} "
            "comes from",
        )
        return verdict
    for host, reading in sorted(members.items()):
        for name in SLURM_PACKAGES:
            package = reading["packages"].get(name) or {}
            if not package.get("installed"):
                continue
            candidate = (package.get("candidate") or package["installed"]) if offered else wanted
            if slurm_version(candidate) != verdict["candidate"]:
                verdict["refusal"] = _refusal(
                    "upgrade_unsupported",
                    f"{host} would install {name} {candidate} and the controller slurmctld "
                    f"{wanted}: every member's package sources must offer one Slurm version",
                )
                return verdict
            running_here = slurm_version(package["installed"])
            # a member an earlier run of this upgrade took to the series already
            taken = not offered and running_here.startswith(f"{series}.")
            why = "" if taken else slurm_upgrade_refusal(running_here, verdict["candidate"])
            if why:
                verdict["refusal"] = _refusal("upgrade_unsupported", f"{host}: {why}")
                return verdict
            if offered and candidate != package["installed"]:
                verdict["changes"].setdefault(host, []).append(name)
    if not force:
        down = [
            f"{host} {unit} {state}"
            for host, reading in sorted(members.items())
            for unit, state in reading["units"].items()
            if state != "running" and (unit == "munge" or _installed(reading, unit))
        ]
        taking = slurm_taking_jobs(nodes)
        out = [
            f"node {node['name']} {node['state']}"
            for node in nodes
            if node["name"] not in taking and not _up_for_the_upgrade(node)
        ]
        if down or out:
            verdict["refusal"] = _refusal(
                "upgrade_unhealthy",
                f"{', '.join(down + out)}: repair it (or upgrade with force)",
            )
    return verdict


def _up_for_the_upgrade(node: dict[str, Any]) -> bool:
    """A node that takes jobs again by itself: its epilog still runs (completing), or an
    earlier run of this upgrade holds it and this one gives it back."""
    if not slurm_taking_jobs([node], drain_ok=True):
        return False
    return node["state"] == "completing" or (
        "drain" in node["flags"] and node.get("reason") == UPGRADE_HOLD_REASON
    )


def _installed(reading: dict[str, Any], unit: str) -> bool:
    return bool((reading["packages"].get(unit) or {}).get("installed"))


def slurm_upgrade_changed_since(
    members: list[tuple[str, dict[str, Any]]], version: str, upgraded_to: str = ""
) -> list[str]:
    """'host package version' for each Slurm package whose version is neither `version` nor
    `upgraded_to` (the Slurm an upgrade went to, whose rollback puts `version` back; members:
    (host, packages) pairs as release_read.yml reads them)."""
    return [
        f"{host} {name} {slurm_version(package['installed'])}"
        for host, packages in members
        for name in SLURM_PACKAGES
        if (package := packages.get(name) or {}).get("installed")
        and slurm_version(package["installed"]) not in (version, upgraded_to or version)
    ]


def slurm_jobs_gone(running: str, on_nodes: dict[str, list[str]]) -> list[str]:
    """The jobs a restored slurmctld has running (`squeue --states RUNNING --format '%i %B'`)
    whose batch node, read while slurmctld was stopped (`scontrol listpids`: on_nodes, node to
    the job ids it runs), does not run them: they ended after the backup. A job on a node not
    read is left alone."""
    gone = []
    for line in running.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1] in on_nodes and fields[0] not in on_nodes[fields[1]]:
            gone.append(fields[0])
    return gone


def slurm_listed_jobs(listpids: str) -> list[str]:
    """The job ids `scontrol listpids` prints (a header, then PID JOBID STEPID ... rows)."""
    rows = [line.split() for line in listpids.splitlines()[1:]]
    return sorted({row[1] for row in rows if len(row) >= 2 and row[1].isdigit()})
