"""The driver's layering: each package imports only the layers below it, so a reader can take
the packages in this order and a change runs downhill. The command line (cli and the lab's
commands) is the top; the request's models the bottom. Only driver/role_code.py loads the
roles' own Python by path."""

import ast
from pathlib import Path

import pytest
from conftest import ROOT

# Lowest first; a package imports from its own rank or below. cli and lab share the top.
LAYERS = [
    ("driver.models", "driver.findings", "driver.details", "driver.terminal", "driver.arguments"),
    ("driver.documents", "driver.events", "driver.inventory"),
    ("driver.schema_check", "driver.catalog"),
    ("driver.site", "driver.role_code", "driver.traces"),
    ("driver.apps", "driver.lint"),
    ("driver.request_check",),
    ("driver.runner", "driver.task"),
    ("driver.schemagen",),
    ("driver.cli", "driver.lab", "driver.operation"),
]
RANK = {package: rank for rank, packages in enumerate(LAYERS) for package in packages}
MODULES = sorted(set((ROOT / "driver").rglob("*.py")) - {ROOT / "driver" / "__init__.py"})


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("driver."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("driver.")}
    return found


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_module_imports_only_its_layer_and_below(path: Path):
    package = _package(".".join(path.relative_to(ROOT).with_suffix("").parts))
    if package == "driver.__init__" or (package not in RANK and package.count(".") == 1):
        assert package in RANK or package == "driver.__init__", f"{package}: not in LAYERS"
    for imported in _imports(path):
        assert RANK[_package(imported)] <= RANK[package], (package, imported)


def test_only_role_code_loads_files_by_path():
    loaders = [
        path.relative_to(ROOT) for path in MODULES if "spec_from_file_location" in path.read_text()
    ]
    assert loaders == [Path("driver/role_code.py")]


def test_no_python_file_of_the_driver_or_the_roles_outgrows_one_concern():
    """450 lines at most: past that a file mixes concerns and splits by them (docs/design.md)."""
    files = [*MODULES, *(ROOT / "roles").rglob("*.py")]
    long = {
        str(f.relative_to(ROOT)): n for f in files if (n := len(f.read_text().splitlines())) > 450
    }
    assert not long
