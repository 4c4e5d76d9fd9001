"""What the controller and a worker publish for the driver's result (its adapter_detail, health
and access bundle), from the answers slurm_common's read collected on the member
(`slurm_common_read`: {commands: {name: {rc, stdout}}, urls: {...}}) and what the role knows
(`known`: its settings and paths). A stopped daemon is reported, never a failure."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from .commands import slurm_command
from .hosts import disk_usage, slurm_unit_states
from .nodes import slurm_nodes
from .versions import slurm_version


def slurm_controller_report(read: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """`known`: host, cluster_name, accounting and container (bools), units (the controller's
    systemd units), facts (slurm_common_facts), conf_dir, fragments_dir, smoke_test (the
    readiness job's result, or None). Every version's form of the node listing was read: the
    version read in the same round trip picks one."""
    answers = read["commands"]
    facts = known["facts"]
    accounting = known["accounting"]
    slurmctld = answers["controller_slurmctld"]
    version = slurm_version(slurmctld["stdout"]) if slurmctld["rc"] == 0 else ""
    nodes = (
        answers["controller_nodes_" + slurm_command("nodes", version)["argv"][0]]
        if version
        else {"rc": -1}
    )
    munge = re.search(r"[0-9]+[.][0-9]+[.][0-9]+", answers["controller_munge"]["stdout"])
    versions = {"slurmctld": version, "munge": munge.group(0) if munge else None}
    ping = answers["controller_ping"]
    config_paths = {
        "slurm_conf": f"{known['conf_dir']}/slurm.conf",
        "slurm_conf_fragments": f"{known['fragments_dir']}/slurm.conf.d",
        "gres_conf": f"{known['conf_dir']}/gres.conf",
        "cgroup_conf": f"{known['conf_dir']}/cgroup.conf",
        "munge_key": facts["munge_key"],
    }
    log_paths = {"slurmctld": f"{facts['log_dir']}/slurmctld.log", "munge": facts["munge_log"]}
    accounting_answers = False
    if accounting:
        versions["slurmdbd"] = slurm_version(answers["controller_slurmdbd"]["stdout"])
        config_paths["slurmdbd_conf"] = f"{known['conf_dir']}/slurmdbd.conf"
        log_paths["slurmdbd"] = f"{facts['log_dir']}/slurmdbd.log"
        clusters = answers["controller_clusters"]
        accounting_answers = (
            clusters["rc"] == 0 and known["cluster_name"] in clusters["stdout"].splitlines()
        )
    return {
        "host": known["host"],
        "cluster_name": known["cluster_name"],
        "slurmctld_port": int(facts["slurmctld_port"]),
        "versions": versions,
        "nodes": slurm_nodes(nodes["stdout"]) if nodes["rc"] == 0 else [],
        "services": slurm_unit_states(answers["controller_units"]["stdout"], known["units"]),
        "disks": disk_usage(answers["controller_disks"]["stdout"]),
        "backup": _backup_status(answers.get("controller_backup")),
        "slurmctld_answers": ping["rc"] == 0 and "is UP" in ping["stdout"],
        "accounting_answers": accounting_answers,
        "accounting": accounting,
        "profile": "container" if known["container"] else "production",
        "smoke_test": known.get("smoke_test"),
        "config_paths": config_paths,
        "log_paths": log_paths,
    }


def _backup_status(answer: dict[str, Any] | None) -> dict[str, Any] | None:
    """The backup command's status (None: a controller deployed before backups existed)."""
    if not answer or answer["rc"] != 0:
        return None
    try:
        status = json.loads(answer["stdout"])
    except ValueError:
        return None
    return status if isinstance(status, dict) else None


def slurm_worker_report(read: dict[str, Any], known: dict[str, Any]) -> dict[str, Any]:
    """`known`: node (its NodeName), units (its systemd units)."""
    answers = read["commands"]
    slurmd = answers["worker_slurmd"]
    return {
        "node": known["node"],
        "services": slurm_unit_states(answers["worker_units"]["stdout"], known["units"]),
        "slurmd_version": slurm_version(slurmd["stdout"]) if slurmd["rc"] == 0 else None,
    }


# What a member's records say, as node_exporter's textfile collector reads them: status reads
# every worker's release and last converge through Prometheus instead of over SSH. The
# monitoring role's prometheus_members reads them back (a unit test holds the names equal).
RECORD_METRICS = {
    "release": ("slurm_app_release_info", "The release that last converged this member."),
    "converged_by": (
        "slurm_app_converged_by_timestamp_seconds",
        "When the operation that last converged this member ended; its identity as labels.",
    ),
}


def _label_value(value: Any) -> str:
    """A label value in the exposition format's escaping (backslash, double quote, newline)."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def slurm_record_files(
    record: dict[str, Any], kind: str, path: str, metrics_path: str
) -> list[dict[str, Any]]:
    """slurm_files' entries for one of the member's records (`kind`: release, or converged_by
    with its `at`): the JSON at `path`, and where `metrics_path` is given the same record as one
    gauge for the textfile collector (release: 1; converged_by: `at` in Unix seconds). One
    evaluation makes both, so both hold the same moment."""
    files = [{"path": path, "content": json.dumps(record, indent=4, sort_keys=True) + "\n"}]
    if metrics_path:
        name, help_text = RECORD_METRICS[kind]
        labels = {key: value for key, value in sorted(record.items()) if key != "at"}
        value = 1
        if kind == "converged_by":
            at = datetime.strptime(record["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
            value = int(at.timestamp())
        series = ",".join(f'{key}="{_label_value(text)}"' for key, text in labels.items())
        content = f"# HELP {name} {help_text}\n# TYPE {name} gauge\n{name}{{{series}}} {value}\n"
        files.append({"path": metrics_path, "content": content, "mode": "0644"})
    return files
