"""The small JSON files the reference trainer reads back, field by field: ``trainer.json`` and
``curriculum.json`` of a checkpoint, ``pipeline.json`` (batches generated ahead) and the warm-up cache's
``meta.json``.

A checkpoint's files are checksummed by its commit record, so what these checks catch is a file altered and
re-signed, or written by something else: ``true`` read as step 1, ``0.9`` as 0, ``"3"`` as 3, a count of
``10**400``, a missing field. Each is a :class:`~snooze.StateError` naming the file and the field
(:class:`~snooze._kit.record.Record`), never a builtin error or a value taken silently.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from snooze._kit.checks import is_int
from snooze._kit.json import read_json
from snooze._kit.record import Record
from snooze.core.errors import StateError

__all__ = ["read_trainer_meta", "read_curriculum_state", "read_pipeline_meta", "read_warmup_meta"]

_DAMAGED = "the checkpoint is damaged: restore the run folder from a backup or start the run over in a new folder"


def _record(path: Path, fix: str = _DAMAGED) -> Record:
    return Record(read_json(path, StateError, fix), str(path), StateError, fix)


def read_trainer_meta(path: Path) -> tuple[int, float]:
    """``trainer.json``: the step (an integer >= 0) and the seconds trained so far (finite, >= 0)."""
    record = _record(path)
    return record.integer("step"), record.number("elapsed", 0.0)


def read_curriculum_state(path: Path) -> dict[str, Any]:
    """``curriculum.json`` (``Curriculum.state_dict()``): ``stage`` and ``n_stages`` integers, ``streaks`` an
    array of integers, each >= 0; the curriculum then checks that they fit it."""
    record = _record(path)
    streaks = record.array("streaks")
    return {
        "version": record.integer("version", 1, 1),
        "stage": record.integer("stage"),
        "streaks": [record.check_int(f"streaks[{i}]", s) for i, s in enumerate(streaks)],
        "n_stages": record.integer("n_stages", 1),
    }


def _metric(record: Record, key: str, value: Any) -> float | int | None:
    """A queued batch's metric: a finite number, ``null``, or ``{"nonfinite": "nan" | "inf" | "-inf"}``."""
    if isinstance(value, dict):
        text = Record(value, record.where, StateError, record.fix, f"{record.path}.{key}").raw("nonfinite")
        if text not in ("nan", "inf", "-inf"):
            raise record.fail(key, f"{text!r} is not nan, inf or -inf")
        return float(text)
    if value is None:
        return None
    number = record.check_real(key, value)
    return int(value) if is_int(value) else number  # (a count stays an int)


def read_pipeline_meta(path: Path) -> list[dict[str, Any]]:
    """``pipeline.json``: per batch generated ahead, its weights' ``version`` and its number of ``groups``
    (integers >= 0) and its ``metrics`` (numbers; a NaN or infinity written as ``{"nonfinite": ...}``)."""
    out = []
    for n, item in enumerate(_record(path).array("batches")):
        entry = Record(item, str(path), StateError, _DAMAGED, f"batches[{n}]")
        metrics = entry.obj("metrics")
        out.append(
            {
                "version": entry.integer("version"),
                "groups": entry.integer("groups"),
                "metrics": {k: _metric(metrics, k, v) for k, v in metrics.mapping().items()},
            }
        )
    return out


def read_warmup_meta(path: Path, fix: str) -> dict[str, Any]:
    """The warm-up cache's ``meta.json``: ``steps`` (an integer >= 0), ``val_accuracy`` and each
    ``val_by_task`` value in [0, 1], ``seconds`` (finite, >= 0), ``task_steps`` (integers >= 0; optional)."""
    record = _record(path, fix)
    by_task = record.obj("val_by_task")
    task_steps = record.obj("task_steps") if record.has("task_steps") else None
    return {
        "steps": record.integer("steps"),
        "val_accuracy": record.number("val_accuracy", 0.0, 1.0),
        "val_by_task": {k: by_task.number(by_task.check_text(k, k), 0.0, 1.0) for k in by_task.keys()},
        "seconds": record.number("seconds", 0.0, math.inf),
        "task_steps": {} if task_steps is None else {k: task_steps.integer(k) for k in task_steps.keys()},
    }
