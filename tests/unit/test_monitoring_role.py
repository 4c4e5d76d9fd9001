"""The monitoring role's filters and the files it renders for GPU nodes (dcgm-exporter cannot
run here: its unit and its scrape target are rendered and checked)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

ROLE = ROOT / "roles" / "monitoring"


def _filters():
    spec = importlib.util.spec_from_file_location(
        "monitoring_filters", ROLE / "filter_plugins" / "monitoring.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


filters = _filters()


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


def test_the_dcgm_exporter_unit_renders_with_the_port_and_counters(tmp_path):
    """The role's own template, rendered by real ansible-playbook."""
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars_files": [
                str(ROLE / "vars" / "Debian.yml"),
                str(ROLE / "vars" / "main.yml"),
                str(ROLE / "defaults" / "main.yml"),
            ],
            "tasks": [
                {
                    "ansible.builtin.template": {
                        "src": str(ROLE / "templates" / "dcgm-exporter.service.j2"),
                        "dest": str(tmp_path / "dcgm-exporter.service"),
                        "mode": "0644",
                    }
                }
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
    unit = (tmp_path / "dcgm-exporter.service").read_text()
    assert (
        # only on the address Prometheus scrapes it at, not on every interface
        "ExecStart=/usr/bin/dcgm-exporter --address 10.40.0.11:9400 "
        "--collectors /etc/dcgm-exporter/default-counters.csv\n"
    ) in unit
    assert "NoNewPrivileges=yes" in unit and "ProtectSystem=strict" in unit
