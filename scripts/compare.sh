#!/usr/bin/env bash
# The README's main job: set up (idempotent), then run the reference experiment on its default profile.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/snooze compare --out "${OUT:-runs/compare}" "$@"
