"""The metrics log: one JSON object per training step (``metrics.jsonl``; keys in docs/metrics.md).

The reference trainer writes it with :class:`MetricsLogWriter` (every key of the step's
``batch.metrics`` plus the trainer's own); the figures and the run summary read it with
:func:`read_metrics`, and take a run's *late* evaluations with :func:`late_evaluations`. Non-finite
numbers (a NaN loss of an empty batch) are written as ``null``.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from snooze.core._checks import INT64_MAX, finite_float, is_int, shown
from snooze.core.errors import DataError
from snooze.logs._jsonl import LineWriter, fail, read_lines

__all__ = ["METRICS_FILE", "MetricsLogWriter", "read_metrics", "LATE_EVALS", "late_evaluations"]

METRICS_FILE = "metrics.jsonl"
"""The per-step metrics file inside a run directory."""

LATE_EVALS = 3
"""Evaluations averaged for a run's *late* accuracy: its last ones, the base model's excluded. A steadier
end point than the last evaluation alone, which one evaluation's luck moves more (docs/results.md, "What
is measured, and why")."""


def late_evaluations(evals: Sequence[Mapping[str, Any]], n: int = LATE_EVALS) -> list[Mapping[str, Any]]:
    """The last ``n`` of a run's evaluated lines (``evals``, in step order), leaving out the base
    model's (an evaluation at step 0, before any update); a run evaluated only at its start gives that
    one, and no evaluations give none."""
    trained = [x for x in evals if x.get("step") != 0] if evals and evals[0].get("step") == 0 else list(evals)
    return trained[-n:] or list(evals[-1:])


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One run's per-step metrics, in file order.

    ``path`` is a run directory (its ``metrics.jsonl`` is read) or the JSONL file itself. Blank lines
    are ignored; a last line cut short (a run killed while writing) is dropped with a warning; any
    other line that is not a JSON object, lacks its ``step`` or repeats one, or holds a value that is not a
    finite number or ``null``, raises :class:`DataError` naming the line and the field.
    """
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    if not (p.exists() or p.is_symlink()):  # (a FIFO or a device there is refused by read_lines, saying what it is)
        raise DataError(f"no metrics file at {p}: pass a run directory holding {METRICS_FILE} or the file itself")
    out: list[dict[str, Any]] = []
    last = -1
    for number, obj in read_lines(p):
        last = _check_line(obj, p, number, last)
        out.append(obj)
    return out


def _check_line(obj: dict[str, Any], path: Path, line: int, last: int) -> int:
    """A metrics line as :class:`MetricsLogWriter` writes it: ``step`` an integer above the previous line's
    (one line per step, in order), every other value a finite number or ``null`` (a NaN or infinity the
    writer wrote so); returns its step. ``true`` is not 1, ``"0.5"`` not 0.5, ``10**400`` not a number."""
    if "step" not in obj:
        raise fail(path, line, "step", "missing; every line of a metrics log has its step")
    step = obj["step"]
    if not is_int(step) or not 0 <= step <= INT64_MAX:
        raise fail(path, line, "step", f"{shown(step)} is not an integer in [0, 2**63 - 1]")
    if step <= last:
        raise fail(path, line, "step", f"{step} after step {last}: one line per step, in order (a log written twice?)")
    for key, value in obj.items():
        if key != "step" and value is not None and finite_float(value) is None:
            raise fail(path, line, key, f"{shown(value)} is not a finite number (nor null, a value not measured)")
    return int(step)


def _jsonable(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


class MetricsLogWriter(LineWriter):
    """Append one JSON line per step, flushed at once (``with MetricsLogWriter(path) as log: ...``)."""

    kind = "metrics log"

    def __init__(self, path: str | os.PathLike[str], append: bool = True) -> None:
        super().__init__(path, append)

    def write(self, line: Mapping[str, Any]) -> None:
        self._write_lines([json.dumps({k: _jsonable(v) for k, v in line.items()}) + "\n"])
