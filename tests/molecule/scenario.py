"""Runs one Molecule scenario (create, converge, idempotence, verify, destroy on real images)
and checks what every scenario must show. Each scenario has its own test file, so the two test
workers (pyproject's --dist loadfile) can take them side by side."""

import os
import subprocess
from pathlib import Path

import pytest
from conftest import OOD_UPSTREAM_CANDIDATES

from driver.lab.images import build_image
from driver.runner.run import MITOGEN_ENVIRONMENT

ROOT = Path(__file__).resolve().parents[2]
SCENARIO_TIMEOUT_S = 2400
# pytest-timeout's limit for a scenario's test: past the scenario's own, so that a hung
# scenario's containers are destroyed (below) before pytest gives up on the test
SCENARIO_TEST = pytest.mark.timeout(SCENARIO_TIMEOUT_S + 900)


def run_scenario(scenario: str, distro: str, tmp_path: Path, mitogen: bool = False) -> None:
    """`mitogen`: on the driver's strategy instead of ansible.cfg's (the operators' default)."""
    env = {
        **os.environ,
        **(MITOGEN_ENVIRONMENT if mitogen else {}),
        "SLURM_APP_MOLECULE_IMAGE": build_image(distro),
        "ANSIBLE_FORCE_COLOR": "0",
        "PY_COLORS": "0",
        "NO_COLOR": "1",
        # the open_ondemand scenario's provider files (its client secret too), kept for the scan
        "SLURM_APP_OOD_TEST_DIR": str(tmp_path / "oidc"),
        # OOD's own code for the open_ondemand scenario's job-library check (skipped without it)
        "SLURM_APP_OOD_UPSTREAM": str(
            next((path for path in OOD_UPSTREAM_CANDIDATES if path.is_dir()), "")
        ),
    }
    log = tmp_path / "molecule.log"
    with log.open("w") as sink:

        def molecule(command: str, timeout: int) -> subprocess.CompletedProcess:
            return subprocess.run(
                ["molecule", command, "-s", scenario],
                cwd=ROOT,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                check=False,
                timeout=timeout,
            )

        try:
            # a hung scenario ends here; monitoring takes about 800 s on 2 busy cores
            result = molecule("test", SCENARIO_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # killed mid-run, Molecule leaves its containers: they would load the rest of the run
            molecule("destroy", 600)
            pytest.fail(f"{scenario} ran past {SCENARIO_TIMEOUT_S} s:\n{log.read_text()[-6000:]}")
    text = log.read_text()
    assert result.returncode == 0, text[-6000:]
    assert "idempotence: Executed: Successful" in text.replace("➜ ", "")
    secret = tmp_path / "oidc" / "client_secret"
    if secret.is_file():
        assert secret.read_text().strip() not in text, "the OIDC client secret was printed"
