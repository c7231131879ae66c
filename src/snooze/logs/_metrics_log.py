"""The metrics log: one JSON object per training step (``metrics.jsonl``; keys in docs/metrics.md).

The reference trainer writes it with :class:`MetricsLogWriter` (every key of the step's
``batch.metrics`` plus the trainer's own); the figures and the run summary read it with
:func:`read_metrics`. Non-finite numbers (a NaN loss of an empty batch) are written as ``null``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from snooze.core.errors import DataError
from snooze.logs._jsonl import LineWriter, read_lines

__all__ = ["METRICS_FILE", "MetricsLogWriter", "read_metrics"]

METRICS_FILE = "metrics.jsonl"
"""The per-step metrics file inside a run directory."""


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One run's per-step metrics, in file order.

    ``path`` is a run directory (its ``metrics.jsonl`` is read) or the JSONL file itself. Blank lines
    are ignored; a last line cut short (a run killed while writing) is dropped with a warning; any
    other line that is not a JSON object raises :class:`DataError` naming the line.
    """
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    if not p.is_file():
        raise DataError(f"no metrics file at {p}: pass a run directory holding {METRICS_FILE} or the file itself")
    return [obj for _, obj in read_lines(p)]


def _jsonable(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


class MetricsLogWriter(LineWriter):
    """Append one JSON line per step, flushed at once (``with MetricsLogWriter(path) as log: ...``)."""

    kind = "metrics log"

    def __init__(self, path: str | os.PathLike[str], append: bool = True) -> None:
        super().__init__(path, append)

    def write(self, line: Mapping[str, Any]) -> None:
        self._write_lines([json.dumps({k: _jsonable(v) for k, v in line.items()}) + "\n"])
