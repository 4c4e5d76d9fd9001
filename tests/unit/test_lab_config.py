"""`lab up --config FILE`: an operator's instance.config keys laid over the lab's own, in a
deploy request the driver's own validation accepts; a file that is not a mapping is refused
before any host starts."""

import json

import pytest
import yaml
from conftest import ROOT, console_script

from driver.documents import load_json
from driver.lab import spec as lab_spec
from driver.lab.hosts import LabHost
from driver.lab.requests import deploy_request
from driver.request_check import check_request

SPEC = lab_spec.LabSpec(name="cfg", workers=2, distro="trixie", placement="separate")
HOSTS = [
    LabHost(name, f"10.9.0.{index}", f"c{index}", [f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{index}"])
    for index, name in enumerate(("cfg-ctl", "cfg-w01", "cfg-w02"), start=2)
]
CONFIG = {
    "partitions": [{"name": "gpu", "default": True, "max_time": "2-00:00:00"}],
    "accounting": {"enabled": True, "default_account": "physics"},
}


def test_a_config_file_lays_its_keys_over_the_labs_and_the_driver_accepts_it(tmp_path):
    request = deploy_request(SPEC, HOSTS, tmp_path / "id_ed25519", CONFIG)
    config = request["instance"]["config"]
    assert config["accounting"] == CONFIG["accounting"]
    assert config["partitions"] == CONFIG["partitions"]
    # the lab's own keys it did not name stay
    assert config["cluster_name"] == "cfg" and config["users"] == [lab_spec.LAB_USER]
    checked = check_request(load_json(json.dumps(request), "deploy.json"))
    assert checked.valid, [f.message for f in checked.findings]


@pytest.mark.parametrize(
    ("text", "said"),
    [("- accounting\n", "expected a mapping"), ("a: [\n", "not YAML")],
)
def test_a_config_file_that_is_not_a_mapping_is_refused_before_any_host(tmp_path, text, said):
    config = tmp_path / "config.yaml"
    config.write_text(text)
    ended = console_script(
        *("lab", "up", "--name", "nohost", "--config", str(config), "--format", "json"),
        env={"PATH": "/usr/bin:/bin", "SLURM_APP_STATE_DIR": str(tmp_path / "state")},
    )
    assert ended.returncode == 2
    (finding,) = json.loads(ended.stdout)["findings"]
    assert finding["message"].startswith(f"--config {config}: {said}")


def test_the_config_file_docs_lab_md_shows_is_one_the_driver_accepts(tmp_path):
    doc = (ROOT / "docs" / "lab.md").read_text()
    example = doc.split("cat > lab-config.yaml <<'YAML'\n", 1)[1].split("\nYAML\n", 1)[0]
    config = yaml.safe_load(example)
    mounted = lab_spec.LabSpec(name="cfg", workers=2, storage="platform_mount")
    request = deploy_request(mounted, HOSTS, tmp_path / "id_ed25519", config)
    checked = check_request(load_json(json.dumps(request), "deploy.json"))
    assert checked.valid, [f.message for f in checked.findings]
