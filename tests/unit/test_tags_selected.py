"""slurm_tags_selected (slurm_common): a part of an `always` step runs exactly where a task of
the part's tags would, as Ansible itself decides it for a loaded task."""

import itertools

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play import Play
from ansible.plugins.loader import init_plugin_loader
from ansible.vars.manager import VariableManager

from driver.role_code import role_code

slurm_tags = role_code("slurm_common", "filter_plugins", "slurm_tags")

PARTS = (
    ["configure", "slurm_worker_configure"],
    ["configure", "run", "slurm_worker_configure", "slurm_worker_run"],
)
RUN_TAGS = (["all"], ["run"], ["configure"], ["install"], ["slurm_worker_run"], ["tagged"], [])
SKIP_TAGS = (
    [],
    ["run"],
    ["configure"],
    ["slurm_worker_configure"],
    ["install"],
    ["tagged"],
    ["all"],
)


def _ansibles_task(tags: list[str]):
    init_plugin_loader()
    loader = DataLoader()
    play = Play.load(
        {
            "hosts": "localhost",
            "gather_facts": False,
            "tasks": [{"name": "part", "ansible.builtin.debug": {"msg": "part"}, "tags": tags}],
        },
        loader=loader,
        variable_manager=VariableManager(loader=loader),
    )
    return play.get_tasks()[0][0]


@pytest.mark.parametrize("tags", PARTS, ids="+".join)
def test_a_part_runs_where_ansible_would_run_a_task_of_its_tags(tags):
    task = _ansibles_task(tags)
    for run_tags, skip_tags in itertools.product(RUN_TAGS, SKIP_TAGS):
        expected = task.evaluate_tags(run_tags, skip_tags, {})
        assert slurm_tags.slurm_tags_selected(tags, run_tags, skip_tags) == expected, (
            run_tags,
            skip_tags,
        )


@pytest.mark.parametrize(
    ("run_tags", "skip_tags", "every_phase"),
    [
        (["all"], [], True),  # no --tags: Ansible's ansible_run_tags
        (["install", "configure", "run"], [], True),
        (["all"], ["record"], True),
        (["configure"], [], False),
        (["slurm_controller_configure"], [], False),
        (["all"], ["run"], False),
        (["all"], ["slurm_worker_run"], False),
        (["tagged"], ["monitoring_install"], False),
    ],
)
def test_only_a_run_of_every_phase_earns_the_records(run_tags, skip_tags, every_phase):
    """The converged record and the readiness proof let the next deploy skip the converge: a
    run that left a phase out (a hand run with --tags or --skip-tags) must not write them."""
    assert slurm_tags.slurm_every_phase_selected(run_tags, skip_tags) is every_phase
