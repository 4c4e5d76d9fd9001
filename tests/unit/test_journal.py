"""Every operation traceable on the hosts (issue 49, point 4): each run's start and end in
every host's journal with the operation's identity, the end written by the driver when the
playbook did not get there, and the run's identity kept out of the converge digest."""

import importlib.util
import json
import re
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, example
from test_run import _bundle, _request

from driver.catalog import load_entry
from driver.inventory import build_inventory
from driver.models.request import OperationRequest

MODULE = ROOT / "roles" / "slurm_common" / "library" / "slurm_journal.py"
spec = importlib.util.spec_from_file_location("slurm_journal", MODULE)
journal_module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(journal_module)  # type: ignore[union-attr]


def _operation_playbooks(read_only: bool | None = None) -> set[str]:
    """Every operation's playbook; read_only True or False: only those operations."""
    found = set()
    for manifest in (ROOT / "manifests").glob("*/manifest.yaml"):
        for version in yaml.safe_load(manifest.read_text())["versions"]:
            found |= {
                Path(op["playbook"]).name
                for op in version["operations"]
                if read_only is None or op.get("read_only", False) is read_only
            }
    return found


@pytest.mark.parametrize("name", sorted(_operation_playbooks(read_only=False)))
def test_every_changing_operations_playbook_ends_with_the_journal(name):
    plays = yaml.safe_load((ROOT / "playbooks" / name).read_text())
    assert plays[-1].get("ansible.builtin.import_playbook") == "journal.yml"
    # an operation's playbook imported by this one journals no end of its own
    for play in plays[:-1]:
        imported = play.get("ansible.builtin.import_playbook")
        if imported in _operation_playbooks():
            assert play["vars"]["slurm_app_journal_ends_here"] is False, (name, imported)


@pytest.mark.parametrize("name", sorted(_operation_playbooks(read_only=True)))
def test_a_read_only_operation_journals_nothing(name):
    """Journal entries are for operations that change something: a status polled every
    minute writes nothing on any host. Its playbook imports no journal, and the driver gives
    it no run identity to write (a run that ends early gets no end from the driver either)."""
    text = (ROOT / "playbooks" / name).read_text()
    assert "journal.yml" not in text and "tasks_from: journal" not in text, name
    assert "slurm_app_reached" not in text, name


def test_a_read_only_run_carries_no_identity_to_journal():
    request = OperationRequest.model_validate(example("slurm-reference/status"))
    version = load_entry(request.instance.app_slug).entry.version(request.instance.version)
    assert "slurm_common_journal" not in build_inventory(request, version).group_vars


def test_the_preflight_journals_the_start_and_reports_the_hosts_it_reached():
    """Every host answers (the hosts the operation may leave behind in a play of their own),
    then the lease (its own play, on its one host), then the journal."""
    *_, reach, lease, journal = yaml.safe_load((ROOT / "playbooks" / "preflight.yml").read_text())
    assert "Mark the hosts the rest of the run acts on" in [task["name"] for task in reach["tasks"]]
    assert [task["vars"] for task in lease["tasks"]] == [{"slurm_common_lease_state": "held"}]
    names = [task["name"] for task in journal["tasks"]]
    start = names.index("Write the operation's start in the host's journal")
    reached = names.index("Report the hosts the run reached, whose journal must get the end")
    assert start < reached
    assert journal["tasks"][start]["vars"] == {"slurm_common_journal_event": "start"}


def test_the_runs_identity_is_in_every_changing_inventory_and_out_of_the_converge_digest():
    request = OperationRequest.model_validate(example("slurm-reference/add_worker"))
    version = load_entry(request.instance.app_slug).entry.version(request.instance.version)
    inventory = build_inventory(request, version)
    assert inventory.group_vars["slurm_common_journal"] == {
        "operation_id": request.operation.id,
        "operation": "add_worker",
        "correlation_id": request.correlation_id,
        "instance_id": str(request.instance.id),
        "app_slug": "slurm-reference",
        "trace_id": request.trace_id,
    }
    # the request carries no traceparent: the driver's own trace, 128 random bits
    assert re.fullmatch("[0-9a-f]{32}", request.trace_id)
    patterns = [
        yaml.safe_load((ROOT / "roles/open_ondemand/vars/main.yml").read_text())[
            "__open_ondemand_converge_scope"
        ]["var_pattern"],
        "".join(
            re.search(
                r"'var_pattern': '([^']+)'\s*~\s*'([^']+)'",
                (ROOT / "roles/slurm_common/vars/main.yml").read_text(),
            ).groups()
        ),
    ]
    for pattern in patterns:
        digest = re.compile(pattern)
        for name in ("slurm_common_journal", "slurm_common_journal_outcome"):
            assert not digest.match(name), (pattern, name)
        assert digest.match("slurm_common_users") and digest.match("monitoring_enabled")


def test_an_entry_is_journalds_native_datagram():
    data = journal_module._datagram({"MESSAGE": "two\nlines", "SLURM_APP_EVENT": "start"})
    assert data == (
        b"MESSAGE\n" + struct.pack("<Q", 9) + b"two\nlines\n" + b"SLURM_APP_EVENT=start\n"
    )


def test_the_module_sends_one_entry_and_changes_nothing(tmp_path, monkeypatch):
    """Against a socket of the test's own in journald's place."""
    path = tmp_path / "journal.socket"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    server.bind(str(path))
    args = tmp_path / "args.json"
    identity = {
        "operation_id": "op-1", "operation": "deploy", "correlation_id": "corr-1",
        "instance_id": "inst-1", "app_slug": "slurm-reference",
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
    }  # fmt: skip

    def run(**params: object) -> dict:
        args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
        done = subprocess.run(
            [sys.executable, str(module), str(args)], capture_output=True, text=True
        )
        return json.loads(done.stdout)

    source = MODULE.read_text().replace(
        'SOCKET = "/run/systemd/journal/socket"', f'SOCKET = "{path}"'
    )
    module = tmp_path / "slurm_journal.py"
    module.write_text(source)
    answer = run(operation=identity, event="step", step="slurmctld restart")
    assert answer["changed"] is False and answer["written"] is True, answer
    assert server.recv(65536).decode().splitlines() == [
        "MESSAGE=slurm-app deploy slurmctld restart (operation op-1, correlation corr-1)",
        "PRIORITY=6", "SYSLOG_IDENTIFIER=slurm-app", "SLURM_APP_EVENT=step",
        "SLURM_APP_OPERATION_ID=op-1", "SLURM_APP_OPERATION=deploy",
        "SLURM_APP_CORRELATION_ID=corr-1", "SLURM_APP_INSTANCE_ID=inst-1",
        "SLURM_APP_APP=slurm-reference", "SLURM_APP_TRACE_ID=4bf92f3577b34da6a3ce929d0e0e4736",
        "SLURM_APP_STEP=slurmctld restart",
    ]  # fmt: skip
    # a failed end is a warning, and carries its outcome
    assert run(operation=identity, event="end", outcome="failed")["written"] is True
    received = server.recv(65536).decode().splitlines()
    assert "PRIORITY=4" in received and received[-1] == "SLURM_APP_OUTCOME=failed"
    assert received[0].startswith("MESSAGE=slurm-app deploy ended: failed (operation op-1")
    # no identity (a playbook run by hand): nothing written, nothing failed
    answer = run(operation={}, event="start")
    assert answer["written"] is False and not answer.get("failed"), answer
    server.setblocking(False)
    with pytest.raises(BlockingIOError):
        server.recv(65536)
    server.close()
    # no journald: a warning, never a failure
    path.unlink()
    answer = run(operation=identity, event="start")
    assert answer["written"] is False and not answer.get("failed") and answer["warnings"]
    # an identity that lacks a field, a step without its name: refused, named
    answer = run(operation={**identity, "correlation_id": ""}, event="start")
    assert answer["failed"] is True and "correlation_id" in answer["msg"]
    answer = run(operation=identity, event="step")
    assert answer["failed"] is True and answer["msg"].startswith("step:")


def test_a_run_that_stops_early_gets_its_end_from_the_driver(tmp_path):
    """The playbook reaches every host (here each runs on the control node), then one fails
    before the journal play: the driver runs the journal playbook alone on the hosts it
    reached, with the run's outcome and identity."""
    marks = tmp_path / "journal-ends"
    marks.mkdir()
    bundle = _bundle(
        tmp_path,
        {
            "deploy.yml": "- hosts: all\n"
            "  connection: local\n"
            "  gather_facts: false\n"
            "  tasks:\n"
            "    - name: Reached\n"
            "      ansible.builtin.set_stats:\n"
            "        data: {slurm_app_reached: '{{ {inventory_hostname: true} }}'}\n"
            "    - name: Fail on the controller\n"
            "      ansible.builtin.fail: {msg: stopped}\n"
            "      when: inventory_hostname in groups['slurm_controller']\n"
            "- name: Journal\n"
            "  ansible.builtin.import_playbook: journal.yml\n",
            "journal.yml": "- hosts: '{{ slurm_app_journal_hosts | default(\"all\") }}'\n"
            "  connection: local\n"
            "  gather_facts: false\n"
            "  tasks:\n"
            "    - name: Mark\n"
            "      ansible.builtin.copy:\n"
            '        content: \'{{ slurm_common_journal_outcome | default("completed") }} '
            "{{ slurm_common_journal.operation }}'\n"
            f"        dest: '{marks}/{{{{ inventory_hostname }}}}'\n"
            "        mode: '0600'\n"
            "    - name: Journaled\n"
            "      ansible.builtin.set_stats:\n"
            "        data: {slurm_app_journaled: '{{ {inventory_hostname: true} }}'}\n",
        },
    )
    path = _request(tmp_path)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "slurm-app-driver"), "run", str(path)],
        capture_output=True,
        text=True,
        env={
            "SLURM_APP_STATE_DIR": str(tmp_path / "state"),
            "SLURM_APP_BUNDLE": str(bundle),
            "SLURM_APP_CREDENTIALS_ROOT": str(tmp_path),
            "PATH": "/usr/bin:/bin",
        },
        timeout=300,
    )
    assert done.returncode == 1, done.stdout[-2000:]
    request = json.loads(path.read_text())
    hosts = {a["hostname"] for a in request["allocations"]}
    controller = next(
        a["hostname"]
        for a in request["allocations"]
        if a["id"] == request["instance"]["placement_intent"]["controller_allocation_id"]
    )
    ended = {mark.name: mark.read_text() for mark in marks.iterdir()}
    # the workers got to the journal play; the controller's end is the driver's
    assert ended == {
        host: ("failed deploy" if host == controller else "completed deploy") for host in hosts
    }
