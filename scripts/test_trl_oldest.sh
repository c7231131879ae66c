#!/usr/bin/env bash
# CI's second TRL job: the TRL test files against the oldest TRL of the supported range, with the transformers of its
# release, in a venv of their own (.venv-trl-oldest; created if missing, idempotent). .ci/run runs it after the
# README's test command, which tests the newest TRL of the range. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv-trl-oldest
OLDEST=("trl==1.0.0" "transformers==5.4.0")  # trl: snooze.integrations.trl._checks.OLDEST (tests/integrations/test_trl_range.py)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
"${PIP[@]}" "torch==2.13.0"  # first and pinned: an unpinned torch pulls a multi-GB CUDA build
"${PIP[@]}" "torch==2.13.0" "${OLDEST[@]}" -e ".[trl,dev]"
exec "$VENV/bin/python" -m pytest -q tests/integrations/test_trl*.py "$@"
