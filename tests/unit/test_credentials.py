"""Credential files are confined to the driver's credentials root (issue: trust boundary).

Each case builds real files, links and modes under a temporary root and asserts the exact
(code, JSON path) findings of `validate-request --check-files`."""

import json
import os
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


@pytest.fixture
def layout(tmp_path, monkeypatch):
    """root/ (the credentials root) with a key, a munge key and secrets/; outside/ beside it."""
    root = tmp_path / "root"
    outside = _private(tmp_path / "outside" / "platform-token")
    key = _private(root / "proj" / "id_ed25519")
    munge = _private(root / "proj" / "munge.key")
    secrets = root / "proj" / "secrets"
    _private(secrets / "grafana-oidc-client-secret")
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
    "symlink-escaping-the-root": (_set_munge(_link("proj/innocent.key", "outside")), {MUNGE}),
    "symlink-to-the-ssh-key-inside-the-root": (
        _set_munge(_link("proj/alias.key", "key")),
        set(),
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


def test_secrets_dir_outside_the_root_is_refused(layout):
    def change(request, layout):
        request["credentials"]["secrets_dir"] = str(layout["outside"].parent)

    assert _findings(layout, change) == {("secret-file", "$.credentials.secrets_dir")}


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
