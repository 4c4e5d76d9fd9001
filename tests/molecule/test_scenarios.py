"""Every Molecule scenario: create, converge, idempotence, verify, destroy on real images."""

import os
import subprocess
from pathlib import Path

import pytest
from conftest import OOD_UPSTREAM_CANDIDATES

from driver.lab.images import build_image

pytestmark = pytest.mark.containers
ROOT = Path(__file__).resolve().parents[2]
# Each role's idempotence and the topologies the e2e labs do not have. The same_node placement
# is the e2e's `cfg` and `ood` labs (and the `ood` scenario's cluster host); `separate` on
# Debian 13 is `cluster`'s topology and the e2e's `e2e` lab, so it runs here on Debian 12 only.
SCENARIOS = [
    ("separate", "bookworm"),
    ("cluster", "trixie"),
    ("monitoring", "trixie"),
    ("ood", "trixie"),
    ("ood", "bookworm"),
]


# A scenario's containers and network are named after it: one test worker runs it on every
# distribution, one after the other.
@pytest.mark.parametrize(
    ("scenario", "distro"),
    [
        pytest.param(*case, marks=pytest.mark.xdist_group(f"molecule-{case[0]}"))
        for case in SCENARIOS
    ],
    ids=lambda v: v,
)
def test_molecule_scenario(docker_engine, scenario, distro, tmp_path):
    env = {
        **os.environ,
        "SLURM_APP_MOLECULE_IMAGE": build_image(distro),
        "ANSIBLE_FORCE_COLOR": "0",
        "PY_COLORS": "0",
        "NO_COLOR": "1",
        # the ood scenario's provider files (client secret among them), kept for the scan below
        "SLURM_APP_OOD_TEST_DIR": str(tmp_path / "oidc"),
        # OOD's own code for the ood scenario's job-library check (skipped without it)
        "SLURM_APP_OOD_UPSTREAM": str(
            next((path for path in OOD_UPSTREAM_CANDIDATES if path.is_dir()), "")
        ),
    }
    log = tmp_path / "molecule.log"
    with log.open("w") as sink:
        result = subprocess.run(
            ["molecule", "test", "-s", scenario],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            check=False,
            timeout=1500,
        )
    text = log.read_text()
    assert result.returncode == 0, text[-6000:]
    assert "idempotence: Executed: Successful" in text.replace("➜ ", "")
    secret = tmp_path / "oidc" / "client_secret"
    if secret.is_file():
        assert secret.read_text().strip() not in text, "the OIDC client secret was printed"
