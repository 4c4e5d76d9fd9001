"""The Molecule scenarios of the Slurm roles and the monitoring stack: each role's idempotence
and what the e2e labs do not run. `monitoring` (Debian 13) also runs the member playbooks by
hand, as an operator would; `separate` runs on Debian 12 (Slurm 22.05) only, since on Debian 13
its topology is the e2e's `e2e` lab; the same_node placement is the e2e's `cfg` and `ood` labs
(and the `ood` scenario's cluster host)."""

import pytest
from scenario import run_scenario

pytestmark = pytest.mark.containers


@pytest.mark.parametrize(
    ("scenario", "distro"), [("separate", "bookworm"), ("monitoring", "trixie")], ids=lambda v: v
)
def test_molecule_scenario(docker_engine, scenario, distro, tmp_path):
    run_scenario(scenario, distro, tmp_path)
