"""Every module and filter the roles ship is documented the way operators read Ansible's own:
`ansible-doc` shows it, with examples, and its documented options are the code's."""

import ast
import importlib.util
import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

ANSIBLE_DOC = Path(sys.executable).parent / "ansible-doc"
MODULES = sorted(ROOT.glob("roles/*/library/*.py"))
FILTER_PLUGINS = sorted(
    [*ROOT.glob("roles/*/filter_plugins/*.py"), *ROOT.glob("playbooks/filter_plugins/*.py")]
)


def _filters() -> dict[str, tuple[Path, object]]:
    """Every filter name to its plugin's folder and its function."""
    found: dict[str, tuple[Path, object]] = {}
    for plugin in FILTER_PLUGINS:
        spec = importlib.util.spec_from_file_location(f"filters_{plugin.stem}", plugin)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, function in module.FilterModule().filters().items():
            found[name] = (plugin.parent, function)
    return found


def _ansible_doc(*args: str, plugin_path: str = "") -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "ANSIBLE_FILTER_PLUGINS": plugin_path}
    return subprocess.run(
        [str(ANSIBLE_DOC), *args], capture_output=True, text=True, env=env, check=False
    )


def _argument_spec_keys(path: Path) -> set[str]:
    """The option names of the module's AnsibleModule(argument_spec={...}), or, for a module
    that is documentation alone, of its action plugin's validate_argument_spec."""
    action = path.parent.parent / "action_plugins" / path.name
    for code in [path, action]:
        for node in ast.walk(ast.parse(code.read_text())) if code.exists() else []:
            if isinstance(node, ast.keyword) and node.arg == "argument_spec":
                assert isinstance(node.value, ast.Dict)
                return {key.value for key in node.value.keys if isinstance(key, ast.Constant)}
    raise AssertionError(f"{path}: no argument_spec")


def test_ansible_doc_shows_every_module_with_examples():
    folders = ":".join(sorted({str(path.parent) for path in MODULES}))
    names = [path.stem for path in MODULES]
    shown = _ansible_doc("-M", folders, *names)
    assert shown.returncode == 0 and "ERROR" not in shown.stderr, shown.stderr
    assert shown.stdout.count("EXAMPLES") == len(names)
    docs = json.loads(_ansible_doc("--json", "-M", folders, *names).stdout)
    for path in MODULES:
        doc = docs[path.stem]
        assert all(isinstance(line, str) for line in doc["doc"]["description"]), path
        assert set(doc["doc"]["options"]) == _argument_spec_keys(path), path
        assert yaml.safe_load(doc["examples"]), path


def test_ansible_doc_shows_every_filter_with_examples():
    filters = _filters()
    folders = ":".join(sorted({str(folder) for folder, _ in filters.values()}))
    shown = _ansible_doc("-t", "filter", *filters, plugin_path=folders)
    assert shown.returncode == 0 and "ERROR" not in shown.stderr, shown.stderr
    assert shown.stdout.count("EXAMPLES") == len(filters)
    docs = json.loads(_ansible_doc("--json", "-t", "filter", *filters, plugin_path=folders).stdout)
    assert set(docs) == set(filters)


@pytest.mark.parametrize("name", sorted(_filters()))
def test_a_filters_documented_options_are_its_parameters(name):
    folder, function = _filters()[name]
    doc = yaml.safe_load((folder / f"{name}.yml").read_text())
    parameters = list(inspect.signature(function).parameters)  # type: ignore[arg-type]
    assert list(doc["DOCUMENTATION"]["options"]) == ["_input", *parameters[1:]]
    assert all(isinstance(line, str) for line in doc["DOCUMENTATION"]["description"])
    assert f"| {name}" in doc["EXAMPLES"] and yaml.safe_load(doc["EXAMPLES"])
