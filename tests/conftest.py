import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MANIFESTS = ROOT / "manifests"


def example(name: str) -> dict:
    return json.loads((EXAMPLES / f"{name}.json").read_text())


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def docker_engine():
    """The engine the lab needs; started when installed (scripts/setup.sh installs it)."""
    from driver.lab.engine import LabError, docker_client

    try:
        return docker_client()
    except LabError as exc:
        pytest.fail(f"containers tests need the docker engine: {exc}")
