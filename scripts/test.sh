#!/usr/bin/env bash
# The project's test command (README, .ci/run): static checks, then the whole pytest suite.
# `scripts/test.sh -m "not containers"` passes extra arguments to pytest for a faster loop.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"

echo "== ruff"
ruff check .
ruff format --check .
echo "== yamllint"
yamllint --strict .
echo "== ansible-lint (production profile)"
ansible-lint --nocolor -q roles playbooks molecule inventories
echo "== manifests"
slurm-app-driver lint manifests/
echo "== pytest"
python -m pytest "$@"
