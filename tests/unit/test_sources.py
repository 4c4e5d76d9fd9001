"""The source policy: every source the roles fetch from is named in driver/apps/sources.py,
the rules match what they say, and a refusal names the source, the rule and the layer."""

import json
import re

import pytest
import yaml
from conftest import ROOT, console_script, example

from driver.apps import adapter_for
from driver.apps.sources import VENDORS, source
from driver.catalog import load_entry
from driver.models.request import OperationRequest
from driver.models.sources import SourceRule
from driver.runner.plan import RunPlan
from driver.site import Site, SiteSources

URL = re.compile(r"https?://([A-Za-z0-9.-]+)")
# what no host fetches from: a placeholder in a comment, the host itself
NOT_FETCHED = {"host", "127.0.0.1"}


def test_every_host_a_role_fetches_from_is_a_named_source():
    named = {
        host
        for vendor in VENDORS.values()
        for url in (vendor.repository, vendor.trust_file)
        for host in URL.findall(url)
    } | set(URL.findall(SiteSources().npm_registry))
    fetched = {
        host: path.relative_to(ROOT)
        for path in (ROOT / "roles").rglob("*")
        if path.is_file() and path.suffix in {"", ".yml", ".j2", ".sh", ".py"}
        for host in URL.findall(path.read_text(errors="replace"))
        if host not in NOT_FETCHED
    }
    assert fetched, "no URL found in the roles: the scan is broken"
    assert {host: path for host, path in fetched.items() if host not in named} == {}


@pytest.mark.parametrize(
    ("rule", "name", "kind", "location", "matches"),
    [
        (
            {"host": "*.nvidia.com"},
            "nvidia-cuda",
            "apt",
            "https://developer.download.nvidia.com/x",
            True,
        ),
        ({"host": "*.nvidia.com"}, "x", "apt", "https://nvidia.com/", True),
        ({"host": "*.nvidia.com"}, "x", "apt", "https://evilnvidia.com/", False),
        ({"host": "apt.grafana.com"}, "grafana", "apt", "https://apt.grafana.com", True),
        ({"host": "apt.grafana.com"}, "x", "apt", "https://grafana.com", False),
        ({"kind": "npm"}, "npm", "npm", "https://registry.npmjs.org/", True),
        (
            {"kind": "npm", "host": "npm.corp.example"},
            "npm",
            "npm",
            "https://registry.npmjs.org/",
            False,
        ),
        # Debian's own suites have no host: only a rule by name or kind reaches them
        (
            {"name": "debian"},
            "debian",
            "apt",
            "the Debian mirror each host is configured with",
            True,
        ),
        (
            {"host": "deb.debian.org"},
            "debian",
            "apt",
            "the Debian mirror each host is configured with",
            False,
        ),
        ({"kind": "apt"}, "debian", "apt", "the Debian mirror each host is configured with", True),
    ],
)
def test_a_rule_matches_every_field_it_names(rule, name, kind, location, matches):
    assert SourceRule.model_validate(rule).matches(source(name, kind, location, "")) is matches


def _needed(name: str, site: dict, **config) -> list[str]:
    data = example(name)
    data["instance"]["config"].update(config)
    request = OperationRequest.model_validate(data)
    loaded = load_entry(request.instance.app_slug)
    assert loaded is not None
    version = loaded.entry.version(request.instance.version)
    assert version is not None
    needed = adapter_for(request.instance.app_slug).sources(
        request, version, Site.model_validate(site)
    )
    return [item.source.name for item in needed]


def test_an_operation_needs_what_its_config_and_the_site_make_it_install():
    vendors = {
        "grafana": {"source": "repository", "bootstrap_sha256": "a" * 64},
        "dcgm_exporter": {"source": "artifact", "artifact": "/srv/dcgm.tar.gz", "sha256": "b" * 64},
    }
    assert _needed("slurm-reference/deploy", {}) == ["debian"]
    # the example's workers have GPUs: NVIDIA's exporter from the site's archive
    assert _needed("slurm-reference/deploy", vendors, interactive_runtimes=["vscode"]) == [
        "debian",
        "grafana",
        "grafana:trust",
        "nvidia-cuda:artifact",
        "npm",
    ]
    assert _needed("slurm-reference/deploy", vendors, monitoring={"enabled": False}) == ["debian"]
    # an operation that installs nothing needs no source, whatever the site says
    assert _needed("slurm-reference/status", vendors) == []
    assert _needed("slurm-reference/drain_worker", vendors) == []
    assert _needed("open-ondemand/deploy", {"open_ondemand": {"source": "repository"}}) == [
        "debian",
        "osc-ondemand",
        "osc-ondemand:trust",
    ]


def test_a_denied_source_is_refused_before_any_host_naming_source_rule_and_layer(tmp_path):
    request = example("slurm-reference/deploy")
    request["instance"]["config"]["interactive_runtimes"] = ["vscode"]
    request["source_policy"] = {"allow": [{"name": "debian"}, {"kind": "npm"}]}
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    site = tmp_path / "site.yaml"
    site.write_text(yaml.safe_dump({"sources": {"deny": [{"kind": "npm", "host": "*.npmjs.org"}]}}))
    env = {
        "PATH": "/usr/bin:/bin",
        "SLURM_APP_SITE": str(site),
        "SLURM_APP_STATE_DIR": str(tmp_path),
    }
    ended = console_script("validate-request", "--format", "json", str(path), env=env)
    assert ended.returncode == 2, ended.stdout + ended.stderr
    (finding,) = json.loads(ended.stdout)["findings"]
    assert finding["code"] == "source-denied"
    assert finding["path"] == "$.instance.config.interactive_runtimes"
    message = finding["message"]
    assert "npm (npm, https://registry.npmjs.org/)" in message
    assert "{kind: npm, host: *.npmjs.org}" in message and "global deny list" in message
    # the platform's deny list allows the rest: the same request without the runtime passes
    request["instance"]["config"]["interactive_runtimes"] = []
    path.write_text(json.dumps(request))
    ended = console_script("validate-request", "--format", "json", str(path), env=env)
    assert ended.returncode == 0, ended.stdout


def test_the_tenants_registry_reaches_the_worker_as_a_url_and_its_token_as_a_file(tmp_path):
    """The token's file stays on the driver's host: the role reads it during the run (its
    e2e test in test_open_ondemand.py follows it to the registry)."""
    data = example("slurm-reference/add_worker")
    data["instance"]["config"]["interactive_runtimes"] = ["vscode"]
    registry = {"url": "https://npm.corp.example/", "token_secret_ref": "npm-token"}
    data["tenant_sources"] = {"npm_registry": registry}
    request = OperationRequest.model_validate(data)
    loaded = load_entry(request.instance.app_slug)
    assert loaded is not None
    version = loaded.entry.version(request.instance.version)
    assert version is not None
    plan = RunPlan.of(request, version)
    variables = plan.inventory.group_vars
    assert variables["slurm_worker_npm_registry"] == "https://npm.corp.example/"
    secrets_dir = data["credentials"]["secrets_dir"]
    assert variables["slurm_worker_npm_registry_token_src"] == f"{secrets_dir}/npm-token"
    [npm] = [
        needed.source
        for needed in plan.adapter.sources(request, version, Site())
        if needed.source.kind == "npm"
    ]
    assert (npm.location, npm.host, npm.tier) == (registry["url"], "npm.corp.example", "tenant")
