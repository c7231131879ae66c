"""Reading ``metrics.jsonl`` files and the small, pure numpy helpers the figures are built from.

Everything here is numpy-only and has no matplotlib import, so it is cheap to test with
hand-made metrics files. A run directory holds ``metrics.jsonl``: one JSON object per training
step (the keys of SPEC section 5 plus ``train/loss``, ``time/elapsed_s`` and, on evaluation
steps, ``eval/accuracy``).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snooze.core.errors import DataError

__all__ = [
    "METRICS_FILE",
    "SeedAggregate",
    "read_metrics",
    "series",
    "aggregate_seeds",
    "moving_average",
    "cumulative_batches",
    "dataset_names",
]

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
"""The per-step metrics file inside a run directory."""


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Read one run's per-step metrics, in file order.

    ``path`` is a run directory (its ``metrics.jsonl`` is read) or the JSONL file itself. Blank
    lines are ignored. A truncated *last* line (a run killed while writing) is dropped with a
    warning; a malformed line anywhere else raises :class:`DataError` naming the line.
    """
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    if not p.is_file():
        raise DataError(f"no metrics file at {p}: pass a run directory holding {METRICS_FILE} or the file itself")
    lines = p.read_text(encoding="utf-8").splitlines()
    numbered = [(i + 1, line) for i, line in enumerate(lines) if line.strip()]
    records: list[dict[str, Any]] = []
    for k, (lineno, line) in enumerate(numbered):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            if k == len(numbered) - 1:
                logger.warning("%s:%d: dropping a truncated last line (%s)", p, lineno, e)
                break
            raise DataError(f"{p}:{lineno}: not valid JSON ({e}); fix or remove that line") from e
        if not isinstance(obj, dict):
            raise DataError(f"{p}:{lineno}: expected a JSON object per line, got {type(obj).__name__}")
        records.append(obj)
    return records


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
    """Cumulative generated batches against step: the seed's figure-1/2 y axis.

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
