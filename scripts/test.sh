#!/usr/bin/env bash
# The README's test command: set up (idempotent), lint, then run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
LINTED=(src tests benchmarks research examples)  # every folder with Python in it (tests/test_docs.py checks)
.venv/bin/ruff check "${LINTED[@]}"
.venv/bin/ruff format --check "${LINTED[@]}"
exec .venv/bin/python -m pytest "$@"
