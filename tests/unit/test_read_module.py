"""slurm_common's slurm_read module: every command and endpoint read side by side, each
outcome returned, none of them an error. It runs for real in every status and deploy report
(e2e, Molecule)."""

import http.server
import json
import sys
import threading

import pytest

from driver.role_code import role_code

slurm_read = role_code("slurm_common", "library", "slurm_read")


class _Answers(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/json":
            body, status = json.dumps({"status": "success", "data": {"up": 1}}).encode(), 200
        elif self.path == "/text":
            body, status = b"not json", 200
        else:
            body, status = json.dumps({"error": "no such page"}).encode(), 404
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_each_command_gives_its_exit_code_and_output():
    read = slurm_read.read_all(
        {
            "ok": [sys.executable, "-c", "print('up')"],
            "fails": [sys.executable, "-c", "import sys; sys.exit(3)"],
            "absent": ["/nonexistent/slurmctld", "-V"],
        },
        {},
        timeout=20,
    )["commands"]
    assert read["ok"] == {"rc": 0, "stdout": "up\n", "stderr": ""}
    assert read["fails"]["rc"] == 3
    assert read["absent"]["rc"] == -1 and "nonexistent" in read["absent"]["stderr"]


def test_arguments_are_never_read_by_a_shell(tmp_path):
    marker = tmp_path / "ran"
    read = slurm_read.read_all({"echo": ["echo", f"$(touch {marker})", ";", "`id`"]}, {}, 20)
    assert read["commands"]["echo"]["stdout"] == f"$(touch {marker}) ; `id`\n"
    assert not marker.exists()


def test_a_slurm_commands_environment_reaches_it_and_never_its_command_line(tmp_path):
    """Issue 65 (4): squeue's format, which holds the separator, is in its environment."""
    shows = [
        sys.executable,
        "-c",
        "import os, sys; print(os.environ['SQUEUE_FORMAT2'], open('/proc/self/cmdline').read())",
    ]
    read = slurm_read.read_all(
        {"jobs": {"argv": shows, "environment": {"SQUEUE_FORMAT2": "JobID:|sep|"}}}, {}, 20
    )
    shown, cmdline = read["commands"]["jobs"]["stdout"].split(" ", 1)
    assert shown == "JobID:|sep|" and "|sep|" not in cmdline


@pytest.mark.parametrize(
    "given",
    [[], ["a", 1], {"argv": ["a"]}, {"argv": ["a"], "environment": {"X": 1}}, "squeue"],
)
def test_a_command_of_neither_form_is_refused(given):
    assert slurm_read.as_command(given) is None


def test_a_command_past_its_timeout_is_reported_not_waited_for():
    read = slurm_read.read_all({"hangs": ["sleep", "30"]}, {}, timeout=1)
    assert read["commands"]["hangs"]["rc"] == -1


def test_reads_run_side_by_side(tmp_path):
    """Each command waits for the other's mark: one after the other, the first would time out."""

    def meet(mine: str, theirs: str) -> list[str]:
        wait = f"touch {tmp_path / mine}; while [ ! -e {tmp_path / theirs} ]; do sleep 0.05; done"
        return ["sh", "-c", wait]

    read = slurm_read.read_all({"a": meet("a", "b"), "b": meet("b", "a")}, {}, timeout=20)
    assert [read["commands"][name]["rc"] for name in "ab"] == [0, 0]


def test_each_endpoint_gives_its_status_and_json(server):
    read = slurm_read.read_all(
        {},
        {
            "json": f"{server}/json",
            "text": f"{server}/text",
            "missing": f"{server}/missing",
            "refused": "http://127.0.0.1:1/",
            "garbage": "not a url",
            "file": "file:///etc/hostname",
        },
        timeout=5,
    )["urls"]
    assert read["json"] == {"status": 200, "json": {"status": "success", "data": {"up": 1}}}
    assert read["text"] == {"status": 200, "json": None}
    assert read["missing"] == {"status": 404, "json": {"error": "no such page"}}
    assert read["refused"] == {"status": -1, "json": None}
    assert read["garbage"] == {"status": -1, "json": None}
    assert read["file"] == {"status": -1, "json": None}
