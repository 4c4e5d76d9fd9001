"""Grafana cannot be installed here: the monitoring role's Grafana files are rendered by the
role's own task file (grafana_config.yml) with real ansible-playbook into a folder, then
compared with fixtures and checked the way Grafana reads them."""

import configparser
import json
import os
import stat
import urllib.parse
from pathlib import Path

import jmespath
import pytest
import yaml
from conftest import ROOT
from local_play import run_role_tasks

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
    runs = run_role_tasks(work, "monitoring", "_grafana_config", extra, "10.0.0.5")
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


# Grafana cannot run here, so its login decision is modelled from its source
# (pkg/login/social/connectors/generic_oauth.go, UserInfo, Grafana 10-12): the claims of the token
# named by id_token_attribute_name (id_token unless set), then userinfo from api_url; the first
# source that yields a role, groups or login sets it; role_attribute_strict refuses a login
# without a role, allowed_groups one in none of them. JMESPath is evaluated by the jmespath
# library, the specification Grafana's go-jmespath implements.
ROOT_URL = "https://console.example.com/instances/i-7f3a/grafana/"

# Four users of a Keycloak realm: (realm roles, groups claim).
USERS = {
    "project-admin": (["default-roles-gpuaas", "offline_access", "slurm-admin"], ["proj-7f3a"]),
    "project-user": (["default-roles-gpuaas", "offline_access"], ["proj-7f3a"]),
    "other-project-admin": (["default-roles-gpuaas", "slurm-admin"], ["proj-other"]),
    "no-groups-admin": (["default-roles-gpuaas", "slurm-admin"], None),
}
# Which of Keycloak's documents carry the realm roles: its built-in "realm roles" mapper adds
# them to the access token only; a realm may map them into the ID token as well. The groups
# mapper adds to every document.
SHAPES = {
    "keycloak_defaults": {"access_token"},
    "roles_in_id_token": {"access_token", "id_token"},
}


def _documents(user: str, shape: str) -> dict[str, dict]:
    roles, groups = USERS[user]
    documents = {}
    for name in ("access_token", "id_token", "userinfo"):
        claims: dict = {"preferred_username": user, "email": f"{user}@example.org"}
        if groups is not None:
            claims["groups"] = groups
        if name in SHAPES[shape]:
            claims["realm_access"] = {"roles": roles}
        documents[name] = claims
    return documents


def grafana_login(oauth: configparser.SectionProxy, documents: dict[str, dict]) -> str:
    """The role Grafana gives, or `refused: <why>`."""
    sources = [documents[oauth.get("id_token_attribute_name", "id_token")], documents["userinfo"]]
    role, groups, login = "", [], ""
    for claims in sources:
        if not role:
            try:
                found = jmespath.search(oauth["role_attribute_path"], claims)
            except jmespath.exceptions.JMESPathError:
                found = None
            role = found if isinstance(found, str) else ""
        if not groups:
            found = jmespath.search(oauth["groups_attribute_path"], claims)
            groups = [g for g in found if isinstance(g, str)] if isinstance(found, list) else []
        if not login:
            login = jmespath.search(oauth["login_attribute_path"], claims) or ""
    if oauth.getboolean("role_attribute_strict") and role not in ("Viewer", "Editor", "Admin"):
        return "refused: no role"
    allowed = [g for g in oauth["allowed_groups"].replace(",", " ").split() if g]
    if allowed and not set(groups) & set(allowed):
        return "refused: not in an allowed group"
    return role


@pytest.fixture(scope="module")
def rendered_id_token(tmp_path_factory) -> configparser.ConfigParser:
    """The same role with claims_from id_token and the platform's proxy URL, rendered once."""
    work = tmp_path_factory.mktemp("grafana-id-token")
    root = work / "root"
    root.mkdir()
    secret = work / "oidc-secret"
    secret.write_text(CLIENT_SECRET)
    extra = {
        "__monitoring_grafana_root": str(root),
        "__monitoring_grafana_user": "root",
        "__monitoring_grafana_group": "root",
        "monitoring_grafana_root_url": ROOT_URL,
        "monitoring_grafana_oidc": {
            "issuer_url": "https://keycloak.example.com/realms/gpuaas",
            "client_id": "grafana-slurm",
            "client_secret_src": str(secret),
            "allowed_groups": ["proj-7f3a"],
            "claims_from": "id_token",
        },
    }
    run_role_tasks(work, "monitoring", "_grafana_config", extra, "10.0.0.5", times=1)
    return _ini((root / "etc" / "grafana" / "grafana.ini").read_text())


def _ini(text: str) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(interpolation=None, comment_prefixes=(";", "#"))
    ini.read_string(text)
    return ini


EXPECTED = {
    "project-admin": "Admin",
    "project-user": "Viewer",
    "other-project-admin": "refused: not in an allowed group",
    "no-groups-admin": "refused: not in an allowed group",
}


@pytest.mark.parametrize("user", sorted(USERS))
def test_keycloak_defaults_map_roles_from_the_access_token(rendered, user):
    oauth = _ini((_conf(rendered) / "grafana.ini").read_text())["auth.generic_oauth"]
    assert oauth["id_token_attribute_name"] == "access_token"
    assert grafana_login(oauth, _documents(user, "keycloak_defaults")) == EXPECTED[user]


@pytest.mark.parametrize("user", sorted(USERS))
def test_a_realm_mapping_roles_into_the_id_token_is_read_there(rendered_id_token, user):
    oauth = rendered_id_token["auth.generic_oauth"]
    assert "id_token_attribute_name" not in oauth
    assert grafana_login(oauth, _documents(user, "roles_in_id_token")) == EXPECTED[user]


def test_a_role_claim_in_no_source_refuses_the_login_instead_of_guessing_viewer(
    rendered_id_token,
):
    """id_token read on a realm with the default mappers: no document Grafana reads has the
    roles, so even the project's admin is refused, never silently made a Viewer."""
    oauth = rendered_id_token["auth.generic_oauth"]
    documents = _documents("project-admin", "keycloak_defaults")
    assert grafana_login(oauth, documents) == "refused: no role"


def test_root_url_auto_login_and_sign_out_come_from_the_request(rendered, rendered_id_token):
    ini = rendered_id_token
    assert ini["server"]["root_url"] == ROOT_URL
    assert ini["auth.generic_oauth"]["auto_login"] == "true"
    assert not ini.has_option("auth", "oauth_auto_login")  # deprecated since Grafana 10
    signout = urllib.parse.urlsplit(ini["auth"]["signout_redirect_url"])
    assert signout.path == "/realms/gpuaas/protocol/openid-connect/logout"
    assert urllib.parse.parse_qs(signout.query) == {
        "client_id": ["grafana-slurm"],
        "post_logout_redirect_uri": [ROOT_URL],
    }
    # without root_url in the request: the controller's address
    default = _ini((_conf(rendered) / "grafana.ini").read_text())
    assert default["server"]["root_url"] == "https://10.0.0.5:3000/"
    query = urllib.parse.urlsplit(default["auth"]["signout_redirect_url"]).query
    assert urllib.parse.parse_qs(query)["post_logout_redirect_uri"] == ["https://10.0.0.5:3000/"]
