"""`slurm-app-driver task`: a typed task request is checked like an operation request before
anything connects, and the task's answer and exit code come back as the command gave them."""

import copy
import ipaddress
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT

from driver.documents import load_path
from driver.task import check_task_request

TASK_EXAMPLES = sorted((EXAMPLES / "slurm-reference" / "tasks").glob("*.json"))


def check(data: dict, tmp_path: Path):
    path = tmp_path / "task.json"
    path.write_text(json.dumps(data))
    return check_task_request(load_path(path), files=False)


def codes(result) -> list[tuple[str, str]]:
    return [(f.code, f.path) for f in result.findings]


@pytest.mark.parametrize("path", TASK_EXAMPLES, ids=lambda p: p.stem)
def test_every_task_example_is_valid(path):
    result = check_task_request(load_path(path), files=False)
    assert result.findings == [] and result.spec is not None
    assert result.spec.name == path.stem


def test_the_examples_cover_every_task_of_the_manifest():
    from driver.catalog import load_entry

    loaded = load_entry("slurm-reference")
    assert loaded is not None
    assert {t.name for t in loaded.entry.versions[-1].tasks} == {p.stem for p in TASK_EXAMPLES}


@pytest.fixture
def submit() -> dict:
    return json.loads((EXAMPLES / "slurm-reference" / "tasks" / "submit.json").read_text())


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda r: r["task"].update(name="reboot"), ("unknown-task", "$.task.name")),
        (lambda r: r["task"]["input"].update(gpus=-1), ("input.minimum", "$.task.input.gpus")),
        (
            lambda r: r["task"]["input"].update(name="x\n"),
            ("input.pattern", "$.task.input.name"),
        ),
        (
            lambda r: r["task"]["input"].update(uid=0),
            ("input.additionalProperties", "$.task.input.uid"),
        ),
        (
            lambda r: r["allocation"].update(project_id="proj-other"),
            ("tenant-boundary", "$.allocation.project_id"),
        ),
        (
            lambda r: r["allocation"].update(address="169.254.169.254"),
            ("reserved-address", "$.allocation.address"),
        ),
        (lambda r: r["task"].update(user="Root!"), ("schema.pattern", "$.task.user")),
        # issue 65, 6: a task answers for a cluster user, never root or a daemon
        (lambda r: r["task"].update(user="root"), ("reserved-name", "$.task.user")),
        (lambda r: r["task"].update(user="slurm"), ("reserved-name", "$.task.user")),
        (lambda r: r["task"].update(user="munge"), ("reserved-name", "$.task.user")),
        (lambda r: r.update(extra=1), ("schema.additionalProperties", "$.extra")),
        (lambda r: r["instance"].update(version="9.9"), ("unknown-app", "$.instance")),
    ],
)
def test_a_bad_task_request_is_refused_naming_the_field(submit, tmp_path, change, expected):
    request = copy.deepcopy(submit)
    change(request)
    assert expected in codes(check(request, tmp_path))


def driver(*args: str, credentials: Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": "/usr/bin:/bin",
        "SLURM_APP_CREDENTIALS_ROOT": str(credentials),
        "SLURM_APP_STATE_DIR": str(credentials.parent / "state"),
    }
    binary = Path(sys.executable).parent / "slurm-app-driver"
    return subprocess.run(
        [str(binary), *args], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )


def _keyed(request: dict, tmp_path: Path) -> tuple[Path, Path]:
    """The request with its key file in the instance's credentials folder: (request, root)."""
    root = tmp_path / "credentials"
    folder = root / request["project_id"] / request["instance"]["id"]
    folder.mkdir(parents=True)
    key = folder / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    key.chmod(0o600)
    request["credentials"]["ssh_private_key_file"] = str(key)
    path = tmp_path / "task.json"
    path.write_text(json.dumps(request))
    return path, root


def test_a_key_outside_the_instances_folder_is_refused_before_any_connection(submit, tmp_path):
    path, root = _keyed(submit, tmp_path)
    request = json.loads(path.read_text())
    outside = tmp_path / "elsewhere"
    outside.write_text("key")
    outside.chmod(0o600)
    request["credentials"]["ssh_private_key_file"] = str(outside)
    path.write_text(json.dumps(request))
    done = driver("task", str(path), credentials=root)
    assert done.returncode == 2, done.stdout + done.stderr
    assert [f["code"] for f in json.loads(done.stdout)["findings"]] == ["secret-file"]


def test_a_host_that_does_not_answer_is_a_retryable_answer_with_exit_6(submit, tmp_path):
    submit["allocation"]["address"] = "task-test.invalid"
    path, root = _keyed(submit, tmp_path)
    done = driver("task", str(path), credentials=root)
    assert done.returncode == 6, done.stdout + done.stderr
    answer = json.loads(done.stdout)
    assert answer["status"] == "error" and answer["correlation_id"] == "corr-task-submit"
    assert answer["error"]["code"] == "host_unreachable" and answer["error"]["retryable"]
    assert answer["error"]["message"].startswith("slurm-ctl: ")


@pytest.mark.parametrize(
    "address", ["127.1", "2130706433", "0x7f000001", "0177.0.0.1", "localhost.", "x.localhost"]
)
def test_the_controllers_address_passes_the_operations_address_policy(submit, tmp_path, address):
    """Issue 44 (6): the spellings an operation's allocation is refused with are refused here."""
    request = copy.deepcopy(submit)
    request["allocation"]["address"] = address
    assert ("reserved-address", "$.allocation.address") in codes(check(request, tmp_path))


def test_a_controller_name_resolving_to_loopback_is_refused_before_it_connects(submit, tmp_path):
    """This machine's own name resolves to loopback (Debian's 127.0.1.1 line, or the
    sandbox's 127.0.0.1): refused where the files are checked, as before a run."""
    name = socket.gethostname()
    resolved = {info[4][0] for info in socket.getaddrinfo(name, None)}
    if not any(ipaddress.ip_address(ip).is_loopback for ip in resolved):
        pytest.skip(f"{name} resolves to {sorted(resolved)} here, none loopback")
    request = copy.deepcopy(submit)
    request["allocation"]["address"] = name
    path = tmp_path / "task.json"
    path.write_text(json.dumps(request))
    found = codes(check_task_request(load_path(path), files=True))
    assert ("reserved-address", "$.allocation.address") in found
    assert ("reserved-address", "$.allocation.address") not in codes(check(request, tmp_path))
