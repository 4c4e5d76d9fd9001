"""Mitogen's linear strategy, without its CPU pinning, and without a process for a step that
never reaches the host.

Mitogen pins its connection multiplexer to CPU 0 and, on a machine of 2 or 3 CPUs, the Ansible
top level and every worker process to one other CPU: the whole control side then runs on one
core, and a step over several hosts runs its local work (set_fact, include_vars, assert,
argument checks) one host after another. Measured on the 2-core development machine against a
lab of 4 hosts: 60 set_fact steps 15.8 s pinned and 10.0 s unpinned, an unchanged deploy 16.7
to 18.9 s pinned and 14.3 to 14.5 s unpinned (bench/README.md). The kernel's scheduler places
the processes instead; everything else is Mitogen's own.

Every host-task is a process forked from the Ansible top level. A child that collects its
garbage walks every object it inherited, and each object it touches is a page the kernel must
copy: the strategy freezes the top level's objects across each fork (gc.freeze before, unfreeze
after in the parent), so that a child's collections walk only what the child made. Measured on
the 2-core development machine, a forced re-converge at 1+6: the workers' user CPU 13.8 and
12.6 s without, 11.95 and 9.7 s with (bench/README.md).

A step whose condition is false on a host still costs that host a process: forked, connected
to the multiplexer, only to evaluate the condition and answer "skipped" (a step included on the
controller alone is one such process on every worker). The strategy evaluates a plain step's
condition in the top level first, with the variables the process would get, and where it is
false runs the step's TaskExecutor there, which answers "skipped" before it connects. Where the
answer could differ from the process's (a loop, whose condition is per item; a delegated step,
whose variables are the delegate's), or where evaluating it fails or warns, the process runs
the step as before and gives its own answer.

A step whose action never reaches the host (set_fact, assert, fail, set_stats, debug,
include_vars, validate_argument_spec, and an include, which only names what to load) costs the
same process, forked only to run Ansible's TaskExecutor on its copy of the step. The strategy
runs that TaskExecutor in the top level instead, on a copy of the step, and queues its result
as the process would; the host's connection is made but never opened. A delegated step, one
that retries (`until`: its waits would hold every other host), and any other action still get
their process.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy
from ansible._internal import _task
from ansible._internal._display_utils import DeferredWarningContext
from ansible.constants import (
    _ACTION_ALL_INCLUDES,
    _ACTION_DEBUG,
    _ACTION_INCLUDE_VARS,
    _ACTION_SET_FACT,
)
from ansible.executor.task_executor import TaskExecutor
from ansible.executor.task_result import _RawTaskResult
from ansible.inventory.host import Host
from ansible.playbook.task import Task
from ansible.plugins.loader import get_plugin_loader_namespace
from ansible.utils.fqcn import add_internal_fqcns

# The policy is looked up at each use, so replacing it before the strategy starts is enough:
# the base Policy's assignments do nothing.
ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

# The parent unfreezes at once, so its own garbage is still collected.
os.register_at_fork(before=gc.freeze, after_in_parent=gc.unfreeze)

_Linear = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)

# the actions whose work is all in the Ansible top level's Python, none on the host
_ACTIONS_OFF_HOST = frozenset(
    _ACTION_SET_FACT
    + _ACTION_ALL_INCLUDES
    + _ACTION_INCLUDE_VARS
    + _ACTION_DEBUG
    + add_internal_fqcns(("assert", "fail", "set_stats", "validate_argument_spec"))
)


def skips_here(task: Task, task_vars: dict[str, Any]) -> bool:
    """Whether the step's condition is false here, decided as its process would decide it; False
    where only the process can (a loop, a delegated step, a condition that fails or warns)."""
    if not task.when or task.loop_with or task.loop is not None or task.delegate_to:
        return False
    variables = {**task_vars, "ansible_search_path": task.get_search_path()}
    try:
        with _task.TaskContext(task), DeferredWarningContext(variables=variables) as warned:
            holds = task._resolve_conditional(task.when, variables)
            return not holds and not warned.get_warnings() and not warned.get_deprecation_warnings()
    except Exception:  # the step's process raises it again, in the step's own result
        return False


def runs_here(task: Task) -> bool:
    return task.action in _ACTIONS_OFF_HOST and not task.delegate_to and not task.until


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, _Linear):
    def _queue_task(
        self, host: Host, task: Task, task_vars: dict[str, Any], play_context: Any
    ) -> None:
        if not runs_here(task) and not skips_here(task, task_vars):
            super()._queue_task(host, task, task_vars, play_context)
            return
        # what queueing a step and its process do (strategy/__init__.py, worker.py): the step
        # kept for its result, started, run by TaskExecutor on the process's copy of the step
        # in the step's context (a skipped step's answer is TaskExecutor's too, given before it
        # connects), and the result, with the copy's fields, on the queue that the strategy
        # waits on for every queued step
        self._queued_task_cache[(host.name, task._uuid)] = {
            "host": host,
            "task": task,
            "task_vars": task_vars,
            "play_context": play_context,
        }
        self._tqm.send_callback("v2_runner_on_start", host, task)
        ran = task.copy()
        with _task.TaskContext(ran):
            result = TaskExecutor(
                host,
                ran,
                dict(task_vars),
                play_context,
                self._loader,
                get_plugin_loader_namespace(),
                self._final_q,
                self._variable_manager,
            ).run()
        self._final_q.send_task_result(
            _RawTaskResult(host=host, task=ran, return_data=result, task_fields=ran.dump_attrs())
        )
        self._pending_results += 1
