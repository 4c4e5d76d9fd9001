"""The README and the manuals under docs/ (and bench's, the roles' and Molecule's) link only to
what exists: each relative link names a file of the repository, a `#fragment` names a heading
of its target (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens), and a
repository path a page names in code (`driver/request_check/addresses.py`) is there. The
README stays the front door: at most 200 lines."""

import re
from pathlib import Path

import pytest
from conftest import ROOT

PAGES = [
    ROOT / "README.md",
    *(ROOT / folder / "README.md" for folder in ("bench", "roles", "molecule")),
    *sorted((ROOT / "bench" / "reports").glob("*.md")),
    *sorted((ROOT / "docs").glob("*.md")),
]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
REPOSITORY_PATH = re.compile(
    r"`((?:driver|roles|playbooks|tests|bench|molecule|manifests|scripts|docs|examples|inventories)"
    r"/[A-Za-z0-9_./-]+)`"
)
# Where the installed driver keeps the bundle (pyproject's package-dir): not in a checkout.
INSTALLED_ONLY = {"driver/bundle/"}


def _anchors(page: Path) -> set[str]:
    anchors, in_code = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and (heading := re.match(r"^#{1,6} (.+)$", line)):
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_reaches_a_file_and_a_heading(page: Path):
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # an absolute URL: not checked here
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists() and linked.is_relative_to(ROOT), (page.name, target)
        if fragment:
            assert fragment in _anchors(linked), (page.name, target)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_a_page_names_is_there(page: Path):
    for path in REPOSITORY_PATH.findall(page.read_text()):
        assert path in INSTALLED_ONLY or (ROOT / path).exists(), (page.name, path)


def test_every_manual_is_in_the_index_and_the_readme_is_short():
    index = (ROOT / "docs" / "index.md").read_text()
    for page in (ROOT / "docs").glob("*.md"):
        assert page.name == "index.md" or f"]({page.name})" in index, page.name
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_bench_readme_is_an_index_of_its_report_pages():
    """Every dated measurement is on its area's page; bench/README.md lists the pages."""
    index = (ROOT / "bench" / "README.md").read_text()
    for page in (ROOT / "bench" / "reports").glob("*.md"):
        assert f"](reports/{page.name})" in index, page.name
    assert len(index.splitlines()) <= 80


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_line_a_reader_has_to_scroll_through(page: Path):
    """Prose and lists, not table cells of thousands of characters (issue 66, 6)."""
    long = [n for n, line in enumerate(page.read_text().splitlines(), 1) if len(line) > 400]
    assert long == [], f"lines over 400 characters: {long}"
