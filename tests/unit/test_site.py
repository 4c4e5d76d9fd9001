"""Site settings: where Grafana, dcgm-exporter and Open OnDemand come from, and the pins that
make a vendor repository or a package file trusted (issue 18, point 11)."""

import hashlib
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from local_play import run_role_tasks

from driver.catalog import CatalogError
from driver.role_code import role_filters
from driver.site import load_site, role_vars

PIN = "ab" * 32


def _site(tmp_path: Path, monkeypatch, settings: dict):
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(settings))
    monkeypatch.setenv("SLURM_APP_SITE", str(path))
    return load_site()


def test_repository_pins_reach_the_roles(tmp_path, monkeypatch):
    site = _site(
        tmp_path,
        monkeypatch,
        {
            "grafana": {"source": "repository", "bootstrap_sha256": PIN},
            "dcgm_exporter": {"source": "repository", "bootstrap_sha256": "cd" * 32},
            "open_ondemand": {"source": "repository", "bootstrap_sha256": "ef" * 32},
        },
    )
    assert role_vars(site, ("grafana", "dcgm_exporter", "open_ondemand")) == {
        "monitoring_grafana_source": "repository",
        "monitoring_grafana_apt_key_sha256": PIN,
        "monitoring_dcgm_exporter_source": "repository",
        "monitoring_dcgm_exporter_keyring_sha256": "cd" * 32,
        "open_ondemand_source": "repository",
        "open_ondemand_release_package_sha256": "ef" * 32,
    }


def test_without_a_pin_the_role_gets_none_and_refuses_on_its_own(tmp_path, monkeypatch):
    site = _site(tmp_path, monkeypatch, {"grafana": {"source": "repository"}})
    assert role_vars(site, ("grafana",)) == {"monitoring_grafana_source": "repository"}


def test_the_site_file_and_the_roles_say_the_same_and_both_default_to_none(tmp_path, monkeypatch):
    """One vocabulary: what the site file says is what an operator's inventory sets; and no
    vendor package is installed unless someone chose it (a hand run converges as it is)."""
    from driver.site import COMPONENTS, PackageSource

    monkeypatch.setenv("SLURM_APP_SITE", str(tmp_path / "absent.yaml"))
    assert role_vars(load_site(), tuple(COMPONENTS)) == {
        f"{prefix}_source": "none" for prefix, _ in COMPONENTS.values()
    }
    words = set(PackageSource.model_fields["source"].annotation.__args__)
    for prefix, _ in COMPONENTS.values():
        role = prefix.split("_")[0] if prefix.startswith("monitoring") else "open_ondemand"
        specs = yaml.safe_load((ROOT / "roles" / role / "meta/argument_specs.yml").read_text())
        option = specs["argument_specs"]["main"]["options"][f"{prefix}_source"]
        assert set(option["choices"]) == words and option["default"] == "none", prefix


@pytest.mark.parametrize("pin", ["AB" * 32, "ab" * 31, "not-a-checksum"])
def test_a_malformed_pin_is_refused(tmp_path, monkeypatch, pin):
    with pytest.raises(CatalogError, match="bootstrap_sha256"):
        _site(tmp_path, monkeypatch, {"grafana": {"bootstrap_sha256": pin}})


def _artifact_run(tmp_path: Path, sha256: str) -> tuple[int, str, Path]:
    """slurm_common's artifact entry with a package file on the control node, run against the
    control node itself; returns (rc, output, where the file would land on the host)."""
    package = tmp_path / "vendor.tar.gz"
    package.write_bytes(b"an archive of an APT repository")
    landing = tmp_path / "host-cache"
    work = tmp_path / "work"
    work.mkdir()
    extra = {
        "slurm_common_artifact": str(package),
        "slurm_common_artifact_sha256": sha256,
        "__slurm_common_artifact_dir": str(landing),
    }
    try:
        runs = run_role_tasks(work, "slurm_common", "artifact", extra, "10.40.0.20")
    except AssertionError as failed:
        return 1, str(failed), landing
    return 0, runs[0].stdout, landing


def test_an_artifact_with_the_pinned_checksum_lands_on_the_host(tmp_path):
    digest = hashlib.sha256(b"an archive of an APT repository").hexdigest()
    code, output, landing = _artifact_run(tmp_path, digest)
    assert code == 0, output
    assert (landing / "vendor.tar.gz").read_bytes() == b"an archive of an APT repository"


def test_an_artifact_with_another_checksum_is_refused_before_it_is_copied(tmp_path):
    code, output, landing = _artifact_run(tmp_path, "0" * 64)
    assert code == 1
    assert "on the control node, expected " + "0" * 64 in output
    assert "nothing was copied or installed" in output
    assert not landing.exists(), "the package reached the host"


@pytest.mark.parametrize(
    ("tasks_from", "extra", "pin"),
    [
        (
            "_grafana",
            {"monitoring_grafana_source": "repository"},
            "monitoring_grafana_apt_key_sha256",
        ),
        (
            "_dcgm",
            {
                "monitoring_dcgm_exporter_source": "repository",
                # the URL names the host's release, a fact this harness does not gather
                "__monitoring_dcgm_keyring_url": "https://nvidia.invalid/cuda-keyring.deb",
            },
            "monitoring_dcgm_exporter_keyring_sha256",
        ),
    ],
)
def test_a_vendor_repository_without_a_pin_is_refused_before_anything(
    tmp_path, tasks_from, extra, pin
):
    """The role's own task file, run for real: it stops at the missing pin, before it
    downloads a key or adds a repository."""
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(AssertionError) as refused:
        run_role_tasks(work, "monitoring", tasks_from, extra, "10.40.0.11")
    assert f"{pin} (the site settings'" in str(refused.value)
    assert "must be pinned before the repository" in str(refused.value)
    assert "changed=0" in str(refused.value)


def test_the_runs_forks_reach_the_playbooks_environment(tmp_path, monkeypatch):
    """A run over more hosts than Ansible's forks does each task in waves: the site decides
    how many hosts a task works on at once (default 50, where ansible.cfg says 20)."""
    from driver.runner.run import playbook_environment

    assert _site(tmp_path, monkeypatch, {}).runs.forks == 50
    site = _site(tmp_path, monkeypatch, {"runs": {"forks": 120}})
    environment = playbook_environment(ROOT, tmp_path, tmp_path, Path("/bin/true"), site.runs)
    assert environment["ANSIBLE_FORKS"] == "120"
    assert environment["ANSIBLE_STRATEGY"] == "mitogen_linear_unpinned"
    for wrong in (0, 1001, "many"):
        with pytest.raises(CatalogError, match="forks"):
            _site(tmp_path, monkeypatch, {"runs": {"forks": wrong}})


def test_a_site_can_run_the_plays_on_ansibles_own_strategy(tmp_path, monkeypatch):
    """Mitogen is a lever, not a requirement: without it the plays run on ansible.cfg's
    strategy (Ansible's linear) and nothing else of the environment changes."""
    from driver.runner.run import MITOGEN_ENVIRONMENT, playbook_environment

    mitogen = _site(tmp_path, monkeypatch, {}).runs
    linear = _site(tmp_path, monkeypatch, {"runs": {"mitogen": False}}).runs
    with_it = playbook_environment(ROOT, tmp_path, tmp_path, Path("/bin/true"), mitogen)
    without = playbook_environment(ROOT, tmp_path, tmp_path, Path("/bin/true"), linear)
    assert not set(MITOGEN_ENVIRONMENT) & set(without)
    assert with_it == {**without, **MITOGEN_ENVIRONMENT}
    with pytest.raises(CatalogError, match="mitogen"):
        _site(tmp_path, monkeypatch, {"runs": {"mitogen": "sometimes"}})


FORKY = {
    "uri": "http://deb.debian.org/debian",
    "suite": "forky",
    "packages": ["slurmctld", "slurmd", "libllhttp9.4"],
    "signed_by": "/usr/share/keyrings/debian-archive-keyring.gpg",
    "check_valid_until": False,
}


def test_the_slurm_source_reaches_slurm_common(tmp_path, monkeypatch):
    settings = {"slurm": {"source": "repository", "repositories": [FORKY]}}
    site = _site(tmp_path, monkeypatch, settings)
    assert site.slurm.role_vars() == {
        "slurm_common_slurm_source": "repository",
        "slurm_common_slurm_repositories": [{**FORKY, "components": ["main"]}],
    }
    assert _site(tmp_path, monkeypatch, {}).slurm.role_vars() == {
        "slurm_common_slurm_source": "distribution"
    }


@pytest.mark.parametrize(
    ("slurm", "named"),
    [
        ({"source": "repository"}, "needs repositories"),
        ({"source": "artifact", "artifact": "/srv/slurm.tar.gz"}, "needs artifact"),
        ({"source": "repository", "repositories": [{**FORKY, "suite": "forky\nX: y"}]}, "suite"),
        ({"source": "repository", "repositories": [{**FORKY, "uri": "file:/etc"}]}, "uri"),
        ({"source": "repository", "repositories": [{**FORKY, "packages": []}]}, "packages"),
        ({"source": "repository", "repositories": [{**FORKY, "signed_by": "keys"}]}, "signed_by"),
    ],
)
def test_a_slurm_source_that_would_not_work_is_refused_naming_the_field(
    tmp_path, monkeypatch, slurm, named
):
    with pytest.raises(CatalogError, match=named):
        _site(tmp_path, monkeypatch, {"slurm": slurm})


def test_the_pinned_suites_are_apts_own_files():
    """As apt-cache read them on a Debian 13 lab host (docs/operations.md, Slurm 26.05): the
    named packages at 990 from the suite, everything else of it at -1."""
    backports = {**FORKY, "suite": "trixie-backports", "packages": ["libhwloc15"]}
    del backports["check_valid_until"]
    files = role_filters("slurm_packages").slurm_apt_source_files(
        [FORKY, backports], "/etc/apt/sources.list.d/s.sources", "/etc/apt/preferences.d/s"
    )
    assert [entry["path"] for entry in files] == [
        "/etc/apt/sources.list.d/s.sources",
        "/etc/apt/preferences.d/s",
    ]
    sources, preferences = (entry["content"].split("\n", 1)[1] for entry in files)
    assert sources == (
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: forky\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\nCheck-Valid-Until: no\n\n"
        "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie-backports\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    assert preferences == (
        "Package: *\nPin: release n=forky\nPin-Priority: -1\n\n"
        "Package: slurmctld slurmd libllhttp9.4\nPin: release n=forky\nPin-Priority: 990\n\n"
        "Package: *\nPin: release n=trixie-backports\nPin-Priority: -1\n\n"
        "Package: libhwloc15\nPin: release n=trixie-backports\nPin-Priority: 990\n"
    )
