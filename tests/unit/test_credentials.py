"""Credential files are confined to the request's own folder under the driver's credentials
root, `<root>/<project_id>/<instance_id>/` (issues: trust boundary, tenant boundary 2nd pass).

Each case builds real files, links and modes under a temporary root and asserts the exact
(code, JSON path) findings of `validate-request --check-files`."""

import ipaddress
import json
import os
import socket
from pathlib import Path

import pytest
from conftest import example

from driver.documents import load_json
from driver.request_check import check_request

SECRET_VALUE = "hunter2-s3cr3t-value"
OIDC_REF = ("instance", "config", "monitoring", "grafana", "oidc", "client_secret_ref")


def _private(path: Path, text: str = "material\n", mode: int = 0o600) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


DEPLOY = example("slurm-reference/deploy")
PROJECT, INSTANCE = DEPLOY["project_id"], DEPLOY["instance"]["id"]
OWN = f"{PROJECT}/{INSTANCE}"
# Another instance of the same project, and another project's instance with the same id.
SIBLING = f"{PROJECT}/7e2d1c0b-9a8f-4e6d-b5c4-a3b2c1d0e9f8"
OTHER_TENANT = f"proj-other/{INSTANCE}"


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """root/ (the credentials root) with the instance's key, munge key and secrets/ in
    root/<project>/<instance>/, other tenants' keys beside it; outside/ beside the root."""
    root = tmp_path / "root"
    outside = _private(tmp_path / "outside" / "platform-token")
    key = _private(root / OWN / "id_ed25519")
    munge = _private(root / OWN / "munge.key")
    secrets = root / OWN / "secrets"
    _private(secrets / "grafana-oidc-client-secret")
    for other in (SIBLING, OTHER_TENANT):
        _private(root / other / "munge.key")
        _private(root / other / "id_ed25519")
        _private(root / other / "secrets" / "grafana-oidc-client-secret")
    _private(root / PROJECT / "munge.key")
    monkeypatch.setenv("SLURM_APP_CREDENTIALS_ROOT", str(root))
    return {"root": root, "outside": outside, "key": key, "munge": munge, "secrets": secrets}


def _findings(layout, change=None) -> set[tuple[str, str]]:
    request = example("slurm-reference/deploy")
    request["credentials"] = {
        "ssh_private_key_file": str(layout["key"]),
        "munge_key_file": str(layout["munge"]),
        "secrets_dir": str(layout["secrets"]),
    }
    if change:
        change(request, layout)
    result = check_request(load_json(json.dumps(request)), files=True)
    for finding in result.findings:
        assert SECRET_VALUE not in finding.message
        assert str(layout["outside"]) not in finding.message
    return {(f.code, f.path) for f in result.findings}


def _set_munge(path_of):
    def change(request, layout):
        request["credentials"]["munge_key_file"] = str(path_of(layout))

    return change


def _link(at: str, to: str):
    def path_of(layout):
        link = layout["root"] / at
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(layout[to] if to in layout else layout["root"] / to)
        return link

    return path_of


def _chown_to_nobody(layout):
    os.chown(layout["munge"], 65534, 65534)
    return layout["munge"]


def _chmod(mode: int):
    def path_of(layout):
        layout["munge"].chmod(mode)
        return layout["munge"]

    return path_of


MUNGE = ("secret-file", "$.credentials.munge_key_file")
CASES = {
    "outside-the-root": (_set_munge(lambda lay: lay["outside"]), {MUNGE}),
    "symlink-escaping-the-root": (_set_munge(_link(f"{OWN}/innocent.key", "outside")), {MUNGE}),
    # issue 44 (2): the key the driver connects with is never a secret to copy to hosts
    "symlink-to-the-ssh-key-inside-the-folder": (
        _set_munge(_link(f"{OWN}/alias.key", "key")),
        {MUNGE},
    ),
    "another-instance-of-the-project": (
        _set_munge(lambda lay: lay["root"] / SIBLING / "munge.key"),
        {MUNGE},
    ),
    "another-tenant-same-instance-id": (
        _set_munge(lambda lay: lay["root"] / OTHER_TENANT / "munge.key"),
        {MUNGE},
    ),
    "the-project-folder-above-the-instance": (
        _set_munge(lambda lay: lay["root"] / PROJECT / "munge.key"),
        {MUNGE},
    ),
    "another-tenants-ssh-key": (
        _set_munge(lambda lay: lay["root"] / OTHER_TENANT / "id_ed25519"),
        {MUNGE},
    ),
    "symlink-in-the-folder-to-a-sibling": (
        _set_munge(_link(f"{OWN}/borrowed.key", f"{SIBLING}/munge.key")),
        {MUNGE},
    ),
    "another-owner": (_set_munge(_chown_to_nobody), {MUNGE}),
    "group-readable": (_set_munge(_chmod(0o640)), {MUNGE}),
    "executable": (_set_munge(_chmod(0o700)), {MUNGE}),
    "read-only-0400": (_set_munge(_chmod(0o400)), set()),
    "a-directory": (_set_munge(lambda lay: lay["secrets"]), {MUNGE}),
    "missing": (_set_munge(lambda lay: lay["root"] / "proj" / "absent"), {MUNGE}),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_munge_key_file_confinement(layout, case):
    change, expected = CASES[case]
    assert _findings(layout, change) == expected


def test_the_valid_layout_passes(layout):
    assert _findings(layout) == set()


def test_a_secret_link_leaving_secrets_dir_is_refused(layout):
    def change(request, layout):
        link = layout["secrets"] / "grafana-oidc-client-secret"
        link.unlink()
        link.symlink_to(layout["key"])  # inside the root, but outside secrets_dir

    assert _findings(layout, change) == {("secret-file", "$." + ".".join(OIDC_REF))}


@pytest.mark.parametrize(
    "where", ["outside", SIBLING + "/secrets", OTHER_TENANT + "/secrets", PROJECT, "."]
)
def test_secrets_dir_outside_the_instance_folder_is_refused(layout, where):
    def change(request, layout):
        folder = layout["outside"].parent if where == "outside" else layout["root"] / where
        request["credentials"]["secrets_dir"] = str(folder.resolve())

    assert _findings(layout, change) == {("secret-file", "$.credentials.secrets_dir")}


def test_another_tenants_ssh_key_is_refused(layout):
    def change(request, layout):
        key = layout["root"] / OTHER_TENANT / "id_ed25519"
        request["credentials"]["ssh_private_key_file"] = str(key)

    assert _findings(layout, change) == {("secret-file", "$.credentials.ssh_private_key_file")}


def test_an_upper_case_instance_id_names_the_same_folder(layout):
    def change(request, layout):
        request["instance"]["id"] = INSTANCE.upper()

    assert _findings(layout, change) == set()


def test_a_secret_pasted_into_a_ref_is_never_echoed(layout, capsys):
    def change(request, layout):
        oidc = request["instance"]["config"]["monitoring"]["grafana"]["oidc"]
        oidc["client_secret_ref"] = SECRET_VALUE

    assert _findings(layout, change) == {("secret-file", "$." + ".".join(OIDC_REF))}

    def without_dir(request, layout):
        change(request, layout)
        del request["credentials"]["secrets_dir"]

    assert _findings(layout, without_dir) == {("secret-file", "$." + ".".join(OIDC_REF))}


@pytest.mark.parametrize(
    "path", ["/srv/creds/proj-a/../proj-b/id_ed25519", "/srv/creds/./id", "/srv//id", "/srv/id/"]
)
def test_dot_segments_are_refused_by_the_contract(path):
    request = example("slurm-reference/deploy")
    request["credentials"]["munge_key_file"] = path
    result = check_request(load_json(json.dumps(request)))
    assert {(f.code, f.path) for f in result.findings} == {
        ("schema.pattern", "$.credentials.munge_key_file")
    }


def test_a_name_resolving_to_loopback_is_refused_before_a_run(layout):
    """This machine's own name resolves to loopback (Debian's 127.0.1.1 line, or the
    sandbox's 127.0.0.1): a request naming it as an allocation's address is refused."""
    name = socket.gethostname()
    resolved = {info[4][0] for info in socket.getaddrinfo(name, None)}
    if not any(ipaddress.ip_address(ip).is_loopback for ip in resolved):
        pytest.skip(f"{name} resolves to {sorted(resolved)} here, none loopback")

    def change(request, layout):
        request["allocations"][1]["address"] = name

    assert _findings(layout, change) == {("reserved-address", "$.allocations[1].address")}
    # the same request passes the checks that do not resolve names
    request = example("slurm-reference/deploy")
    request["allocations"][1]["address"] = name
    assert check_request(load_json(json.dumps(request))).valid


def test_a_secret_reference_never_names_the_key_the_driver_connects_with(layout):
    """Issue 44 (2): the SSH key's own folder as secrets_dir, a ref naming the key there, a
    hard link to it in secrets_dir, and the key as munge_key_file are each refused: the roles
    would copy it to the controller, install it as the munge key or send it as a token."""
    webhook_ref = ("instance", "config", "monitoring", "alerting", "webhook")

    def key_folder_as_secrets(request, layout):
        request["credentials"]["secrets_dir"] = str(layout["key"].parent)
        oidc = request["instance"]["config"]["monitoring"]["grafana"]["oidc"]
        oidc["client_secret_ref"] = "id_ed25519"
        request["instance"]["config"]["monitoring"]["alerting"] = {
            "webhook": {
                "url": "https://alerts.example.com/",
                "bearer_token_secret_ref": "id_ed25519",
            }
        }

    assert _findings(layout, key_folder_as_secrets) == {
        ("secret-file", "$.credentials.secrets_dir")
    }

    def hard_link_in_secrets(request, layout):
        os.link(layout["key"], layout["secrets"] / "alert-token")
        request["instance"]["config"]["monitoring"]["alerting"] = {
            "webhook": {
                "url": "https://alerts.example.com/",
                "bearer_token_secret_ref": "alert-token",
            }
        }

    assert _findings(layout, hard_link_in_secrets) == {
        ("secret-file", "$." + ".".join((*webhook_ref, "bearer_token_secret_ref")))
    }
    assert _findings(layout, _set_munge(lambda layout: layout["key"])) == {
        ("secret-file", "$.credentials.munge_key_file")
    }
