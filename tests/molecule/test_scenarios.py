"""The Molecule scenarios of the Slurm roles and the monitoring stack: each role's idempotence
and the topologies the e2e labs do not have. The same_node placement is the e2e's `cfg` and
`ood` labs (and the `ood` scenario's cluster host); `separate` on Debian 13 is `cluster`'s
topology and the e2e's `e2e` lab, so it runs here on Debian 12 only."""

import pytest
from scenario import run_scenario

pytestmark = pytest.mark.containers


@pytest.mark.parametrize(
    ("scenario", "distro"),
    [("separate", "bookworm"), ("cluster", "trixie"), ("monitoring", "trixie")],
    ids=lambda v: v,
)
def test_molecule_scenario(docker_engine, scenario, distro, tmp_path):
    run_scenario(scenario, distro, tmp_path)
