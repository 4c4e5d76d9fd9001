"""The command line as the platform and manifest authors use it: exit codes and output."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, MANIFESTS, ROOT, example

DRIVER = [sys.executable, "-m", "driver.cli"]


def run(
    *args: str, stdin: str | None = None, cwd: Path = ROOT, credentials: Path | None = None
) -> subprocess.CompletedProcess:
    env = {**os.environ}
    if credentials is not None:
        env["SLURM_APP_CREDENTIALS_ROOT"] = str(credentials)
    return subprocess.run(
        [*DRIVER, *args], input=stdin, capture_output=True, text=True, cwd=cwd, env=env, check=False
    )


def test_console_script_installed():
    script = shutil.which("slurm-app-driver", path=str(Path(sys.executable).parent))
    assert script, "pip install -e . provides the slurm-app-driver console script"
    out = subprocess.run([script, "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("slurm-app-driver ")


def test_lint_clean_exit_zero():
    result = run("lint", "manifests/")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no findings" in result.stdout


def test_lint_defaults_to_manifests_folder():
    assert run("lint").returncode == 0


def test_lint_findings_exit_one_json(tmp_path):
    folder = tmp_path / "open-ondemand"
    shutil.copytree(MANIFESTS / "open-ondemand", folder)
    text = (folder / "manifest.yaml").read_text().replace("port: 443", "port: 0")
    (folder / "manifest.yaml").write_text(text)
    result = run("lint", "--format", "json", str(folder))
    assert result.returncode == 1
    body = json.loads(result.stdout)
    assert body["count"] == 1
    (finding,) = body["findings"]
    assert finding["code"] == "schema.minimum"
    assert finding["path"] == "$.versions[0].ui.endpoint.port"
    assert finding["file"] == str(folder / "manifest.yaml")
    assert text.splitlines()[finding["line"] - 1].strip() == "port: 0"
    assert finding["hint"]


def test_lint_human_format_names_file_line_path_and_hint(tmp_path):
    folder = tmp_path / "open-ondemand"
    shutil.copytree(MANIFESTS / "open-ondemand", folder)
    text = (folder / "manifest.yaml").read_text().replace("allow-popups", "allow-popup")
    (folder / "manifest.yaml").write_text(text)
    result = run("lint", str(folder / "manifest.yaml"))
    assert result.returncode == 1
    line = next(i for i, t in enumerate(text.splitlines(), 1) if 'allow-popup"' in t)
    assert f"manifest.yaml:{line}: error invalid-sandbox-token" in result.stdout
    assert "$.versions[0].ui.embedding.sandbox" in result.stdout
    assert "hint:" in result.stdout


def test_lint_warning_only_passes_unless_strict(tmp_path):
    folder = tmp_path / "open-ondemand"
    shutil.copytree(MANIFESTS / "open-ondemand", folder)
    manifest = folder / "manifest.yaml"
    manifest.write_text(manifest.read_text().replace("allowed: true", "allowed: false"))
    assert run("lint", str(folder)).returncode == 0
    assert run("lint", "--strict", str(folder)).returncode == 1


@pytest.mark.parametrize("args", [["lint", "/nonexistent"], ["lint", "--bogus"], ["frobnicate"]])
def test_usage_errors_exit_two(args):
    assert run(*args).returncode == 2


def test_lint_folder_without_manifest_is_usage_error(tmp_path):
    result = run("lint", "--format", "json", str(tmp_path))
    assert result.returncode == 2
    assert json.loads(result.stdout)["findings"][0]["code"] == "usage"


def test_validate_request_ok_and_stdin():
    path = EXAMPLES / "slurm-reference" / "add_worker.json"
    assert run("validate-request", str(path)).returncode == 0
    result = run("validate-request", "--format", "json", "-", stdin=path.read_text())
    assert result.returncode == 0
    assert json.loads(result.stdout) == {"valid": True, "findings": [], "count": 0}


def test_validate_request_invalid_exits_two(tmp_path):
    request = example("slurm-reference/drain_worker")
    request["allocations"][2]["project_id"] = "proj-other"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(request))
    result = run("validate-request", "--format", "json", str(path))
    assert result.returncode == 2
    body = json.loads(result.stdout)
    assert body["valid"] is False
    assert [(f["code"], f["path"]) for f in body["findings"]] == [
        ("tenant-boundary", "$.allocations[2].project_id")
    ]


def test_validate_request_missing_file_exits_two():
    assert run("validate-request", "/nonexistent.json").returncode == 2


@pytest.mark.parametrize("fmt", ["text", "json"])
@pytest.mark.parametrize(
    ("pointer", "field"),
    [
        (("credentials",), "ssh_private_key"),
        (("instance", "config", "monitoring", "grafana", "oidc"), "client_secret"),
        (("credentials",), "munge_key"),
    ],
)
def test_inline_secrets_are_never_echoed(tmp_path, fmt, pointer, field):
    # Assembled so that no key-shaped block sits in the repository.
    secret = "-----BEGIN " + "OPENSSH PRIVATE" + " KEY-----\nZmFrZS1zZWNyZXQtbWF0ZXJpYWwtOTQ3MjE=\n"
    request = example("slurm-reference/deploy")
    node = request
    for key in pointer:
        node = node[key]
    node[field] = secret
    path = tmp_path / "r.json"
    path.write_text(json.dumps(request))
    result = run("validate-request", "--format", fmt, str(path))
    assert result.returncode == 2
    assert "inline-secret" in result.stdout
    for fragment in ("ZmFrZS1zZWNyZXQtbWF0ZXJpYWwtOTQ3MjE", "PRIVATE" + " KEY"):
        assert fragment not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "field",
    [
        ("correlation_id",),
        ("instance", "name"),
        ("allocations", 0, "hostname"),
        ("instance", "config", "cluster_name"),
        ("members", 0, "member_id"),
    ],
)
def test_rejected_values_are_not_quoted(tmp_path, field):
    """A secret pasted into the wrong field must not be echoed back by the error."""
    marker = "hunter2 pasted-here"
    request = example("slurm-reference/deploy")
    node = request
    for key in field[:-1]:
        node = node[key]
    node[field[-1]] = marker
    path = tmp_path / "r.json"
    path.write_text(json.dumps(request))
    for fmt in ("text", "json"):
        result = run("validate-request", "--format", fmt, str(path))
        assert result.returncode == 2
        assert "hunter2" not in result.stdout + result.stderr


def _secret_files(tmp_path: Path, mode: int) -> dict:
    request = example("slurm-reference/deploy")
    folder = tmp_path / request["project_id"] / request["instance"]["id"]
    folder.mkdir(parents=True)
    key = folder / "id_ed25519"
    key.write_text("not a real key")
    secrets = folder / "secrets"
    secrets.mkdir()
    (secrets / "grafana-oidc-client-secret").write_text("x")
    for file in (key, secrets / "grafana-oidc-client-secret"):
        file.chmod(mode)
    request["credentials"] = {"ssh_private_key_file": str(key), "secrets_dir": str(secrets)}
    return request


def test_check_files_accepts_private_files(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(_secret_files(tmp_path, 0o600)))
    result = run("validate-request", "--check-files", str(path), credentials=tmp_path)
    assert result.returncode == 0, result.stdout


def test_check_files_refuses_readable_and_missing(tmp_path):
    request = _secret_files(tmp_path, 0o644)
    request["instance"]["config"]["monitoring"]["grafana"]["oidc"]["client_secret_ref"] = "absent"
    request["instance"]["config"]["monitoring"]["alerting"] = {
        "webhook": {"url": "https://alerts.example.com/hook", "bearer_token_secret_ref": "gone"}
    }
    path = tmp_path / "r.json"
    path.write_text(json.dumps(request))
    assert run("validate-request", str(path)).returncode == 0
    result = run(
        "validate-request", "--check-files", "--format", "json", str(path), credentials=tmp_path
    )
    assert result.returncode == 2
    got = {(f["code"], f["path"]) for f in json.loads(result.stdout)["findings"]}
    assert got == {
        ("secret-file", "$.credentials.ssh_private_key_file"),
        ("secret-file", "$.instance.config.monitoring.grafana.oidc.client_secret_ref"),
        ("secret-file", "$.instance.config.monitoring.alerting.webhook.bearer_token_secret_ref"),
    }


@pytest.mark.parametrize("name", ["catalog-entry", "operation-request"])
def test_schema_command_prints_shipped_schema(name):
    result = run("schema", name)
    assert result.returncode == 0
    assert json.loads(result.stdout)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_requests_are_json_only_so_yaml_aliases_never_expand(tmp_path):
    levels = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    bomb = tmp_path / "request.yaml"
    bomb.write_text("\n".join(levels) + "\n")
    result = run("validate-request", "--format", "json", str(bomb))
    assert result.returncode == 2
    assert [(f["code"], f["path"]) for f in json.loads(result.stdout)["findings"]] == [
        ("json-syntax", "$")
    ]


def test_an_oversized_request_is_refused_unread(tmp_path):
    big = tmp_path / "request.json"
    big.write_text("[" + " " * (16 * 1024 * 1024) + "]")
    result = run("validate-request", "--format", "json", str(big))
    assert result.returncode == 2
    assert json.loads(result.stdout)["findings"][0]["code"] == "request-too-large"


def test_text_output_prints_colon_names_as_written(tmp_path):
    """Rich's emoji codes are off: `:100:` in a path is a path, not an emoji."""
    folder = tmp_path / "loop.json:100:"
    shutil.copytree(MANIFESTS / "open-ondemand", folder)
    text = (folder / "manifest.yaml").read_text().replace("port: 443", "port: 0")
    (folder / "manifest.yaml").write_text(text)
    result = run("lint", str(folder))
    assert result.returncode == 1
    assert "loop.json:100:/manifest.yaml" in result.stdout
    assert "\N{HUNDRED POINTS SYMBOL}" not in result.stdout


def _subcommands(parser=None, prefix=()):
    """Every (sub)command's parser, by its words."""
    import argparse

    from driver.cli import build_parser

    parser = parser or build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*prefix, name), child
                yield from _subcommands(child, (*prefix, name))


def test_every_option_has_help_and_every_command_an_example():
    for words, parser in _subcommands():
        has_commands = any(a.__class__.__name__ == "_SubParsersAction" for a in parser._actions)
        assert "example:" in (parser.epilog or ""), words
        for action in parser._actions:
            if action.dest in ("help", "command", "lab_command") or (
                has_commands and not (action.option_strings)
            ):
                continue
            assert action.help, (words, action.dest)


def test_every_format_option_says_text_or_json():
    formats = {
        words: next(a for a in parser._actions if a.dest == "format").choices
        for words, parser in _subcommands()
        if any(a.dest == "format" for a in parser._actions)
    }
    assert set(formats) >= {("lint",), ("validate-request",), ("run",), ("inventory",)}
    assert {tuple(choices) for choices in formats.values()} == {("text", "json")}


def test_a_former_format_word_still_works_with_a_warning():
    result = run(
        "validate-request", "--format", "human", str(EXAMPLES / "slurm-reference/deploy.json")
    )
    assert result.returncode == 0 and result.stdout.startswith("ok:")
    assert "--format human is deprecated; use --format text" in result.stderr
    shown = run("inventory", "--format", "yaml", str(EXAMPLES / "slurm-reference/deploy.json"))
    assert shown.returncode == 0 and "all:" in shown.stdout


def test_a_malformed_lab_option_is_a_usage_error():
    result = run("lab", "op", "status", "--option", "no-equals-sign")
    assert result.returncode == 2
    assert "expected KEY=VALUE" in result.stderr


def test_a_failed_result_without_a_host_names_none():
    from io import StringIO

    from driver.events import ErrorInfo, Result
    from driver.models.request import OperationRequest
    from driver.operation import render_result
    from driver.terminal import console

    request = OperationRequest.model_validate(example("slurm-reference/deploy"))
    out = StringIO()
    failed = Result(status="failed", error=ErrorInfo(code="internal_error", message="boom"))
    render_result(console(out), request, failed)
    assert "error internal_error: boom" in out.getvalue() and "None" not in out.getvalue()


def test_the_lab_commands_do_not_import_the_driver_commands():
    """One direction only: driver/cli.py adds the lab's commands; the lab's commands take the
    command line's building blocks from driver/arguments.py and the operations from
    driver/operation.py (issue 66, 7: the import cycle)."""
    source = (Path(__file__).resolve().parents[2] / "driver/lab/commands.py").read_text()
    assert "driver.cli" not in source
