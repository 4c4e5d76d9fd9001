"""The portal's Molecule scenario on Debian 12: the Slurm client from the controller's
slurm.conf (22.05 has no sackd) and Apache's site as the role writes it where OOD is not
installed. Debian 13 (sackd) with OOD's own generator and /node/ proxy is the e2e's `ood` lab."""

import pytest
from scenario import SCENARIO_TEST, run_scenario

pytestmark = [pytest.mark.containers, SCENARIO_TEST]


def test_open_ondemand_scenario(docker_engine, tmp_path):
    run_scenario("open_ondemand", "bookworm", tmp_path)
