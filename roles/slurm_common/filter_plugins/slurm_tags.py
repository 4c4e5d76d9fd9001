"""slurm_common's filter for a step whose parts belong to different phases (a daemon's files,
`configure`, and its start, `run`, in one slurm_files step): whether a part's tags are chosen
by the run's --tags and --skip-tags, as Ansible chooses a task's (Taggable.evaluate_tags; a
unit test holds the two equal). The step itself is tagged `always`, so that each of its parts
runs exactly when a task of that part's tags would. And whether a run does every phase
(`slurm_every_phase_selected`): only such a run earns the records that let the next deploy
skip the converge."""

from typing import Any

PHASES = ("install", "configure", "run")
# The roles whose phases a deploy runs, each also under the role's name (slurm_worker_run).
ROLES = ("slurm_common", "slurm_controller", "slurm_worker", "monitoring", "open_ondemand")


def slurm_tags_selected(tags: list[str], run_tags: list[str], skip_tags: list[str]) -> bool:
    """Whether a task tagged `tags` runs under ansible_run_tags and ansible_skip_tags."""
    given, only, skipped = set(tags), set(run_tags), set(skip_tags)
    chosen = not only or bool("all" in only or given & only or "tagged" in only)
    return chosen and not ("all" in skipped or given & skipped or "tagged" in skipped)


def slurm_every_phase_selected(run_tags: list[str], skip_tags: list[str]) -> bool:
    """Whether every phase of every role runs under ansible_run_tags and ansible_skip_tags: a
    run with --tags configure, or --skip-tags run, is a partial one."""
    return all(
        slurm_tags_selected([phase, f"{role}_{phase}"], run_tags, skip_tags)
        for phase in PHASES
        for role in ROLES
    )


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "slurm_tags_selected": slurm_tags_selected,
            "slurm_every_phase_selected": slurm_every_phase_selected,
        }
