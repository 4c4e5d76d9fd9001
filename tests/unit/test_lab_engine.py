"""The lab's docker engine: found and started whatever PATH the caller has."""

from driver.lab import engine


def test_the_engine_is_looked_for_where_debian_installs_it(monkeypatch):
    """A plain user's or a cron job's PATH lacks /usr/sbin, where Debian's docker.io puts
    dockerd and the iptables it calls: the lab adds the system folders after the caller's."""
    monkeypatch.setenv("PATH", "/opt/tools:/usr/bin:/bin")
    assert engine._engine_path().split(":") == [
        "/opt/tools",
        "/usr/bin",
        "/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/sbin",
    ]
