#!/usr/bin/env bash
# Prepares a fresh Debian machine (run as root, or with sudo available): the OS packages the
# project needs, then .venv with the bundle and its dev tools. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

PYTHON=${PYTHON:-python3}
need_apt=()
command -v "$PYTHON" >/dev/null 2>&1 || need_apt+=(python3)
"$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# The container lab, Molecule and the end-to-end tests: docker engine, debootstrap for the
# base images, ssh for Ansible.
command -v dockerd >/dev/null 2>&1 || need_apt+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_apt+=(debootstrap)
command -v ssh >/dev/null 2>&1 || need_apt+=(openssh-client)
# The Slurm upgrade's e2e makes a site's flat APT repository of the packages it downloaded.
command -v dpkg-scanpackages >/dev/null 2>&1 || need_apt+=(dpkg-dev)
# Open OnDemand's own code (its portal generator and job library, beside the project in
# ../shared/third_party) runs on the portal's rendered files with Debian's ruby.
for package in ruby ruby-ffi ruby-rexml ruby-bcrypt; do
  dpkg -s "$package" >/dev/null 2>&1 || need_apt+=("$package")
done
# Headless Chromium and its driver: the portal's session pages drawn and kept as screenshots.
for package in chromium chromium-driver; do
  dpkg -s "$package" >/dev/null 2>&1 || need_apt+=("$package")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Each lab host is a container running systemd, which takes inotify instances from the
# machine's per-user budget: Debian's 128 runs out near 25 hosts (the 24-worker bench has 34).
inotify=/proc/sys/fs/inotify/max_user_instances
if [ -e "$inotify" ] && [ "$(cat "$inotify")" -lt 1024 ]; then
  echo 1024 | as_root tee "$inotify" >/dev/null || echo "setup: could not raise $inotify" >&2
fi

"$PYTHON" - <<'PY'
import sys
if sys.version_info < (3, 11):
    sys.exit(f"Python 3.11 or newer is needed, found {sys.version.split()[0]}")
PY

if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
pip_install() {
  if ! .venv/bin/python -m pip install -q "$@" > .venv/pip-install.log 2>&1; then
    grep -v '^WARNING: Location' .venv/pip-install.log | tail -30
    echo "pip install $* failed (log: .venv/pip-install.log)" >&2
    exit 1
  fi
}
pip_install --upgrade pip
pip_install -e '.[dev]'
.venv/bin/slurm-app-driver --version
