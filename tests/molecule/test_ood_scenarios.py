"""The portal's Molecule scenario on both distributions, one after the other on one test
worker: its containers and network are named after the scenario."""

import pytest
from scenario import run_scenario

pytestmark = pytest.mark.containers


@pytest.mark.parametrize("distro", ["trixie", "bookworm"])
def test_ood_scenario(docker_engine, distro, tmp_path):
    run_scenario("ood", distro, tmp_path)
