"""The sessions' idle stop (slurm_worker's files/session-idle) reads this machine's own kernel
tables: a job's listening socket, a client from another address, one from loopback."""

import importlib.machinery
import importlib.util
import os
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT

SCRIPT = ROOT / "roles" / "slurm_worker" / "files" / "session-idle"


def _watcher():
    loader = importlib.machinery.SourceFileLoader("session_idle", str(SCRIPT))
    spec = importlib.util.spec_from_loader("session_idle", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _own_address() -> str:
    """This machine's address on its default route (no packet is sent)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        return probe.getsockname()[0]
    finally:
        probe.close()


SERVER = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('0.0.0.0', 0)); s.listen(); print(s.getsockname()[1], flush=True)\n"
    "held = []\n"
    "while True:\n"
    "    held.append(s.accept()[0])\n"
)


def test_a_client_from_another_address_counts_and_loopback_does_not():
    watcher = _watcher()
    address = _own_address()
    assert not address.startswith("127."), address
    job = "424242"
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SLURM_JOB_ID": job},
    )
    try:
        port = int(server.stdout.readline())
        inodes = watcher.job_socket_inodes(job)
        assert inodes, "the job's listening socket is not found"
        assert watcher.clients(watcher.read_tables(), inodes) == 0
        # a process outside the job holds nothing of it
        assert watcher.job_socket_inodes("424243") == set()
        local = socket.create_connection(("127.0.0.1", port))
        time.sleep(0.2)
        # the node's own loopback (a Jupyter kernel's, websockify's to Xvnc) is no client
        assert watcher.clients(watcher.read_tables(), watcher.job_socket_inodes(job)) == 0
        remote = socket.create_connection((address, port))
        time.sleep(0.2)
        assert watcher.clients(watcher.read_tables(), watcher.job_socket_inodes(job)) == 1
        remote.close()
        local.close()
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize(
    ("address", "is_loopback"),
    [
        ("0100007F", True),  # 127.0.0.1
        ("0101007F", True),  # 127.0.1.1
        ("0A00A8C0", False),  # 192.168.0.10
        ("00000000000000000000000001000000", True),  # ::1
        ("0000000000000000FFFF00000100007F", True),  # ::ffff:127.0.0.1
        ("0000000000000000FFFF00000A00A8C0", False),  # ::ffff:192.168.0.10
        ("000080FE00000000FF005450E6B2FF3A", False),  # fe80::...
    ],
)
def test_loopback_in_the_kernels_notation(address, is_loopback):
    assert _watcher().loopback(address) is is_loopback


def test_no_limit_or_no_job_does_nothing(tmp_path):
    deadline = tmp_path / "idle_deadline"
    for minutes, job in (("0", "77"), ("5", "")):
        ran = subprocess.run(
            [sys.executable, str(SCRIPT), minutes, str(deadline)],
            env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": job},
            timeout=10,
            check=False,
        )
        assert ran.returncode == 0
    assert not deadline.exists()
