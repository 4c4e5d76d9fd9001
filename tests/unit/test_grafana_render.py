"""Grafana cannot be installed here: the monitoring role's Grafana files are rendered by the
role's own task file (grafana_config.yml) with real ansible-playbook into a folder, then
compared with fixtures and checked the way Grafana reads them."""

import configparser
import json
import os
import stat
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from role_render import run_role_tasks

FIXTURES = ROOT / "tests" / "fixtures" / "grafana"
CLIENT_SECRET = "grafana-client-secret-7f3a9c"  # a test value: scanned for in every output


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("grafana")
    root = work / "root"
    root.mkdir()
    secret = work / "oidc-secret"
    secret.write_text(CLIENT_SECRET)
    secret.chmod(0o600)
    extra = {
        "__monitoring_grafana_root": str(root),
        "__monitoring_grafana_user": "root",
        "__monitoring_grafana_group": "root",
        "monitoring_grafana_oidc": {
            "issuer_url": "https://keycloak.example.com/realms/gpuaas",
            "client_id": "grafana-slurm",
            "client_secret_src": str(secret),
            "admin_role": "slurm-admin",
            "allowed_groups": ["proj-7f3a"],
        },
    }
    runs = run_role_tasks(work, "monitoring", "grafana_config", extra, "10.0.0.5")
    return {"root": root, "runs": runs, "work": work}


def _conf(rendered: dict) -> Path:
    return rendered["root"] / "etc" / "grafana"


@pytest.mark.parametrize(
    "relative",
    [
        "grafana.ini",
        "provisioning/datasources/slurm-app.yaml",
        "provisioning/dashboards/slurm-app.yaml",
    ],
)
def test_rendered_files_match_the_fixtures(rendered, relative):
    assert (_conf(rendered) / relative).read_text() == (FIXTURES / relative).read_text()


def test_grafana_ini_reads_as_grafana_reads_it(rendered):
    ini = configparser.ConfigParser(interpolation=None, comment_prefixes=(";", "#"))
    ini.read_string((_conf(rendered) / "grafana.ini").read_text())
    assert ini["auth.anonymous"]["enabled"] == "false"
    assert ini["security"]["allow_embedding"] == "true"
    assert ini["security"]["cookie_secure"] == "true"
    assert ini["security"]["cookie_samesite"] == "none"
    # Secrets are file references: their values are never in grafana.ini.
    assert ini["security"]["admin_password"] == "$__file{/etc/grafana/slurm-app-admin-password}"
    oauth = ini["auth.generic_oauth"]
    assert oauth["client_secret"] == "$__file{/etc/grafana/slurm-app-oidc-client-secret}"
    assert oauth["auth_url"] == (
        "https://keycloak.example.com/realms/gpuaas/protocol/openid-connect/auth"
    )
    assert oauth["login_attribute_path"] == "preferred_username"
    assert "slurm-admin" in oauth["role_attribute_path"]


def test_secrets_are_kept_0600_and_never_printed(rendered):
    password_file = _conf(rendered) / "slurm-app-admin-password"
    secret_file = _conf(rendered) / "slurm-app-oidc-client-secret"
    password = password_file.read_text()
    assert len(password) >= 24
    for path in (password_file, secret_file):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert secret_file.read_text() == CLIENT_SECRET
    for run in rendered["runs"]:
        for text in (run.stdout, run.stderr):
            assert password not in text
            assert CLIENT_SECRET not in text


def test_a_second_run_keeps_the_password_and_changes_nothing(rendered):
    assert "changed=0" in rendered["runs"][1].stdout, rendered["runs"][1].stdout[-2000:]


def test_the_dashboards_use_the_provisioned_datasource(rendered):
    datasource = yaml.safe_load(
        (_conf(rendered) / "provisioning/datasources/slurm-app.yaml").read_text()
    )["datasources"][0]
    folder = rendered["root"] / "var/lib/grafana/slurm-app-dashboards"
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["gpu-detail.json", "job-queue.json", "slurm-overview.json"]
    for name in names:
        dashboard = json.loads((folder / name).read_text())
        assert dashboard["uid"] == name.removesuffix(".json")
        for panel in dashboard["panels"]:
            assert panel["datasource"]["uid"] == datasource["uid"], (name, panel["title"])
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == datasource["uid"]
                assert target["expr"].strip()
    assert os.access(folder, os.R_OK)
