"""slurm_common's filter for a step whose parts belong to different phases (a daemon's files,
`configure`, and its start, `run`, in one slurm_files step): whether a part's tags are chosen
by the run's --tags and --skip-tags, as Ansible chooses a task's (Taggable.evaluate_tags; a
unit test holds the two equal). The step itself is tagged `always`, so that each of its parts
runs exactly when a task of that part's tags would."""

from typing import Any


def slurm_tags_selected(tags: list[str], run_tags: list[str], skip_tags: list[str]) -> bool:
    """Whether a task tagged `tags` runs under ansible_run_tags and ansible_skip_tags."""
    given, only, skipped = set(tags), set(run_tags), set(skip_tags)
    chosen = not only or bool("all" in only or given & only or "tagged" in only)
    return chosen and not ("all" in skipped or given & skipped or "tagged" in skipped)


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"slurm_tags_selected": slurm_tags_selected}
