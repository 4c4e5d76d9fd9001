"""The bundled manifests lint clean, and every example request validates."""

from pathlib import Path

import pytest
from conftest import EXAMPLES, MANIFESTS

from driver.catalog import load_entry
from driver.documents import load_path
from driver.lint import lint_paths
from driver.request_check import check_request

EXAMPLE_FILES = sorted(EXAMPLES.glob("*/*.json"))


def test_bundled_manifests_lint_clean():
    assert lint_paths([MANIFESTS]) == []


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_validates(path: Path):
    result = check_request(load_path(path))
    assert result.findings == []
    assert result.valid
    assert result.request is not None
    assert result.request.instance.app_slug == path.parent.name


def test_every_operation_has_an_example():
    for slug in ("slurm-reference", "open-ondemand"):
        loaded = load_entry(slug)
        assert loaded is not None
        covered = {load_path(p).data["operation"]["type"] for p in (EXAMPLES / slug).glob("*.json")}
        for version in loaded.entry.versions:
            assert {op.type for op in version.operations} <= covered


def test_both_placements_have_a_deploy_example():
    modes = {
        load_path(p).data["instance"]["placement_intent"]["worker_placement"]
        for p in (EXAMPLES / "slurm-reference").glob("deploy*.json")
    }
    assert modes == {"same_node", "separate"}


def test_open_ondemand_manifest_matches_product_spec():
    loaded = load_entry("open-ondemand")
    assert loaded is not None
    (version,) = loaded.entry.versions
    placement = version.placement_schema
    assert placement["required"] == ["host_allocation_id", "slurm_instance_id"]
    for field in placement["required"]:
        assert placement["properties"][field] == {
            **placement["properties"][field],
            "type": "string",
            "format": "uuid",
        }
    config = version.config_schema["properties"]
    assert config["portal_title"]["default"] == "GPU Cloud HPC Portal"
    assert config["interactive_apps"]["items"]["enum"] == [
        "jupyter",
        "vscode",
        "rstudio",
        "desktop",
    ]
    # none unless asked: each app offered must have its runtime on the linked cluster
    assert config["interactive_apps"]["default"] == []
    ui = version.ui
    assert ui.endpoint is not None and ui.auth is not None and ui.embedding is not None
    assert (ui.endpoint.type, ui.endpoint.component_key, ui.endpoint.port) == (
        "allocation_port",
        "portal",
        443,
    )
    assert (ui.endpoint.path, ui.endpoint.protocol, ui.auth.strategy) == (
        "/",
        "https",
        "oidc_proxy",
    )
    assert ui.embedding.allowed
    assert ui.embedding.sandbox == "allow-same-origin allow-scripts allow-forms allow-popups"


def test_slurm_reference_monitoring_contract():
    loaded = load_entry("slurm-reference")
    assert loaded is not None and loaded.entry.monitoring is not None
    ports = {e.name: e.port for e in loaded.entry.monitoring.exporters}
    assert ports == {"slurm": 9341, "node": 9100, "dcgm": 9400}
    for version in loaded.entry.versions:
        monitoring = version.config_schema["properties"]["monitoring"]["properties"]
        assert monitoring["retention_time"]["default"] == "7d"
        assert monitoring["retention_size"]["default"] == "5GB"
        assert monitoring["scrape_interval"]["default"] == "30s"
        (tab,) = version.ui.tabs
        assert (tab.key, tab.endpoint.port, tab.endpoint.path) == (
            "monitoring",
            3000,
            "/d/slurm-overview",
        )
        assert tab.auth.strategy == "oidc_proxy" and tab.embedding.allowed


def test_every_finding_code_is_documented(root):
    readme = (root / "docs" / "platform-contract.md").read_text()
    from driver.findings import HINTS

    for code in HINTS:
        if code not in ("schema", "placement", "config", "options"):
            assert f"`{code}`" in readme, code
