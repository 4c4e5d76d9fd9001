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
# ansible-lint takes a minute (its rules' own work). It is skipped when every file it reads and
# every installed package are what they were at its last clean run in this checkout; a fresh
# clone (.ci/run) has no such record and always runs it. Delete the record to run it anyway.
lint_paths=(roles playbooks molecule inventories)
lint_record=.venv/ansible-lint-clean
lint_inputs() {
  git ls-files -z -co --exclude-standard -- "${lint_paths[@]}" .config ansible.cfg .ansible-lint \
    .yamllint | xargs -0 sha256sum 2>&1 # a file deleted from the work tree changes the key too
  ls .venv/lib/python3*/site-packages 2>&1 | grep -F .dist-info || true
}
lint_key=
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  lint_key=$(lint_inputs | sha256sum | cut -d' ' -f1)
fi
if [[ -n $lint_key && -f $lint_record && $(<"$lint_record") == "$lint_key" ]]; then
  echo "unchanged since its last clean run here, skipped (rm $lint_record to run it)"
else
  rm -f "$lint_record"
  ansible-lint --nocolor -q "${lint_paths[@]}"
  [[ -z $lint_key ]] || echo "$lint_key" >"$lint_record"
fi
echo "== manifests"
slurm-app-driver lint manifests/
echo "== pytest"
python -m pytest "$@"
