"""The monitoring role's filters and the files it renders for GPU nodes (dcgm-exporter cannot
run here: its unit and its scrape target are rendered and checked)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from driver.role_code import role_code

ROLE = ROOT / "roles" / "monitoring"


filters = role_code("monitoring", "filter_plugins", "monitoring")


@pytest.mark.parametrize(
    ("text", "seconds"), [("30s", 30), ("2m", 120), ("7d", 604800), ("1w", 604800)]
)
def test_durations_read_as_prometheus_reads_them(text, seconds):
    assert filters.prometheus_seconds(text) == seconds


@pytest.mark.parametrize(
    ("text", "size"), [("5GB", 5 << 30), ("512MB", 512 << 20), ("1TB", 1 << 40)]
)
def test_sizes_are_powers_of_1024_like_prometheus(text, size):
    assert filters.prometheus_bytes(text) == size


@pytest.mark.parametrize("bad", ["", "30", "5 GB", "0s", "5gb", "1e3s"])
def test_malformed_units_are_refused(bad):
    with pytest.raises(ValueError):
        filters.prometheus_seconds(bad)
    with pytest.raises(ValueError):
        filters.prometheus_bytes(bad)


def test_a_gpu_node_gets_a_dcgm_target_beside_its_node_exporter():
    member = {"node": "gpu-03", "address": "10.0.0.5", "gpus": 8}
    assert filters.scrape_targets(member, 9100, 9400) == [
        {"targets": ["10.0.0.5:9100"], "labels": {"job": "node", "node": "gpu-03"}},
        {"targets": ["10.0.0.5:9400"], "labels": {"job": "dcgm", "node": "gpu-03"}},
    ]
    # CPU-only, or no dcgm-exporter source at all: node_exporter only
    assert len(filters.scrape_targets({**member, "gpus": 0}, 9100, 9400)) == 1
    assert len(filters.scrape_targets(member, 9100, None)) == 1


def test_an_ipv6_address_is_bracketed():
    member = {"node": "w1", "address": "fd00::5", "gpus": 0}
    assert filters.scrape_targets(member, 9100, 9400)[0]["targets"] == ["[fd00::5]:9100"]


def test_target_health_is_read_from_the_api_answer():
    answer = {
        "status": "success",
        "data": {
            "activeTargets": [
                {
                    "labels": {"job": "node", "node": "w2", "instance": "10.0.0.3:9100"},
                    "health": "down",
                    "lastError": "connection refused",
                },
                {
                    "labels": {"job": "node", "node": "w1", "instance": "10.0.0.2:9100"},
                    "health": "up",
                    "lastError": "",
                },
            ]
        },
    }
    assert filters.prometheus_targets(answer) == [
        {
            "job": "node",
            "node": "w1",
            "instance": "10.0.0.2:9100",
            "health": "up",
            "last_error": None,
        },
        {
            "job": "node",
            "node": "w2",
            "instance": "10.0.0.3:9100",
            "health": "down",
            "last_error": "connection refused",
        },
    ]
    assert filters.prometheus_targets({}) == []


def test_firing_alerts_are_read_from_the_api_answer_and_pending_ones_left_out():
    answer = {
        "status": "success",
        "data": {
            "alerts": [
                {
                    "labels": {"alertname": "TargetDown", "job": "node", "node": "w2",
                               "severity": "warning"},
                    "annotations": {"summary": "node exporter on w2 does not answer"},
                    "state": "firing",
                    "activeAt": "2026-11-27T11:02:03.5Z",
                },
                {
                    "labels": {"alertname": "SlurmNodesDown", "severity": "warning"},
                    "annotations": {"summary": "1 Slurm node(s) down or not responding"},
                    "state": "pending",
                    "activeAt": "2026-11-27T11:03:00Z",
                },
                {"labels": {"alertname": "Watchdog"}, "state": "firing"},
            ]
        },
    }  # fmt: skip
    assert filters.prometheus_alerts(answer) == [
        {"name": "TargetDown", "severity": "warning", "node": "w2",
         "summary": "node exporter on w2 does not answer", "since": "2026-11-27T11:02:03.5Z"},
        {"name": "Watchdog", "severity": None, "node": None, "summary": None, "since": None},
    ]  # fmt: skip
    assert filters.prometheus_alerts({}) == []
    assert filters.prometheus_alerts(None) == []


@pytest.mark.parametrize(
    ("architecture", "repository"), [("x86_64", "x86_64"), ("aarch64", "sbsa")]
)
def test_the_dcgm_exporter_drop_in_and_the_repository_of_the_host(
    tmp_path, architecture, repository
):
    """The role's own drop-in template and keyring URL, rendered by real ansible-playbook."""
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [
                str(ROLE / "vars" / "main.yml"),
                str(ROLE / "defaults" / "main.yml"),
                str(ROLE.parent / "slurm_common" / "vars" / "main.yml"),
            ],
            "vars": {
                "ansible_facts": {"architecture": architecture, "distribution_major_version": "12"},
                "slurm_common_facts": {"gpu_job_map_dir": "{{ __slurm_common_gpu_job_map_dir }}"},
            },
            "tasks": [
                {
                    "ansible.builtin.template": {
                        "src": str(ROLE / "templates" / "dcgm-exporter.conf.j2"),
                        "dest": str(tmp_path / "slurm-app.conf"),
                        "mode": "0644",
                    }
                },
                {
                    "ansible.builtin.copy": {
                        "content": "{{ __monitoring_dcgm_keyring_url }}",
                        "dest": str(tmp_path / "keyring-url"),
                        "mode": "0644",
                    }
                },
            ],
        }
    ]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible-playbook"),
            "-i",
            "localhost,",
            "-c",
            "local",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-e",
            "ansible_host=10.40.0.11",
            "play.yml",
        ],
        cwd=tmp_path,
        env={**os.environ, "ANSIBLE_FILTER_PLUGINS": str(ROLE / "filter_plugins")},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stdout[-3000:]
    drop_in = (tmp_path / "slurm-app.conf").read_text()
    assert (
        # the packaged command line cleared, then ours: only on the address Prometheus scrapes
        "ExecStart=\n"
        "ExecStart=/usr/bin/dcgm-exporter --address 10.40.0.11:9400 "
        "--collectors /etc/dcgm-exporter/default-counters.csv "
        # the GPU-to-job files slurm_worker's Prolog writes
        "--hpc-job-mapping-dir /run/slurm-app/gpu-jobs\n"
    ) in drop_in
    assert "TimeoutStopSec=15" in drop_in
    assert "NoNewPrivileges=yes" in drop_in and "ProtectSystem=strict" in drop_in
    assert (tmp_path / "keyring-url").read_text() == (
        f"https://developer.download.nvidia.com/compute/cuda/repos/debian12/{repository}/"
        "cuda-keyring_1.1-1_all.deb"
    )
