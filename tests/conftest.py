"""Makes ``benchmarks/_driver.py`` (the deterministic workload) importable as ``_driver``, and the
research probes of ``research/`` importable by name for their tests (tests/research)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT / "benchmarks", ROOT / "research"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
