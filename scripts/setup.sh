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
# verl's metadata asks for transformers<5.11 (the TRL extra takes 5.24.0 here) and packages its CPU paths do not
# import (wandb, pybind11, pylatexenc, ray's dashboard): install verl and
# TransferQueue (its v1 trainer's store) alone; their CPU-side dependencies come with the [verl] extra
# (see docs/integrations/verl.md). The guard checks versions, so an older venv (verl 0.7.1) is upgraded.
VERL_PINS=("verl==0.9.1" "transferqueue==0.1.11")
.venv/bin/python - "${VERL_PINS[@]}" 2>/dev/null <<'PY' || "${PIP[@]}" --no-deps "${VERL_PINS[@]}"
import sys
from importlib.metadata import version
sys.exit(any(version(name) != want for name, want in (pin.split("==") for pin in sys.argv[1:])))
PY
