"""Makes ``benchmarks/_driver.py`` (the deterministic workload) importable as ``_driver``, and the
research probes of ``research/`` importable by name for their tests (tests/research); and the ``one_thread``
fixture (torch on one thread for the test, the setting restored after it: tiny tensors run fastest so, and the
other tests keep theirs)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
for folder in (ROOT / "benchmarks", ROOT / "research"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.fixture
def one_thread() -> Iterator[None]:
    import torch  # here, not at the top: the core's tests run without importing torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
