"""Issue 71 (6): each default is written once. The manifest's config schema gives the
platform's (the driver fills them in, in each item of an array too); a role declares its own in
meta/argument_specs.yml for operators who run it without the driver, and its templates read
the value whole (slurm_spec_defaults) instead of writing a fallback again. These tests hold
the two declarations equal."""

import ast
import json
from pathlib import Path

import jinja2
import pytest
import yaml
from conftest import MANIFESTS, ROOT

from driver.role_code import role_filters

spec_defaults = role_filters("slurm_spec_defaults")


def item_field_defaults(role: str, variable: str) -> dict:
    """{field: default} of the items (or the fields) of a role's variable."""
    options = spec_defaults.option_spec(role, variable).get("options") or {}
    return {name: option["default"] for name, option in options.items() if "default" in option}


# Each array of objects in a manifest's config, and the role variable that carries it (the
# adapters' mapping; test_catalog_bundle holds the variables' own defaults to the manifest's).
ITEM_ARRAYS = {
    ("slurm-reference", "partitions"): ("slurm_controller", "slurm_controller_partitions"),
    ("slurm-reference", "accounting.accounts"): ("slurm_controller", "slurm_controller_accounts"),
    ("slurm-reference", "accounting.qos"): ("slurm_controller", "slurm_controller_qos"),
    ("slurm-reference", "users"): ("slurm_common", "slurm_common_users"),
}
# What a field the manifest leaves without a default may default to in a role: nothing.
EMPTY = ("", [], {}, None)


def _item_arrays(schema: dict, path: tuple[str, ...] = ()):
    """(dotted path, item schema) of every array of objects in a config schema."""
    for name, sub in (schema.get("properties") or {}).items():
        items = sub.get("items") if sub.get("type") == "array" else None
        if isinstance(items, dict) and items.get("type") == "object":
            yield ".".join((*path, name)), items
        yield from _item_arrays(sub, (*path, name))


def _config_item_arrays():
    for manifest in sorted(MANIFESTS.glob("*/manifest.yaml")):
        data = yaml.safe_load(manifest.read_text())
        for version in data["versions"]:
            for path, items in _item_arrays(version["config_schema"]):
                yield pytest.param(
                    manifest.parent.name, path, items, id=f"{version['version']}:{path}"
                )


@pytest.mark.parametrize(("app", "path", "items"), list(_config_item_arrays()))
def test_an_items_defaults_are_the_manifests_in_the_role(app, path, items):
    assert (app, path) in ITEM_ARRAYS, f"{app} {path}: which role variable carries it?"
    role, variable = ITEM_ARRAYS[(app, path)]
    declared = item_field_defaults(role, variable)
    for field, spec in items["properties"].items():
        if "default" in spec:
            assert declared.get(field, "missing") == spec["default"], (variable, field)
        else:
            assert declared.get(field) in EMPTY, (variable, field)


def _documented_suboptions(module: Path, option: str) -> dict:
    tree = ast.parse(module.read_text())
    (documentation,) = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "DOCUMENTATION"
    ]
    return yaml.safe_load(documentation)["options"][option]["suboptions"]


@pytest.mark.parametrize("option", ["accounts", "qos"])
def test_the_accounting_module_declares_the_roles_item_defaults(option):
    """slurm_sacctmgr receives the role's lists as they are: its own suboption defaults are
    the role's (it has fields of its own, which the role does not give)."""
    module = ROOT / "roles/slurm_controller/library/slurm_sacctmgr.py"
    documented = _documented_suboptions(module, option)
    declared = item_field_defaults("slurm_controller", f"slurm_controller_{option}")
    assert {field: documented[field].get("default") for field in declared} == declared


def test_an_operators_partition_without_max_time_gets_the_declared_default():
    filled = spec_defaults.slurm_spec_defaults(
        [{"name": "gpu"}, {"name": "long", "max_time": "7-00:00:00", "default": True}],
        "slurm_controller",
        "slurm_controller_partitions",
    )
    assert filled == [
        {"name": "gpu", "default": False, "max_time": "UNLIMITED", "node_feature": "",
         "allow_accounts": []},
        {"name": "long", "default": True, "max_time": "7-00:00:00", "node_feature": "",
         "allow_accounts": []},
    ]  # fmt: skip


# The mappings in a manifest's config whose fields have defaults, and the role variable that
# carries each.
MAPPINGS = {
    ("slurm-reference", "monitoring.grafana.oidc"): ("monitoring", "monitoring_grafana_oidc"),
    ("slurm-reference", "monitoring.alerting.email"): (
        "monitoring",
        "monitoring_alertmanager_email",
    ),
}


@pytest.mark.parametrize(("app", "path"), list(MAPPINGS))
def test_a_mappings_field_defaults_are_the_manifests_in_the_role(app, path):
    schema = yaml.safe_load((MANIFESTS / app / "manifest.yaml").read_text())
    for version in schema["versions"]:
        node = version["config_schema"]
        for name in path.split("."):
            node = node["properties"][name]
        declared = item_field_defaults(*MAPPINGS[(app, path)])
        given = {k: v["default"] for k, v in node["properties"].items() if "default" in v}
        assert given and given == {k: declared.get(k, "missing") for k in given}, path


def test_an_empty_mapping_stays_none_and_a_given_one_gets_its_defaults():
    """An empty OIDC client is no OIDC: filling it would turn Grafana's login on."""
    oidc = spec_defaults.slurm_spec_defaults({}, "monitoring", "monitoring_grafana_oidc")
    assert oidc == {}
    email = {"to": ["ops@example.org"], "from": "slurm@example.org", "smarthost": "smtp:587"}
    filled = spec_defaults.slurm_spec_defaults(email, "monitoring", "monitoring_alertmanager_email")
    assert filled == {**email, "require_tls": True}
    # as ansible.builtin.template renders it: trim_blocks on
    templates = ROOT / "roles/monitoring/templates"
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(templates), trim_blocks=True)
    environment.filters |= {"to_json": json.dumps, "bool": bool}
    rendered = environment.get_template("alertmanager.yml.j2").render(
        ansible_managed="managed",
        monitoring_alertmanager_webhook={},
        __monitoring_alertmanager_email=filled,
        monitoring_alertmanager_group_wait="30s",
        monitoring_alertmanager_group_interval="5m",
        monitoring_alertmanager_repeat_interval="4h",
    )
    (receiver,) = yaml.safe_load(rendered)["receivers"]
    assert receiver["email_configs"][0]["require_tls"] is True
