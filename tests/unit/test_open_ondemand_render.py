"""Open OnDemand cannot be installed here: the open_ondemand role's configuration files are
rendered by the role's own task file (_config.yml) with real ansible-playbook into a folder,
then compared with fixtures and read the way OOD reads them (the interactive apps' ERB
rendered as the dashboard renders it, its env file loaded). The account check (user_map) is
run for real."""

import grp
import json
import os
import re
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from local_play import run_role_tasks

FIXTURES = ROOT / "tests" / "fixtures" / "open_ondemand"
# test values, scanned for in every output
CLIENT_SECRET = "ood-client-secret-5e1d77"
PASSPHRASE = "ood-test-passphrase-0b9c41"
# internal path variable -> its path under the rendering root
PATHS = {
    "__open_ondemand_config_dir": "/etc/ood/config",
    "__open_ondemand_portal_file": "/etc/ood/config/ood_portal.yml",
    "__open_ondemand_clusters_dir": "/etc/ood/config/clusters.d",
    "__open_ondemand_apps_config_dir": "/etc/ood/config/apps",
    "__open_ondemand_private_dir": "/etc/ood/config/slurm-app",
    "__open_ondemand_client_secret_file": "/etc/ood/config/slurm-app/oidc_client_secret",
    "__open_ondemand_passphrase_file": "/etc/ood/config/slurm-app/oidc_crypto_passphrase",
    "__open_ondemand_cluster_users_file": "/etc/ood/config/slurm-app/cluster_users",
    "__open_ondemand_user_map": "/etc/ood/config/slurm-app/user_map",
    "__open_ondemand_tls_dir": "/etc/ood/config/slurm-app/tls",
    "__open_ondemand_public_root": "/var/www/ood/public",
    "__open_ondemand_sys_apps_dir": "/var/www/ood/apps/sys",
    "__open_ondemand_session_limits_lib": "/usr/local/lib/slurm-app/ood/session_limits.rb",
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("ood")
    root = work / "root"
    private = root / "etc/ood/config/slurm-app"
    private.mkdir(parents=True)
    # kept from an earlier deploy: the role never replaces it
    (private / "oidc_crypto_passphrase").write_text(PASSPHRASE + "\n")
    secret = work / "client-secret"
    secret.write_text(CLIENT_SECRET)
    secret.chmod(0o600)
    extra = {
        **{name: f"{root}{path}" for name, path in PATHS.items()},
        "__open_ondemand_web_group": grp.getgrgid(os.getgid()).gr_name,
        "open_ondemand_cluster_name": "research",
        "open_ondemand_login_host": "10.40.0.10",
        "open_ondemand_node_addresses": ["10.40.0.10", "10.40.0.11"],
        "open_ondemand_portal_title": "GPU Cloud HPC Portal",
        "open_ondemand_server_name": "ood.research.example.com",
        "open_ondemand_interactive_apps": ["jupyter", "vscode", "desktop"],
        "open_ondemand_embed_origins": ["https://console.gpu.example.com"],
        "open_ondemand_oidc": {
            "issuer_url": "https://keycloak.example.com/realms/gpuaas",
            "client_id": "ood-portal",
            "client_secret_src": str(secret),
            "remote_user_claim": "preferred_username",
            "scopes": ["openid", "profile", "email"],
            "allowed_groups": ["proj-7f3a", "proj-7f3a-admins"],
            "groups_claim": "groups",
        },
        "slurm_common_users": [{"name": "alice", "uid": 2001}, {"name": "bob", "uid": 2002}],
    }
    runs = run_role_tasks(work, "open_ondemand", "_config", extra, "10.40.0.20")
    return {"root": root, "runs": runs}


def _text(rendered: dict, path: str) -> str:
    """A rendered file with the rendering root taken out of the paths it names."""
    return (rendered["root"] / path.lstrip("/")).read_text().replace(str(rendered["root"]), "")


@pytest.mark.parametrize(
    ("path", "fixture"),
    [
        ("/etc/ood/config/ood_portal.yml", "ood_portal.yml"),
        ("/etc/ood/config/clusters.d/research.yml", "clusters.d/research.yml"),
        ("/etc/ood/config/apps/dashboard/env", "apps/dashboard/env"),
        ("/var/www/ood/apps/sys/jupyter/template/script.sh.erb", "apps/sys/jupyter/script.sh.erb"),
    ],
)
def test_rendered_files_match_the_fixtures(rendered, path, fixture):
    assert _text(rendered, path) == (FIXTURES / fixture).read_text()


# The dashboard loads its env file (dotenv) into ENV, then renders an app's ERB with ERB's
# `-` trim mode and the form's values (strings, as a browser sends them) as methods: once per
# form given (a JSON list of objects), else once without a form. A launch the ERB refuses (it
# raises) is {"refused": its message}, what the dashboard shows.
DASHBOARD_ERB = """
env_file, template, forms = ARGV
File.readlines(env_file).each do |line|
  key, value = line.strip.split("=", 2)
  ENV[key] = value.delete_prefix('"').delete_suffix('"') if value && !key.start_with?("#")
end
class Form
  def initialize(values) = @values = values
  def method_missing(name, *) = @values.fetch(name.to_s) { super }
  def respond_to_missing?(name, include_private = false) = @values.key?(name.to_s) || super
  def scope = binding
end
text = File.read(template)
puts(JSON.parse(forms || "[{}]").map do |form|
  ERB.new(text, trim_mode: "-").result(Form.new(form).scope)
rescue ArgumentError => e
  { "refused" => e.message }
end.to_json)
"""
# A session's limits as the form and the submit read them: `sinfo` and `sacctmgr` answering
# as the real Slurm of tests/fixtures/slurm/<version>/session-*.txt did (capture.sh), to the
# argv session_limits.rb asks with, else failing.
FAKE_SLURM = {
    "sinfo": """#!/bin/sh
[ "$*" = "-h -N -o %P|%l|%c|%m|%G" ] || exit 2
exec cat "$SINFO_ANSWER"
""",
    "sacctmgr": """#!/bin/sh
case "$*" in
  "-n -P show qos format=name,maxwall,maxtrespu,maxtres") exec cat "$QOS_ANSWER" ;;
  "-n -P show assoc where user=$(id -un) format=defaultqos") exec cat "$ASSOCIATIONS_ANSWER" ;;
esac
exit 2
""",
}


def _dashboard_render(
    rendered: dict,
    template: str,
    *forms: dict,
    sinfo: Path | None = None,
    qos: tuple[Path, Path] | None = None,
) -> list:
    """`template` rendered once per form (or once without one), where `sinfo` (a file) is
    what Slurm's sinfo answers and `qos` what sacctmgr answers of the user's associations and
    of the QoS; without them, neither answers."""
    fake = rendered["root"].parent / "fake-slurm"
    fake.mkdir(exist_ok=True)
    for command, script in FAKE_SLURM.items():
        (fake / command).write_text(script)
        (fake / command).chmod(0o755)
    associations, qos_rows = qos or ("", "")
    ran = subprocess.run(
        [
            "ruby",
            "-rerb",
            "-rjson",
            "-e",
            DASHBOARD_ERB,
            str(rendered["root"] / "etc/ood/config/apps/dashboard/env"),
            str(rendered["root"] / template.lstrip("/")),
            *([json.dumps(list(forms))] if forms else []),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
        env={
            "PATH": f"{fake}:/usr/bin:/bin",
            "SINFO_ANSWER": str(sinfo or ""),
            "ASSOCIATIONS_ANSWER": str(associations),
            "QOS_ANSWER": str(qos_rows),
        },
    )
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


# A cluster of two partitions (24.11 as captured): batch, the default, without a time limit;
# vis of one day; a node of 2 CPUs with 2 GPUs.
LIMITS_24_11 = ROOT / "tests/fixtures/slurm/24.11/session-limits.txt"


def _qos(version: str) -> tuple[Path, Path]:
    """A user whose one association runs under QoS gpu-small (2 days, 1 GPU per user; Slurm's
    normal has no limit), as real Slurm answered (capture.sh's --config)."""
    folder = ROOT / "tests/fixtures/slurm" / version
    return folder / "session-associations.txt", folder / "session-qos.txt"


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_the_apps_form_offers_what_the_clusters_nodes_and_partitions_have(rendered, version):
    """The form the dashboard draws, with Slurm's answer as the user gets it: CPUs and memory
    up to the largest node's, GPUs up to its 2 (untyped: no type field), hours without a
    maximum (batch has no time limit) and each partition's limit in the help."""
    limits = ROOT / f"tests/fixtures/slurm/{version}/session-limits.txt"
    (form,) = _dashboard_render(
        rendered, "/var/www/ood/apps/sys/jupyter/form.yml.erb", sinfo=limits
    )
    fixture = (FIXTURES / "apps/sys/jupyter/form.yml").read_text()
    assert yaml.safe_load(form) == yaml.safe_load(fixture)
    assert not (rendered["root"] / "var/www/ood/apps/sys/jupyter/form.yml").exists()


def test_a_new_gpu_type_and_a_larger_node_are_offered_at_the_next_drawing(rendered, tmp_path):
    """The form reads Slurm each time it is drawn: a node that joined with H100s (sinfo's
    typed gres) and more CPUs is in the next form, with no deploy of the portal; with every
    partition limited the hours have the longest limit as their maximum."""
    answer = tmp_path / "sinfo.txt"
    answer.write_text(
        LIMITS_24_11.read_text().replace("infinite", "2-00:00:00")
        + "batch*|2-00:00:00|64|512000|gpu:h100:4\nvis|1-00:00:00|64|512000|gpu:h100:4\n"
    )
    (form,) = _dashboard_render(
        rendered, "/var/www/ood/apps/sys/desktop/form.yml.erb", sinfo=answer
    )
    drawn = yaml.safe_load(form)
    assert drawn["form"][3:7] == ["cpus", "memory_mib", "gpu_type", "gpus"]
    attributes = drawn["attributes"]
    assert (attributes["cpus"]["max"], attributes["memory_mib"]["max"]) == (64, 512000)
    assert attributes["gpu_type"]["options"] == [["Any", ""], ["h100", "h100"]]
    assert attributes["gpus"]["max"] == 4
    assert attributes["bc_num_hours"]["max"] == 48
    assert (
        attributes["bc_num_hours"]["help"] == "Each partition's time limit: batch: 48 h, vis: 24 h"
    )


@pytest.mark.parametrize("version", ["22.05", "24.11"])
def test_the_users_qos_narrows_the_form_and_refuses_past_it(rendered, version):
    """Under QoS gpu-small (1 GPU per user, 2 days), as 22.05 and 24.11 answer: the form
    offers 1 GPU of the node's 2 and 48 hours; a session of 2 GPUs, or of 1 GPU on each of 2
    nodes, or of 49 hours is refused naming the QoS; 1 GPU for 48 hours is asked as is."""
    sinfo = ROOT / f"tests/fixtures/slurm/{version}/session-limits.txt"
    app = "/var/www/ood/apps/sys/jupyter"
    (form,) = _dashboard_render(rendered, f"{app}/form.yml.erb", sinfo=sinfo, qos=_qos(version))
    attributes = yaml.safe_load(form)["attributes"]
    assert (attributes["gpus"]["max"], attributes["bc_num_hours"]["max"]) == (1, 48)
    submits = _dashboard_render(
        rendered,
        f"{app}/submit.yml.erb",
        _form(gpus="2"),
        _form(gpus="1", bc_num_slots="2"),
        _form(bc_num_hours="49"),
        _form(gpus="1", bc_num_hours="48"),
        sinfo=sinfo,
        qos=_qos(version),
    )
    assert submits[:3] == [
        {"refused": "GPUs per node: 2 on 1 node is more than QoS gpu-small lets one user hold (1)"},
        {
            "refused": "GPUs per node: 1 on 2 nodes is more than QoS gpu-small lets one user hold "
            "(1)"
        },
        {"refused": "Hours: 49 is over QoS gpu-small's time limit of 48 hours"},
    ]
    assert yaml.safe_load(submits[3])["script"]["native"][-1] == "--gres=gpu:1"


def test_without_an_answer_from_slurm_the_form_offers_no_limits(rendered):
    """sinfo failing (slurmctld away): the form still draws, without maxima or GPUs; the
    submit leaves the limits to Slurm."""
    (form,) = _dashboard_render(rendered, "/var/www/ood/apps/sys/vscode/form.yml.erb")
    drawn = yaml.safe_load(form)
    assert "gpus" not in drawn["form"] and "max" not in drawn["attributes"]["cpus"]
    assert "max" not in drawn["attributes"]["bc_num_hours"]


def test_ood_portal_carries_the_oidc_settings(rendered):
    portal = yaml.safe_load(_text(rendered, "/etc/ood/config/ood_portal.yml"))
    assert portal["oidc_provider_metadata_url"] == (
        "https://keycloak.example.com/realms/gpuaas/.well-known/openid-configuration"
    )
    assert portal["oidc_remote_user_claim"] == "preferred_username"
    assert portal["oidc_scope"] == "openid profile email"
    assert portal["oidc_uri"] == "/oidc"
    assert portal["oidc_client_secret"] == CLIENT_SECRET
    assert portal["oidc_crypto_passphrase"] == PASSPHRASE
    # the instance's project only: any member of an allowed group, nobody else of the realm
    assert portal["auth"] == [
        "AuthType openid-connect",
        "Require claim groups:proj-7f3a",
        "Require claim groups:proj-7f3a-admins",
    ]


def test_clusters_d_describes_the_slurm_cluster(rendered):
    cluster = yaml.safe_load(_text(rendered, "/etc/ood/config/clusters.d/research.yml"))["v2"]
    # no `cluster`: OOD's Slurm adapter would add -M research, which needs slurmdbd
    assert cluster["job"] == {"adapter": "slurm", "bin": "/usr/bin"}
    assert cluster["login"]["host"] == "10.40.0.10"
    assert "NodeAddr" in cluster["batch_connect"]["basic"]["set_host"]


def test_only_the_secrets_folder_is_closed_to_the_signed_in_user(rendered):
    """The dashboard and OOD's job library run as the mapped user and read clusters.d and the
    apps' settings: readable by anyone, the folders above traversable."""
    config = rendered["root"] / "etc/ood/config"
    assert stat.S_IMODE(config.stat().st_mode) == 0o755
    for relative in ("clusters.d", "clusters.d/research.yml", "apps/dashboard/env"):
        assert stat.S_IMODE((config / relative).stat().st_mode) & 0o005 in (0o004, 0o005)
    assert stat.S_IMODE((config / "slurm-app").stat().st_mode) == 0o750


def test_only_the_asked_apps_are_written(rendered):
    sys_apps = rendered["root"] / "var/www/ood/apps/sys"
    assert sorted(p.name for p in sys_apps.iterdir()) == ["desktop", "jupyter", "vscode"]
    # the desktop's template starts websockify itself and the dashboard draws its noVNC button
    desktop = sorted(
        str(p.relative_to(sys_apps / "desktop")) for p in (sys_apps / "desktop").rglob("*")
    )
    assert desktop == [
        "form.yml.erb",
        "info.html.erb",
        "manifest.yml",
        "submit.yml.erb",
        "template",
        "template/script.sh.erb",
    ]
    assert not (rendered["root"] / "etc/ood/config/apps/bc_desktop").exists()


def test_secrets_are_root_and_web_group_only_and_never_printed(rendered):
    for relative in ("ood_portal.yml", "slurm-app/oidc_client_secret"):
        mode = (rendered["root"] / "etc/ood/config" / relative).stat().st_mode
        assert stat.S_IMODE(mode) == 0o640, relative
    key = rendered["root"] / "etc/ood/config/slurm-app/tls/portal.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    for run in rendered["runs"]:
        for text in (run.stdout, run.stderr):
            assert CLIENT_SECRET not in text
            assert PASSPHRASE not in text


def test_a_second_run_changes_nothing(rendered):
    assert "changed=0" in rendered["runs"][1].stdout, rendered["runs"][1].stdout[-2000:]


@pytest.mark.parametrize(
    ("login", "account"),
    [
        ("alice", "alice"),
        ("bob", "bob"),
        ("mallory", ""),
        ("ali", ""),
        ("alice'; touch /tmp/ood-user-map-injected; '", ""),
        ("-v", ""),
    ],
)
def test_the_account_check_maps_cluster_users_only(rendered, login, account):
    user_map = rendered["root"] / "etc/ood/config/slurm-app/user_map"
    result = subprocess.run(
        [str(user_map), login], capture_output=True, text=True, check=False, timeout=10
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == account
    assert not Path("/tmp/ood-user-map-injected").exists()


# Upstream's own code on the rendered files: what a real installation would make of them.


def _ruby_ood_core(upstream: Path, code: str, *args: str) -> dict:
    """`code` run by Debian's ruby with OOD's job library loaded; its JSON output."""
    ran = subprocess.run(
        [
            "ruby",
            "-I",
            str(upstream / "shims"),
            "-I",
            str(upstream / "ood_core-v0.31.1/lib"),
            "-I",
            str(upstream / "ood_support-v0.0.5/lib"),
            "-rjson",
            "-rood_core",
            "-e",
            code,
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    return json.loads(ran.stdout)


def test_upstreams_generator_proxies_sessions_to_the_clusters_nodes_only(
    rendered, open_ondemand_upstream, tmp_path
):
    generated = tmp_path / "ood-portal.conf"
    ran = subprocess.run(
        [
            "bash",
            str(open_ondemand_upstream / "ondemand-v4.2.3/ood-portal-generator/bin/generate"),
            "-c",
            str(rendered["root"] / "etc/ood/config/ood_portal.yml"),
            "-o",
            str(generated),
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "RUBYLIB": str(open_ondemand_upstream / "shims")},
        check=False,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    site = generated.read_text().replace(str(rendered["root"]), "")
    proxies = {
        match[0]: re.compile(match[1].replace("(?<", "(?P<"))
        for match in re.findall(r'<LocationMatch "\^(/r?node)/(.*)">', site)
    }
    assert set(proxies) == {"/node", "/rnode"}
    for uri, pattern in proxies.items():
        for host in ("10.40.0.10", "10.40.0.11"):
            assert pattern.match(f"{host}/8888/lab"), (uri, host)
        for host in ("127.0.0.1", "169.254.169.254", "10.40.0.100", "10x40.0.10", "ood-portal"):
            assert not pattern.match(f"{host}/9090/"), (uri, host)
    # framed by the portal and the platform's page only; the framed login keeps its cookies
    assert (
        'Header always set Content-Security-Policy "frame-ancestors '
        'https://ood.research.example.com https://console.gpu.example.com;"'
    ) in site
    assert "\n  OIDCCookieSameSite None\n" in site
    # the login is mapped by the bundle's account check, a stranger sent to its page
    assert 'SetEnv OOD_USER_MAP_CMD "/etc/ood/config/slurm-app/user_map"' in site
    assert 'SetEnv OOD_MAP_FAIL_URI "/public/slurm-app/no-cluster-account.html"' in site


def test_ood_core_reads_the_cluster_and_submits_without_minus_m(rendered, open_ondemand_upstream):
    seen = _ruby_ood_core(
        open_ondemand_upstream,
        "clusters = OodCore::Clusters.load_file(ARGV[0]);"
        "cluster = clusters.first; slurm = cluster.job_adapter.instance_variable_get(:@slurm);"
        "puts({ids: clusters.map { |c| c.id.to_s }, adapter: cluster.job_adapter.class.name,"
        " cluster: slurm.cluster, bin: slurm.bin.to_s,"
        " set_host: cluster.batch_connect_config[:basic]['set_host']}.to_json)",
        str(rendered["root"] / "etc/ood/config/clusters.d"),
    )
    assert seen["ids"] == ["research"]
    assert seen["adapter"] == "OodCore::Job::Adapters::Slurm"
    # nil: no `-M research` on sbatch, squeue and scancel
    assert seen["cluster"] is None
    assert seen["bin"] == "/usr/bin"
    assert "NodeAddr" in seen["set_host"]


def _form(**values: str) -> dict:
    """A form as the browser posts it: every field the form has, as strings."""
    return {
        "bc_queue": "",
        "bc_num_hours": "1",
        "bc_num_slots": "1",
        "cpus": "1",
        "memory_mib": "0",
        "gpus": "0",
        **values,
    }


@pytest.mark.parametrize("app", ["jupyter", "desktop", "vscode"])
def test_a_session_asks_slurm_for_what_the_form_says_within_its_partition(rendered, app):
    """The dashboard hands submit.yml.erb's `script.native` to the job adapter as sbatch
    options: one task per node with the CPUs, memory and GPUs asked for. The comment names
    the app, which the nodes' Prolog journals. Past a limit of the partition (as Slurm shows
    it at the submit) the launch is refused with the field and the limit named; so is
    anything but a whole number, and a GPU type Slurm could not name."""
    forms = [
        _form(gpus="2"),
        _form(bc_num_slots="2", cpus="2", memory_mib="512", bc_queue="vis"),
        _form(gpu_type="", gpus="1", memory_mib="24105"),
        _form(bc_queue="vis", bc_num_hours="25"),
        _form(bc_num_hours="1000"),
        _form(cpus="3"),
        _form(memory_mib="24106"),
        _form(gpus="9"),
        _form(gpus="-3"),
        _form(gpus="2; touch /tmp/x"),
        _form(gpus="1", gpu_type="h100"),
        _form(gpus="1", gpu_type="h100:1,shard"),
        _form(cpus="0"),
        _form(bc_num_slots="0"),
    ]
    submits = _dashboard_render(
        rendered, f"/var/www/ood/apps/sys/{app}/submit.yml.erb", *forms, sinfo=LIMITS_24_11
    )
    session = ["--ntasks-per-node=1"]
    comment = f"--comment=slurm-app-session:{app}"
    natives = [
        yaml.safe_load(submit)["script"]["native"] if isinstance(submit, str) else submit
        for submit in submits
    ]
    assert natives == [
        ["--nodes=1", *session, "--cpus-per-task=1", comment, "--gres=gpu:2"],
        ["--nodes=2", *session, "--cpus-per-task=2", comment, "--mem=512M"],
        ["--nodes=1", *session, "--cpus-per-task=1", comment, "--mem=24105M", "--gres=gpu:1"],
        {"refused": "Hours: 25 is over partition vis's time limit of 24 hours"},
        # batch has no time limit: Slurm's own (the QoS's) decides
        ["--nodes=1", *session, "--cpus-per-task=1", comment],
        {"refused": "CPUs per node: 3 is more than any node of partition batch has (2)"},
        {
            "refused": "Memory per node (MiB): 24106 is more than any node of partition batch "
            "has (24105)"
        },
        {"refused": "GPUs per node: 9 is more than any node of partition batch has (2)"},
        {"refused": 'GPUs per node: "-3" is not a whole number'},
        {"refused": 'GPUs per node: "2; touch /tmp/x" is not a whole number'},
        {"refused": "GPU type: no node of partition batch has h100 GPUs"},
        {"refused": 'GPU type: "h100:1,shard" is not a type Slurm names'},
        {"refused": "CPUs per node: at least 1"},
        {"refused": "Number of nodes: at least 1"},
    ]


def test_a_typed_gpu_is_asked_by_its_type(rendered, tmp_path):
    answer = tmp_path / "sinfo.txt"
    answer.write_text("batch*|infinite|64|512000|gpu:h100:4\n")
    (submit,) = _dashboard_render(
        rendered,
        "/var/www/ood/apps/sys/jupyter/submit.yml.erb",
        _form(gpus="4", gpu_type="h100"),
        sinfo=answer,
    )
    assert yaml.safe_load(submit)["script"]["native"][-1] == "--gres=gpu:h100:4"


def test_the_desktop_is_ood_cores_vnc_template_on_the_clusters_vnc_server(
    rendered, open_ondemand_upstream, tmp_path
):
    """The desktop's submit.yml.erb as the dashboard renders it, wrapped by ood_core's own
    batch_connect factory with the cluster's vnc settings: the job script runs the workers'
    vncserver (TurboVNC's first where a site installed it), Debian's websockify serving
    Debian's noVNC, Xfce on the VNC display, and the one-time password through vncpasswd's
    input."""
    (submit,) = _dashboard_render(
        rendered, "/var/www/ood/apps/sys/desktop/submit.yml.erb", _form(), sinfo=LIMITS_24_11
    )
    batch_connect = yaml.safe_load(submit)["batch_connect"]
    assert batch_connect["template"] == "vnc"
    seen = _ruby_ood_core(
        open_ondemand_upstream,
        "cluster = OodCore::Clusters.load_file(ARGV[0]).first;"
        "context = JSON.parse(ARGV[1]).transform_keys(&:to_sym).merge(work_dir: ARGV[2]);"
        "puts({script: cluster.batch_connect_template(context).to_s}.to_json)",
        str(rendered["root"] / "etc/ood/config/clusters.d"),
        json.dumps(batch_connect),
        str(tmp_path),
    )
    script = seen["script"]
    assert 'export PATH="/opt/TurboVNC/bin:/usr/local/libexec/slurm-app/vnc:$PATH"' in script
    assert 'export WEBSOCKIFY_CMD="/usr/bin/websockify --web=/usr/share/novnc"' in script
    assert '-rfbauth "vnc.passwd"' in script and "-geometry 1280x800" in script
    assert 'DISPLAY=:${display} "./script.sh"' in script
    assert '| vncpasswd -f > "vnc.passwd"' in script
    assert "NodeAddr" in script


# The session card's binding: the session's folder (OOD's Session#staged_root, a Pathname).
INFO_ERB = """
env_file, template, folder = ARGV
File.readlines(env_file).each do |line|
  key, value = line.strip.split("=", 2)
  ENV[key] = value.delete_prefix('"').delete_suffix('"') if value && !key.start_with?("#")
end
Session = Struct.new(:staged_root) { def scope = binding }
puts ERB.new(File.read(template), trim_mode: "-").result(Session.new(Pathname.new(folder)).scope)
"""


@pytest.mark.parametrize("app", ["jupyter", "desktop", "vscode"])
def test_the_session_card_shows_when_an_idle_session_ends(rendered, app, tmp_path):
    """The dashboard renders info.html.erb in the session's card: the deadline the job's idle
    stop keeps in the session's folder, or the rule before it wrote one."""
    template = rendered["root"] / f"var/www/ood/apps/sys/{app}/info.html.erb"

    def card() -> str:
        ran = subprocess.run(
            [
                "ruby",
                "-rerb",
                "-rpathname",
                "-e",
                INFO_ERB,
                str(rendered["root"] / "etc/ood/config/apps/dashboard/env"),
                str(template),
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        assert ran.returncode == 0, ran.stderr
        return ran.stdout.strip()

    assert card() == "<p>A session with no client connected for 60 minutes ends.</p>"
    (tmp_path / "idle_deadline").write_text("1796590800\n")
    assert card() == (
        "<p>Ends at 2026-12-06 21:00 UTC unless a client connects before: a session with no "
        "client connected for 60 minutes ends.</p>"
    )


def test_the_idle_stop_starts_with_the_sites_limit_in_every_app(rendered):
    """The session's job starts the workers' idle stop with the env file's limit: from the
    shared after.sh (Jupyter, VS Code) and from the desktop's script, before it leaves the
    session's folder."""
    command = '"/usr/local/libexec/slurm-app/session-idle" 60 "${PWD}/idle_deadline" &'
    for app, template in (
        ("jupyter", "template/after.sh.erb"),
        ("vscode", "template/after.sh.erb"),
        ("desktop", "template/script.sh.erb"),
    ):
        (text,) = _dashboard_render(rendered, f"/var/www/ood/apps/sys/{app}/{template}")
        assert command in text.splitlines(), (app, text)
        if app == "desktop":
            lines = text.splitlines()
            assert lines[0] == "#!/usr/bin/env bash"
            assert lines.index(command) < lines.index('cd "${HOME}"')


def test_the_cgroup_bench_runs_the_session_a_form_makes(rendered):
    """bench/production_profile.py proves a session's CPU and memory in its cgroup with the
    sbatch options submit.yml.erb makes of a form of 1 CPU and 512 MiB: the same ones."""
    from bench.production_profile import JOBS

    (submit,) = _dashboard_render(
        rendered,
        "/var/www/ood/apps/sys/jupyter/submit.yml.erb",
        _form(cpus="1", memory_mib="512"),
        sinfo=LIMITS_24_11,
    )
    native = yaml.safe_load(submit)["script"]["native"]
    assert [option for option in native if not option.startswith("--comment=")] == JOBS["session"][
        0
    ]
