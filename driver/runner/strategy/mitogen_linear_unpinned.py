"""Mitogen's linear strategy, without its CPU pinning.

Mitogen pins its connection multiplexer to CPU 0 and, on a machine of 2 or 3 CPUs, the Ansible
top level and every worker process to one other CPU: the whole control side then runs on one
core, and a step over several hosts runs its local work (set_fact, include_vars, assert,
argument checks) one host after another. Measured on the 2-core development machine against a
lab of 4 hosts: 60 set_fact steps 15.8 s pinned and 10.0 s unpinned, an unchanged deploy 16.7
to 18.9 s pinned and 14.3 to 14.5 s unpinned (bench/README.md). The kernel's scheduler places
the processes instead; everything else is Mitogen's own.
"""

import ansible_mitogen.affinity
import ansible_mitogen.loaders
import ansible_mitogen.strategy

# The policy is looked up at each use, so replacing it before the strategy starts is enough:
# the base Policy's assignments do nothing.
ansible_mitogen.affinity.policy = ansible_mitogen.affinity.Policy()

_Linear = ansible_mitogen.loaders.strategy_loader.get("linear", class_only=True)


class StrategyModule(ansible_mitogen.strategy.StrategyMixin, _Linear):
    pass
