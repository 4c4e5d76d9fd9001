"""GPU detection and gres rendering against the real output of a GPU host (one NVIDIA H200,
copied from the project's shared fixtures into tests/fixtures/gpu/h200; no GPU exists on
these machines)."""

import json

import jinja2
import pytest
from conftest import ROOT
from slurm_readers.gpus import slurm_gpu_query, slurm_gpu_type, slurm_gpus

from driver.role_code import role_filters

H200 = ROOT / "tests" / "fixtures" / "gpu" / "h200"
TEMPLATES = ROOT / "roles" / "slurm_controller" / "templates"


def _query_answer() -> str:
    """What our query (index,name) gets from that host: its own columns, from the fixture."""
    header, *rows = (H200 / "nvidia-smi-query.csv").read_text().splitlines()
    columns = [c.strip() for c in header.split(",")]
    picked = [columns.index("index"), columns.index("name")]
    return "\n".join(", ".join(row.split(",")[i].strip() for i in picked) for row in rows if row)


def _device_files() -> list[str]:
    """The /dev/nvidiaN files the host listed (its `find-glob nvidia[0-9]*` section)."""
    text = (H200 / "host.txt").read_text()
    section = text.split("## find-glob nvidia[0-9]*", 1)[1].split("##", 1)[0]
    return [line.strip() for line in section.splitlines() if line.strip()]


def _render(template: str, node: dict) -> str:
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES))
    return environment.get_template(template).render(node=node).strip()


def _node(gpus: dict) -> dict:
    return {
        "name": "gpu-01",
        "address": "10.0.0.5",
        "cpus": 16,
        "boards": 1,
        "sockets_per_board": 1,
        "cores_per_socket": 16,
        "threads_per_core": 1,
        "real_memory": 128000,
        "gpus": gpus["count"],
        "gpu_files": gpus["files"],
        "gpu_type": gpus["type"],
    }


def test_the_h200_host_is_one_typed_gpu():
    gpus = slurm_gpus(_query_answer(), _device_files())
    assert gpus == {
        "count": 1,
        "files": ["/dev/nvidia0"],
        "models": ["NVIDIA H200"],
        "type": "h200",
    }
    # nvidia-smi -L on the same host names the same model
    assert "NVIDIA H200" in (H200 / "nvidia-smi-L.txt").read_text()


def test_the_h200_node_renders_a_typed_gres_users_can_ask_for_and_a_feature_partitions_use():
    node = _node(slurm_gpus(_query_answer(), _device_files()))
    assert _render("node.conf.j2", node).endswith("Gres=gpu:h200:1 Features=h200 State=UNKNOWN")
    assert _render("gres.conf.j2", node) == "NodeName=gpu-01 Name=gpu Type=h200 File=/dev/nvidia0"


def test_a_partition_of_one_gpu_type_is_the_nodeset_of_the_feature_its_nodes_carry():
    # as ansible.builtin.template renders: trim_blocks on
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True)
    environment.filters |= role_filters("slurm_spec_defaults").FilterModule().filters()
    # as an operator's inventory gives them, without the driver: the role's declared defaults
    partitions = [
        {"name": "gpu", "default": True, "max_time": "2-00:00:00"},
        {"name": "h200", "node_feature": "h200", "allow_accounts": ["vision", "nlp"]},
    ]
    rendered = environment.get_template("partitions.conf.j2").render(
        slurm_controller_partitions=partitions
    )
    assert rendered.splitlines() == [
        "PartitionName=gpu Nodes=ALL Default=YES MaxTime=2-00:00:00 State=UP",
        "NodeSet=nodeset_h200 Feature=h200",
        "PartitionName=h200 Nodes=nodeset_h200 Default=NO MaxTime=UNLIMITED "
        "AllowAccounts=vision,nlp State=UP",
    ]
    node = _node(slurm_gpus(_query_answer(), _device_files()))
    assert " Features=h200 " in _render("node.conf.j2", node)


def test_a_cpu_only_node_gets_no_gres():
    node = _node(slurm_gpus("", []))
    assert "Gres=" not in _render("node.conf.j2", node)


def test_without_nvidia_smi_or_with_mixed_models_the_count_is_untyped():
    files = ["/dev/nvidia1", "/dev/nvidia0", "/dev/nvidia10", "/dev/nvidia2"]
    untyped = slurm_gpus("", files)
    assert untyped["files"] == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia10"]
    assert untyped["type"] is None
    assert " Gres=gpu:4 State=" in _render("node.conf.j2", _node(untyped))
    mixed = slurm_gpus("0, NVIDIA H200\n1, NVIDIA A100-SXM4-80GB", files[:2])
    assert mixed["type"] is None and mixed["count"] == 2
    assert _render("gres.conf.j2", _node(mixed)).startswith("NodeName=gpu-01 Name=gpu File=")


def test_only_whole_device_file_names_reach_gres_conf():
    """The worker's root names the files: a trailing newline or anything after the number
    would put a line of their choosing into the controller's gres.conf."""
    hostile = [
        "/dev/nvidia0\n",
        "/dev/nvidia1\nNodeName=ctl Name=gpu File=/etc/shadow",
        "/dev/nvidia2",
        "/dev/nvidiactl",
        "/dev/nvidia-uvm",
        "/dev/nvidia3 ",
    ]
    gpus = slurm_gpus("", hostile)
    assert gpus["files"] == ["/dev/nvidia2"] and gpus["count"] == 1
    assert "/etc/shadow" not in _render("gres.conf.j2", _node(gpus))


@pytest.mark.parametrize(
    ("model", "gres_type"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("Tesla V100-SXM2-16GB", "v100"),
        ("NVIDIA RTX A6000", "rtxa6000"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("NVIDIA L40S", "l40s"),
        # a worker's root controls nvidia-smi: nothing but [a-z0-9] reaches gres.conf
        ("NVIDIA H200\nNodeName=evil", "h200"),
        ("x{{ lookup('pipe', 'id') }}", "x"),
    ],
)
def test_gres_type_from_the_model_name(model, gres_type):
    assert slurm_gpu_type(model) == gres_type


def test_the_query_argv_is_the_readers():
    assert slurm_gpu_query("/usr/bin/nvidia-smi") == [
        "/usr/bin/nvidia-smi",
        "--query-gpu=index,name",
        "--format=csv,noheader",
    ]
    filters = role_filters("slurm_output").FilterModule().filters()
    assert filters["slurm_gpu_query"] is slurm_gpu_query


def test_a_real_h100_hosts_device_files_give_one_gpu():
    """bench/gpu/device_check.py on a lent H100 host (2026-11-26): /dev holds nvidia0 beside
    nvidiactl, nvidia-uvm, nvidia-uvm-tools and nvidia-caps; only nvidia0 is a GPU."""
    seen = json.loads((H200.parent / "h100" / "gpu_check.json").read_text())
    gpus = slurm_gpus(seen["nvidia_smi_query"], seen["device_files"])
    assert gpus == seen["slurm_gpus"]
    assert gpus["count"] == 1 and gpus["files"] == ["/dev/nvidia0"] and gpus["type"] == "h100"
