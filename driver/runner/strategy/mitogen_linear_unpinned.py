"""Mitogen's linear strategy, without its CPU pinning.

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
"""

import gc
import os

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy

# The policy is looked up at each use, so replacing it before the strategy starts is enough:
# the base Policy's assignments do nothing.
ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

# The parent unfreezes at once, so its own garbage is still collected.
os.register_at_fork(before=gc.freeze, after_in_parent=gc.unfreeze)

_Linear = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, _Linear):
    pass
