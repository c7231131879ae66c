"""The small, pure numpy helpers the figures are built from, over metrics records.

Records are what :func:`snooze.logs.read_metrics` returns for a run: one dict per training step (the
keys of docs/metrics.md plus ``train/loss``, ``time/elapsed_s`` and, on evaluation steps,
``eval/accuracy``). Everything here is numpy-only, so it is cheap to test with hand-made records.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze.core.errors import DataError

__all__ = [
    "SeedAggregate",
    "series",
    "aggregate_seeds",
    "moving_average",
    "cumulative_batches",
    "dataset_names",
]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def series(records: Sequence[dict[str, Any]], key: str) -> tuple[np.ndarray, np.ndarray]:
    """The values of ``key`` against ``step``: ``(steps [T] int, values [T] float)``, sorted by step.

    Records without ``step`` or without a finite number under ``key`` are skipped. When a step
    appears more than once (a resumed run re-logs it) the last occurrence wins.
    """
    by_step: dict[int, float] = {}
    for rec in records:
        step, value = rec.get("step"), rec.get(key)
        if _finite(step) and _finite(value):
            by_step[int(step)] = float(value)
    steps = np.array(sorted(by_step), dtype=np.int64)
    values = np.array([by_step[s] for s in steps.tolist()], dtype=np.float64)
    return steps, values


@dataclass(frozen=True)
class SeedAggregate:
    """One curve summarised over seeds, on the steps every seed has."""

    steps: np.ndarray
    """Steps present in every seed, ascending. [T]"""
    mean: np.ndarray
    """Mean over seeds at each step. [T]"""
    lo: np.ndarray
    """Minimum over seeds at each step (the lower edge of the shaded band). [T]"""
    hi: np.ndarray
    """Maximum over seeds at each step (the upper edge of the shaded band). [T]"""
    n_seeds: int
    """How many seeds went into the curve."""

    def __len__(self) -> int:
        return int(self.steps.size)


def aggregate_seeds(curves: Sequence[tuple[np.ndarray, np.ndarray]]) -> SeedAggregate:
    """Mean, min and max over seeds of ``(steps, values)`` curves.

    Only the steps that *every* seed has are kept, so each point averages the same seeds (a seed
    that stopped early shortens the curve rather than making its mean jump). Seeds that never
    logged the key (empty curves) are left out. No curves, or no common step, gives an empty
    aggregate.
    """
    empty = np.zeros(0)
    curves = [c for c in curves if len(c[0])]
    if not curves:
        return SeedAggregate(empty.astype(np.int64), empty, empty, empty, 0)
    common = curves[0][0]
    for steps, _ in curves[1:]:
        common = np.intersect1d(common, steps)
    common = np.asarray(common, dtype=np.int64)
    stacked = np.stack([vals[np.searchsorted(steps, common)] for steps, vals in curves])  # [S, T]
    return SeedAggregate(common, stacked.mean(axis=0), stacked.min(axis=0), stacked.max(axis=0), len(curves))


def moving_average(values: np.ndarray, window: int) -> np.ndarray:
    """Trailing moving average of the last ``window`` values; the first points average what exists.

    ``out[i] = mean(values[max(0, i - window + 1) : i + 1])``, same length as ``values``.
    """
    if window < 1:
        raise DataError(f"moving-average window must be >= 1, got {window}")
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return x.copy()
    sums = np.convolve(x, np.ones(window))[: x.size]  # direct sums: no drift from a running cumsum
    counts = np.minimum(np.arange(1, x.size + 1), window)
    return sums / counts


def cumulative_batches(records: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative generated batches against step: the design note's figure-1/2 y axis
    (the blog post this project implements: docs/concepts.md, "The design note").

    One generation round generates one batch of groups, so this is ``total/rounds`` when logged,
    else the running sum of ``gen/rounds``. Empty arrays when neither key is present.
    """
    steps, total = series(records, "total/rounds")
    if steps.size:
        return steps, total
    steps, per_step = series(records, "gen/rounds")
    return steps, np.cumsum(per_step)


def dataset_names(records: Sequence[dict[str, Any]]) -> list[str]:
    """Names ``<name>`` of every ``dataset/<name>/batch_frac`` key in the records, sorted."""
    names: set[str] = set()
    for rec in records:
        for key in rec:
            if key.startswith("dataset/") and key.endswith("/batch_frac"):
                names.add(key[len("dataset/") : -len("/batch_frac")])
    return sorted(names)
