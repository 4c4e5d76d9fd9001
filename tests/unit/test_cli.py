"""The command line as the platform and manifest authors use it: exit codes and output."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import EXAMPLES, MANIFESTS, ROOT, VENV, example

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


def test_a_manifest_named_twice_is_linted_once(tmp_path):
    """As a pre-commit hook names a manifest and its changed dashboard together: the one by a
    relative path, the other by an absolute one."""
    folder = tmp_path / "slurm-reference"
    shutil.copytree(MANIFESTS / "slurm-reference", folder)
    manifest = folder / "manifest.yaml"
    manifest.write_text(manifest.read_text().replace("port: 9341", "port: 0"))
    dashboard = next(folder.glob("dashboards/*.json"))
    for named in (["slurm-reference/manifest.yaml", str(dashboard)], [str(dashboard)]):
        result = run("lint", "--format", "json", *named, cwd=tmp_path)
        assert result.returncode == 1
        (finding,) = json.loads(result.stdout)["findings"]
        # as it was first named; beside an absolute path, absolute
        assert finding["file"] == (str(manifest) if named[0] == str(dashboard) else named[0])


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


@pytest.mark.parametrize(
    ("path", "why"),
    [("/nonexistent/req.json", "no such file"), ("/", "Is a directory")],
)
@pytest.mark.parametrize("command", ["validate-request", "inventory", "run", "task"])
def test_a_request_file_that_cannot_be_read_is_named_on_stderr(command, path, why):
    """Exit 2 and the file named with why on the driver's own stderr; the answer (a run's
    result, which goes back to the platform) says what is wrong, not the driver host's path."""
    ended = run(command, path, *(("--format", "json") if command != "task" else ()))
    assert ended.returncode == 2
    assert f"slurm-app-driver: {path}: {why}\n" in ended.stderr
    assert path not in ended.stdout and "request file" in ended.stdout


def test_a_task_request_is_read_from_stdin_too():
    ended = run("task", "-", stdin='{"task": "x"}')
    assert ended.returncode == 2
    findings = json.loads(ended.stdout)["findings"]
    assert findings[0]["file"] == "<stdin>" and findings[0]["path"] == "$.task"


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


def test_every_command_takes_format_text_or_json():
    commands = [
        (words, parser)
        for words, parser in _subcommands()
        if not any(a.__class__.__name__ == "_SubParsersAction" for a in parser._actions)
    ]
    assert len(commands) == 12
    for words, parser in commands:
        formats = [a.choices for a in parser._actions if a.dest == "format"]
        assert formats == [("text", "json")], words


@pytest.mark.parametrize(
    ("args", "reads"),
    [
        (("schema", "event"), json.loads),
        (("schema", "event", "--format", "text"), yaml.safe_load),
    ],
)
def test_the_schema_prints_as_json_or_as_yaml_to_read(args, reads):
    ended = run(*args)
    assert ended.returncode == 0
    assert reads(ended.stdout) == json.loads(
        (ROOT / "driver/schemas/event.schema.json").read_text()
    )


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


def _with_stdout(stdout: int, *args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """The console script by its full path, as the platform calls it, writing to `stdout`."""
    return subprocess.run(
        [str(VENV / "bin" / "slurm-app-driver"), *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "SLURM_APP_STATE_DIR": str(tmp_path / "state")},
        check=False,
    )


def _closed_pipe() -> int:
    """A pipe's writing end whose reader went away before the first byte (`| head` that has
    read enough)."""
    reader, writer = os.pipe()
    os.close(reader)
    return writer


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    writer = _closed_pipe()
    try:
        ended = _with_stdout(writer, "schema", "operation-result", tmp_path=tmp_path)
    finally:
        os.close(writer)
    # as a shell reports a Unix tool SIGPIPE ended, not 1 (findings, a failed operation)
    assert (ended.returncode, ended.stderr) == (141, "")


def test_output_the_disk_refuses_is_named_with_its_own_code(tmp_path):
    with Path("/dev/full").open("w") as full:
        ended = _with_stdout(full.fileno(), "schema", "operation-result", tmp_path=tmp_path)
    assert ended.returncode == 74
    assert ended.stderr == "slurm-app-driver: cannot write the output: No space left on device\n"


def test_a_run_whose_reader_went_away_still_ends_with_its_result_and_code(tmp_path):
    """The platform stopped reading the events: the run goes on to its end, its result and
    events in the files it was asked for, its own exit code (a refused request here)."""
    request = tmp_path / "request.json"
    request.write_text('{"operation": {"type": "deploy"}}')
    result, events = tmp_path / "result.json", tmp_path / "events.jsonl"
    writer = _closed_pipe()
    try:
        ended = _with_stdout(
            writer, "run", str(request), "--result-file", str(result), "--events-file",
            str(events), tmp_path=tmp_path,
        )  # fmt: skip
    finally:
        os.close(writer)
    assert (ended.returncode, ended.stderr) == (2, "")
    assert json.loads(result.read_text())["error"]["code"] == "invalid_request"
    assert [json.loads(line)["event"] for line in events.read_text().splitlines()] == [
        "operation.failed",
        "operation.result",
    ]


@pytest.mark.parametrize(
    ("words", "offered"),
    [
        ("val", "validate-request"),
        ("lab d", "down"),
        ("schema ", "catalog-entry operation-request task-request operation-result event"),
    ],
)
def test_bash_completes_commands_and_choices_from_the_parser(words, offered):
    """The script `--print-completion bash` prints, sourced by bash, completes as it would at a
    prompt (COMP_WORDS as bash fills them on Tab)."""
    script = run("--print-completion", "bash")
    assert script.returncode == 0
    typed = ["slurm-app-driver", *words.split(" ")]
    completed = subprocess.run(
        ["bash", "-c", 'source /dev/stdin; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); '
         '_shtab_slurm_app_driver; echo "${COMPREPLY[*]}"', "bash", *typed],
        input=script.stdout, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert completed.stdout.strip() == offered


def test_zsh_gets_a_completion_function_too():
    script = run("--print-completion", "zsh")
    assert script.returncode == 0 and script.stdout.startswith("#compdef slurm-app-driver")
