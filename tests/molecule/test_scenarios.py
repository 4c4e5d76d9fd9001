"""The Molecule scenario of the Slurm roles and the monitoring stack: each role's idempotence
(every role task run again) and what the e2e labs do not run. `monitoring` (Debian 13) also
runs the member playbooks by hand, as an operator would. `separate` is run by hand only: its
topology is the e2e's `e2e` lab (Debian 13) and `old` lab (Debian 12), and what it proved on
22.05 (a full converge changing nothing, the teams' QoS, priority and empty H100 partition,
clean daemon logs) the `old` lab proves through the driver; the same_node placement is the
e2e's `cfg` and `ood` labs (and the `ood` scenario's cluster host)."""

import pytest
from scenario import SCENARIO_TEST, run_scenario

pytestmark = [pytest.mark.containers, SCENARIO_TEST]


def test_monitoring_scenario(docker_engine, tmp_path):
    run_scenario("monitoring", "trixie", tmp_path, mitogen=True)
