import hashlib
import json
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from filelock import FileLock
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
MANIFESTS = ROOT / "manifests"
# The bundle's Slurm readers (a package the roles install beside the task command and the
# exporter) and the exporter's metrics, importable in the tests as on those hosts:
# `from slurm_readers.jobs import ...`, `from slurm_metrics import ...`.
for _folder in ("roles/slurm_common/files", "roles/monitoring/files"):
    if str(ROOT / _folder) not in sys.path:
        sys.path.insert(0, str(ROOT / _folder))


# The venv the tests run in; the console script is called from it by its full path.
VENV = Path(sys.executable).parent.parent


def console_script(
    *args: str,
    env: dict[str, str],
    venv: Path = VENV,
    cwd: Path | None = None,
    timeout: int = 120,
) -> subprocess.CompletedProcess:
    """`slurm-app-driver` by its full path with exactly `env`, as the platform calls it."""
    return subprocess.run(
        [str(venv / "bin" / "slurm-app-driver"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
        timeout=timeout,
    )


# What the Slurm readers take as one text answer's field separator (text_command's).
SLURM_SEPARATOR = re.compile(r"\|[0-9a-f]{24}\|")


def slurm_text(rows: str, like: str = "") -> str:
    """Slurm text answer rows written with `|` between fields, as a text query of the bundle
    gets them: with the separator of `like` (a captured answer), else a new one."""
    found = SLURM_SEPARATOR.search(like)
    separator = found.group() if found else f"|{secrets.token_hex(12)}|"
    return rows.replace("|", separator)


def run_events(stdout: str) -> list[dict]:
    """`run`'s JSON-lines output, every line checked against the shipped event schema (the
    last one's result is checked as operation-result's): whatever the suite runs, the
    driver's output keeps the published contract."""
    events = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    for event in events:
        _check_against("event.schema.json", event)
        if "result" in event:
            _check_against("operation-result.schema.json", event["result"])
    return events


def _check_against(schema_file: str, document: dict) -> None:
    schema = json.loads((ROOT / "driver" / "schemas" / schema_file).read_text())
    error = next(iter(Draft202012Validator(schema).iter_errors(document)), None)
    # an anyOf's failure says the whole value fits no alternative: name the deepest reason
    while error is not None and error.context:
        error = max(error.context, key=lambda e: len(e.absolute_path))
    assert error is None, f"{schema_file}: {list(error.absolute_path)}: {error.message[:300]}"


def example(name: str) -> dict:
    return json.loads((EXAMPLES / f"{name}.json").read_text())


@pytest.fixture
def root() -> Path:
    return ROOT


class OtlpReceiver:
    """tests/otlp_receiver.py's process: the spans it received so far."""

    def __init__(self, folder: Path) -> None:
        self.spans_file = folder / "spans.jsonl"
        port_file = folder / "port"
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "tests" / "otlp_receiver.py"),
                str(self.spans_file),
                str(port_file),
            ]
        )
        deadline = time.monotonic() + 30
        while not port_file.is_file() or not port_file.read_text():
            assert self.process.poll() is None, "the OTLP receiver did not start"
            assert time.monotonic() < deadline, "the OTLP receiver did not say its port"
            time.sleep(0.1)
        self.endpoint = f"http://127.0.0.1:{port_file.read_text()}/v1/traces"

    def spans(self, trace_id: str | None = None) -> list[dict]:
        lines = self.spans_file.read_text().splitlines()
        found = [json.loads(line) for line in lines if line.strip()]
        return [span for span in found if trace_id is None or span["trace_id"] == trace_id]

    def site_file(self, folder: Path) -> Path:
        """A site.yaml that sends the driver's spans here."""
        path = folder / "site.yaml"
        path.write_text(json.dumps({"traces": {"otlp_endpoint": self.endpoint}}))
        return path


@pytest.fixture
def otlp_receiver(tmp_path_factory):
    receiver = OtlpReceiver(tmp_path_factory.mktemp("otlp"))
    yield receiver
    receiver.process.terminate()
    receiver.process.wait(timeout=10)


@pytest.fixture(scope="session")
def docker_engine():
    """The engine the lab needs; started when installed (scripts/setup.sh installs it)."""
    from driver.lab.engine import docker_client
    from driver.lab.errors import LabError

    try:
        return docker_client()
    except LabError as exc:
        pytest.fail(f"containers tests need the docker engine: {exc}")


# pytest's cache (.pytest_cache): seconds per test file in the last run that ran it
FILE_SECONDS_KEY = "slurm-app/seconds-per-file"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Molecule scenarios first, then the e2e labs, then the rest; in each group the files
    that took longest in the last run first. The test workers each start on a long run and
    share the short ones at the end, so they finish together (a fresh clone has no times and
    keeps the collection order in each group)."""
    cache = getattr(config, "cache", None)
    seconds: dict[str, float] = cache.get(FILE_SECONDS_KEY, {}) if cache is not None else {}

    def rank(item: pytest.Item) -> tuple[int, float]:
        if "tests/molecule/" in item.nodeid:
            group = 0
        else:
            group = 1 if item.get_closest_marker("containers") else 2
        return group, -seconds.get(item.nodeid.split("::", 1)[0], 0.0)

    # stable: a file's tests stay together and in their order
    items.sort(key=rank)


class FailuresAsTheyHappen:
    """A failure's cause printed when it happens, not only in the summary at the end: a run
    that CI stops at its time limit, or whose output is cut, still says what failed and why."""

    lines = 25

    def __init__(self, reporter) -> None:
        self.reporter = reporter

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not report.failed:
            return
        self.reporter.write_line("")
        self.reporter.write_sep(
            "!", f"FAILED {report.nodeid} ({report.when}, {report.duration:.0f} s)"
        )
        for line in report.longreprtext.splitlines()[-self.lines :]:
            self.reporter.write_line(line)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    # an xdist worker has no terminal of its own: the controller prints the workers' reports
    if reporter is not None and not hasattr(config, "workerinput"):
        config.pluginmanager.register(FailuresAsTheyHappen(reporter), "failures-as-they-happen")


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """Seconds per test file (setup, call and teardown together): with --dist loadfile a file
    runs on one worker, so these are what the workers' shares are made of. Kept for the next
    run's order."""
    per_file: dict[str, float] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            if isinstance(report, pytest.TestReport):
                path = report.nodeid.split("::", 1)[0]
                per_file[path] = per_file.get(path, 0.0) + report.duration
    if not per_file:
        return
    terminalreporter.write_sep("=", "seconds per test file")
    for path, seconds in sorted(per_file.items(), key=lambda item: -item[1]):
        terminalreporter.write_line(f"{seconds:9.1f}s  {path}")
    terminalreporter.write_line(f"{sum(per_file.values()):9.1f}s  in all (both workers)")
    cache = getattr(config, "cache", None)
    if cache is not None:
        cache.set(FILE_SECONDS_KEY, {**cache.get(FILE_SECONDS_KEY, {}), **per_file})


@pytest.fixture(scope="session")
def runtime_venv() -> Path:
    """`pip install .` into a clean venv, runtime dependencies only, as the platform installs
    the driver. Cached under .venv/: the venv by the hash of pyproject.toml (what it depends
    on), the project in it by the hash of what it is built from, reinstalled alone (7 s
    against 42 s for the whole venv) when only that changed. The test workers take turns."""
    cache = ROOT / ".venv" / "runtime-install"
    venv = cache / _sources_key(("pyproject.toml",))
    with FileLock(ROOT / ".venv" / "runtime-install.lock"):
        built_from = _sources_key(RUNTIME_SOURCES)
        if not (venv / "ok").is_file():
            if cache.exists():
                shutil.rmtree(cache)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            _pip_install_project(venv)
        elif (venv / "ok").read_text() != built_from:
            _pip_install_project(venv, "--no-deps", "--force-reinstall")
        (venv / "ok").write_text(built_from)
    return venv


# What the runtime-only install is built from: a change to any of it reinstalls the project.
RUNTIME_SOURCES = (
    "pyproject.toml",
    "LICENSE",
    "ansible.cfg",
    "driver",
    "manifests",
    "playbooks",
    "roles",
)


def _sources_key(tops: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for top in tops:
        path = ROOT / top
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            if "__pycache__" in file.parts:
                continue
            digest.update(str(file.relative_to(ROOT)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def _pip_install_project(venv: Path, *options: str) -> None:
    log = venv.parent / "pip.log"
    # Built from a copy of the sources alone: an in-tree build/ left by an earlier build would
    # put files deleted since into the wheel.
    with tempfile.TemporaryDirectory() as folder, log.open("a") as sink:
        source = Path(folder)
        for top in (*RUNTIME_SOURCES, "README.md"):
            if (ROOT / top).is_dir():
                shutil.copytree(
                    ROOT / top, source / top, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy2(ROOT / top, source / top)
        installed = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", *options, "."],
            cwd=source,
            stdout=sink,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if installed.returncode != 0:
        pytest.fail(f"pip install . failed; see {log}")


# Open OnDemand's own code (portal generator, mod_ood_proxy, ood_core), pinned and unmodified,
# kept beside the project (never copied into it): the oracle for the portal's files.
OOD_UPSTREAM_CANDIDATES = (
    ROOT.parent / "shared" / "third_party" / "open-ondemand",
    Path("/work/shared/third_party/open-ondemand"),
)


@pytest.fixture(scope="session")
def open_ondemand_upstream() -> Path:
    """The folder of OOD's own code, with Debian's ruby to run it (scripts/setup.sh)."""
    found = next((path for path in OOD_UPSTREAM_CANDIDATES if path.is_dir()), None)
    if found is None:
        pytest.skip("Open OnDemand's own code is not beside the project (../shared/third_party)")
    if shutil.which("ruby") is None:
        pytest.fail("ruby is missing: scripts/setup.sh installs Debian's ruby for OOD's code")
    return found
