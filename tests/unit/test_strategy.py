"""The driver's strategy answers a step skipped on a host, and runs a step whose action never
reaches the host, without forking a process for it, and gives the same answer the step's own
process would."""

import json
from pathlib import Path

from local_play import run_play

from driver.runner.run import MITOGEN_ENVIRONMENT

# Counts the processes the top level forks, one per host-task that a worker runs, and keeps
# every step's result as the callbacks see it.
COUNTING_CALLBACK = """
import json
import os

from ansible.plugins.callback import CallbackBase

FORKS = []
os.register_at_fork(after_in_parent=lambda: FORKS.append(1))


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "counting"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.results = {}

    def _keep(self, result, outcome):
        self.results[result.task.get_name()] = {"outcome": outcome, **result.result}

    def v2_runner_on_ok(self, result):
        self._keep(result, "ok")

    def v2_runner_on_skipped(self, result):
        self._keep(result, "skipped")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._keep(result, "failed")

    def v2_playbook_on_stats(self, stats):
        with open(os.environ["COUNTED"], "w") as counted:
            json.dump({"forks": len(FORKS), "results": self.results}, counted, default=str)
"""

PLAYBOOK = """
- name: Steps skipped, and the conditions only a step's process can decide
  hosts: target
  gather_facts: false
  vars:
    turned_off: false
  tasks:
    - name: A step whose condition is false
      ansible.builtin.command: "false"
      when: turned_off
      register: plain

    - name: An include whose condition is false loads nothing
      ansible.builtin.include_tasks: not-there.yml
      when: turned_off

    - name: A block whose condition is false
      when: turned_off
      block:
        - name: A step in the block
          ansible.builtin.command: "false"

    - name: A secret's step whose condition is false
      ansible.builtin.command: "false"
      when: turned_off
      no_log: true

    - name: A loop's condition, decided per item by the step's process
      ansible.builtin.command: "false"
      loop: [1]
      when: turned_off

    - name: A condition that cannot be decided fails as before
      ansible.builtin.command: "true"
      when: never_defined
      ignore_errors: true
      register: undecided

    - name: A fact
      ansible.builtin.set_fact:
        made: "{{ turned_off | ternary('no', 'yes') }}"

    - name: An include that loads its steps
      ansible.builtin.include_tasks: included.yml
      vars:
        given: to the include

    - name: A failure on purpose
      ansible.builtin.fail:
        msg: "[on_purpose] failed"
      ignore_errors: true
      register: failed_on_purpose

    - name: A statistic
      ansible.builtin.set_stats:
        data:
          counted: "{{ made }}"

    - name: A check that passes
      ansible.builtin.assert:
        that:
          - plain is skipped
          - plain.false_condition == 'turned_off'
          - undecided is failed
          - "'never_defined' in undecided.msg"
          - made == 'yes'
          - included == 'to the include'
          - failed_on_purpose is failed
"""

INCLUDED = """
- name: A fact from the include
  ansible.builtin.set_fact:
    included: "{{ given }}"
"""

# the loop's and the undecided condition's: both command steps
FORKED_STEPS = 2
SKIPPED = (
    "A step whose condition is false",
    "An include whose condition is false loads nothing",
    "A step in the block",
    "A secret's step whose condition is false",
)
OFF_HOST = (
    "A fact",
    "An include that loads its steps",
    "A fact from the include",
    "A failure on purpose",
    "A statistic",
    "A check that passes",
)


def run_counted(tmp_path: Path, strategy: dict[str, str]) -> dict:
    (tmp_path / "callbacks").mkdir(parents=True)
    (tmp_path / "callbacks" / "counting.py").write_text(COUNTING_CALLBACK)
    (tmp_path / "included.yml").write_text(INCLUDED)
    counted = tmp_path / "counted.json"
    environment = {
        "ANSIBLE_CALLBACK_PLUGINS": str(tmp_path / "callbacks"),
        "ANSIBLE_CALLBACKS_ENABLED": "counting",
        "COUNTED": str(counted),
        **strategy,
    }
    run_play(tmp_path, PLAYBOOK, environment=environment)
    return json.loads(counted.read_text())


def test_a_step_is_answered_as_its_process_would(tmp_path):
    ours = run_counted(tmp_path / "driver", MITOGEN_ENVIRONMENT)
    ansibles = run_counted(tmp_path / "linear", {"ANSIBLE_STRATEGY": "linear"})
    assert ours["results"] == ansibles["results"]
    results = ours["results"]
    for name in SKIPPED:
        assert results[name]["outcome"] == "skipped", name
    assert results["A secret's step whose condition is false"]["_ansible_no_log"] is True
    assert results["A condition that cannot be decided fails as before"]["outcome"] == "failed"
    assert results["A fact"]["ansible_facts"] == {"made": "yes"}
    assert results["A failure on purpose"]["outcome"] == "failed"
    assert results["A statistic"]["ansible_stats"]["data"] == {"counted": "yes"}
    assert results["A check that passes"]["outcome"] == "ok"
    # Ansible's own linear forks a process for every step; the driver's for those that reach
    # the host, and once for Mitogen's connection multiplexer
    assert ansibles["forks"] == FORKED_STEPS + len(SKIPPED) + len(OFF_HOST)
    assert ours["forks"] == FORKED_STEPS + 1
