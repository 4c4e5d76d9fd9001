"""The bundle's Slurm readers (files/slurm_readers/, one module per domain) as Ansible filters.

The readers are a package the roles also install on hosts (the typed-task command, the
exporter); Ansible loads a filter plugin as a lone file, so the package's folder is put on the
import path here rather than copied into filter_plugins.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

_READERS_FOLDER = str(Path(__file__).resolve().parent.parent / "files")
if _READERS_FOLDER not in sys.path:
    sys.path.append(_READERS_FOLDER)

from slurm_readers import (  # noqa: E402  (found through the path set above)
    accounting,
    commands,
    gpus,
    hosts,
    jobs,
    nodes,
    reports,
    upgrade,
    versions,
)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "outside_of": hosts.outside_of,
            "slurm_command": commands.slurm_command,
            "slurm_command_forms": commands.slurm_command_forms,
            "slurm_version": versions.slurm_version,
            "slurm_reads_state_of": versions.slurm_reads_state_of,
            "slurm_upgrade_refusal": versions.slurm_upgrade_refusal,
            "slurm_packages": versions.slurm_packages,
            "slurm_offered": versions.slurm_offered,
            "slurm_downgrade_packages": versions.slurm_downgrade_packages,
            "slurm_upgrade_verdict": upgrade.slurm_upgrade_verdict,
            "slurm_upgrade_changed_since": upgrade.slurm_upgrade_changed_since,
            "slurm_jobs_gone": upgrade.slurm_jobs_gone,
            "slurm_listed_jobs": upgrade.slurm_listed_jobs,
            "slurm_unit_states": hosts.slurm_unit_states,
            "slurm_unit_states_command": hosts.slurm_unit_states_command,
            "du_sizes": hosts.du_sizes,
            "disk_usage": hosts.disk_usage,
            "disk_usage_command": hosts.disk_usage_command,
            "slurm_gpu_type": gpus.slurm_gpu_type,
            "slurm_gpus": gpus.slurm_gpus,
            "slurm_gpu_query": gpus.slurm_gpu_query,
            "slurm_node_hardware": nodes.slurm_node_hardware,
            "slurm_gres_gpus": nodes.slurm_gres_gpus,
            "slurm_nodes": nodes.slurm_nodes,
            "slurm_taking_jobs": nodes.slurm_taking_jobs,
            "slurm_job_ended": jobs.slurm_job_ended,
            "slurm_jobs": jobs.slurm_jobs,
            "slurm_history": jobs.slurm_history,
            "slurm_accounting": accounting.slurm_accounting,
            "slurm_controller_report": reports.slurm_controller_report,
            "slurm_worker_report": reports.slurm_worker_report,
            "slurm_record_files": reports.slurm_record_files,
        }
