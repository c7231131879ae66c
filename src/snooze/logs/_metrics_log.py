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

import numpy as np

from snooze._kit.checks import INT64_MAX, as_bool, as_int, as_list, as_path, finite_float, shown
from snooze.core.errors import ConfigError, DataError
from snooze.logs._jsonl import LineWriter, fail, read_lines, refuse_cut_short
from snooze.logs._line_checks import step_problem

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
    one, and no evaluations give none. ``n``: an integer >= 1; ``evals``: a sequence of mappings (else a
    :class:`~snooze.ConfigError`)."""
    n = as_int(n, "late_evaluations(n)", 1, INT64_MAX)
    evals = as_list(
        evals,
        "late_evaluations(evals)",
        "a run's evaluated metrics lines",
        "a metrics line (a mapping)",
        lambda x: isinstance(x, Mapping),
    )
    trained = [x for x in evals if x.get("step") != 0] if evals and evals[0].get("step") == 0 else list(evals)
    return trained[-n:] or list(evals[-1:])


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """One run's per-step metrics, in file order.

    ``path`` is a run directory (its ``metrics.jsonl`` is read) or the JSONL file itself. Blank lines
    are ignored; a last line cut short (a run killed while writing) is dropped with a warning; any
    other line that is not a JSON object, lacks its ``step`` or repeats one, or holds a value that is not a
    finite number or ``null``, raises :class:`DataError` naming the line and the field. A ``path`` that is no
    path (``None``, a number, ``''``) is a :class:`~snooze.ConfigError`.
    """
    p = as_path(path, "read_metrics(path)")
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


def line_problem(obj: Mapping[str, Any], last: int) -> tuple[str, str] | None:
    """``(field, what)`` of what is wrong with a metrics line (the one rule of its reader and its writer), or
    ``None``: ``step`` an integer in [0, 2**63 - 1] above ``last``, the previous line's (one line per step, in
    order; ``-1`` before the first), every other value a finite number or ``null`` (a NaN or infinity the writer
    wrote so). ``true`` is not 1, ``"0.5"`` not 0.5, ``10**400`` not a number."""
    if "step" not in obj:
        return "step", "missing; every line of a metrics log has its step"
    step = obj["step"]
    what = step_problem(step)
    if what is not None:
        return "step", what
    if step <= last:
        return "step", f"{step} after step {last}: one line per step, in order (a log written twice?)"
    for key, value in obj.items():
        if key != "step" and value is not None and finite_float(value) is None:
            return key, f"{shown(value)} is not a finite number (nor null, a value not measured)"
    return None


def _check_line(obj: dict[str, Any], path: Path, line: int, last: int) -> int:
    """The line's step, or the :class:`DataError` of :func:`line_problem` naming the line and the field."""
    problem = line_problem(obj, last)
    if problem is not None:
        raise fail(path, line, *problem)
    return int(obj["step"])


def _plain(v: Any) -> Any:
    """A value as written: numpy's numbers as Python's, a non-finite float as ``None`` (``null``)."""
    if isinstance(v, np.generic):
        v = v.item()
    return None if isinstance(v, float) and not math.isfinite(v) else v


class MetricsLogWriter(LineWriter):
    """Append one JSON line per step, flushed at once (``with MetricsLogWriter(path) as log: ...``).

    Every line is checked as :func:`read_metrics` checks it (:func:`line_problem`) before it is written: a line
    the reader would refuse (no ``step``, a step not above the last one, in the log appended to too, a value that
    is not a number) is a :class:`~snooze.DataError` naming the line it would have been and the field, and
    nothing is written. numpy's numbers are written as Python's; a NaN or an infinity as ``null``. Appending to
    a log whose last line is cut short (a run killed while writing it) is refused: cut it back first
    (:func:`~snooze.logs.truncate_log`).
    """

    kind = "metrics log"

    def __init__(self, path: str | os.PathLike[str], append: bool = True) -> None:
        p = as_path(path, "MetricsLogWriter(path)")
        append = as_bool(append, "MetricsLogWriter(append)")
        self._last, self._line = _on_disk(p) if append else (-1, 0)
        super().__init__(p, append)

    def write(self, line: Mapping[str, Any]) -> None:
        """One step's line (``step`` and the values of that step), or a :class:`~snooze.DataError` and nothing
        written (see the class)."""
        if not isinstance(line, Mapping):
            raise ConfigError(f"MetricsLogWriter.write: got {type(line).__name__}; pass a mapping of key to number")
        plain = {}
        for k, v in line.items():
            if not isinstance(k, str):
                raise self._refused(k, "the key is not a string; a metrics key is a name (str)")
            plain[k] = _plain(v)
        problem = line_problem(plain, self._last)
        if problem is not None:
            raise self._refused(*problem)
        self._write_lines([json.dumps(plain) + "\n"])
        self._last, self._line = plain["step"], self._line + 1

    def _refused(self, field: Any, what: str) -> DataError:
        return DataError(f"{self.path}, line {self._line + 1} (not written), field {field!r}: {what}")


def _on_disk(path: Path) -> tuple[int, int]:
    """``(last step, last line number)`` of the log a writer appends to, read as :func:`read_metrics` reads
    it; ``(-1, 0)``: no log there yet."""
    if not path.is_file() or path.stat().st_size == 0:
        return -1, 0
    refuse_cut_short(path)
    last, number = -1, 0
    for number, obj in read_lines(path):
        last = _check_line(obj, path, number, last)
    return last, number
