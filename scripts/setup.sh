#!/usr/bin/env bash
# Create .venv (if missing) and install snooze with everything the tests and the reference experiment need.
# torch is installed first and pinned, so pip never pulls a multi-GB CUDA build on a CPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" "torch==2.13.0"
# The integrations' extras are installed too, so their tests run against the real TRL and verl classes.
"${PIP[@]}" "torch==2.13.0" -e ".[all,dev,trl,verl]"
# verl's own metadata pins numpy<2 and GPU-only packages: install it alone (see docs/integrations/verl.md).
.venv/bin/python -c "import verl" 2>/dev/null || "${PIP[@]}" --no-deps "verl==0.7.1"
