"""Reading baseline completions: one row per ``(dataset, id, model)`` from JSONL, CSV or Parquet files.

A row carries either the list of rewards of its samples (``rewards``) or the counts ``n`` (a whole
number of samples) and ``n_correct``. Rewards are scaled to ``[0, 1]`` by the reward range, so a row's
``correct`` is the sum of its scaled rewards (the number correct for binary rewards; ``n_correct`` may
be fractional, for rewards other than 0 and 1).

The format is the file's extension: ``.parquet``/``.pq`` is Parquet, ``.csv`` is CSV (a header row
naming the columns; a ``rewards`` cell holds a JSON list, ``[1, 0, 1]``; an ``id`` written as a whole
number, ``17``, is an integer, any other an id string), anything else JSON Lines. Every problem raises
:class:`~snooze.DataError` naming the file, the row (1-based; for JSONL the line, for CSV the data row
after the header) and the field.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from snooze._kit.checks import (  # INT64: the ids a Scheduler takes
    INT64_MAX,
    INT64_MIN,
    as_list,
    as_path,
    check_reward_range,
    finite_float,
    lone_surrogate,
    shown,
)
from snooze._kit.files import open_regular
from snooze._kit.json import parse_json
from snooze.core.errors import ConfigError, DataError
from snooze.core.source import read_parquet

__all__ = ["Completions", "read_completions", "check_completions", "COLUMNS"]

COLUMNS: tuple[str, ...] = ("dataset", "id", "model", "rewards", "n", "n_correct")
DEFAULT_MODEL = "baseline"
FORMATS = "JSON Lines (.jsonl, .json), CSV (.csv) or Parquet (.parquet, .pq)"
"""The formats baseline completions are read from, for messages."""
_INTEGER = re.compile(r"-?(0|[1-9][0-9]*)")  # a CSV id that is an integer: no sign but '-', no leading zero


@dataclass
class Completions:
    """Rows of baseline completions, checked, as parallel lists / arrays."""

    datasets: list[str] = field(default_factory=list)
    """Dataset of each row."""

    ids: list[str | int] = field(default_factory=list)
    """Prompt id of each row."""

    models: list[str] = field(default_factory=list)
    """Baseline model of each row (``baseline`` when the input has no ``model`` column)."""

    n: list[float] = field(default_factory=list)
    """Samples in each row."""

    correct: list[float] = field(default_factory=list)
    """Sum of the scaled rewards of each row (number correct for binary rewards)."""

    where: list[tuple[str, int]] = field(default_factory=list)
    """``(file, row)`` of each row, for messages."""

    def counts(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self.n, dtype=np.float64), np.asarray(self.correct, dtype=np.float64)


def _fail(path: str, row: int, column: str | None, what: str) -> DataError:
    return DataError(f"{path}, row {row}" + (f", field {column!r}" if column else "") + f": {what}")


def _iter_jsonl(path: str) -> Iterator[tuple[int, Any]]:
    line_no, first = 0, True
    try:
        with open_regular(path, text=True, encoding="utf-8") as handle:  # (a FIFO is refused, not waited on)
            for line_no, text in enumerate(handle, start=1):
                if text.strip():
                    fix = f"baseline completions are read as {FORMATS}, by the file's extension" if first else ""
                    first = False
                    yield line_no, parse_json(text, f"{path}, row {line_no}", DataError, fix)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason}, after line {line_no})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror})") from None


def _csv_cell(column: str, text: str, path: str, row: int) -> Any:
    """A CSV cell as the value a JSON row would hold in that column (text stays text where it cannot be one)."""
    if column == "rewards":
        return parse_json(text, f"{path}, row {row}, field 'rewards'", DataError, "write the rewards as [1, 0, 1]")
    if column == "id":
        return int(text) if reads_as_integer(text) else text
    if column in ("n", "n_correct"):
        try:
            return float(text)
        except ValueError:
            return text  # refused by the row check, which names the field
    return text


def reads_as_integer(text: str) -> bool:
    """Whether an id written ``text`` in a CSV file is read as an integer (a whole number: no sign but
    ``-``, no leading zero, ``17``), not as a string id."""
    return _INTEGER.fullmatch(text) is not None


def _iter_csv(path: str) -> Iterator[tuple[int, Any]]:
    try:
        with open_regular(path, text=True, encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                return
            if {"stratum", "pass_rate"} <= set(header):
                raise DataError(
                    f"{path}: is a stratification (snooze stratify's prompts.csv: one row per prompt with its pooled "
                    "pass rate), not baseline completions; snooze stratify reads the completions it was made from: "
                    f"one row per (dataset, id, model) with 'rewards' or 'n' and 'n_correct', as {FORMATS}"
                )
            twice = sorted({c for c in header if header.count(c) > 1})
            if twice:
                raise DataError(f"{path}: the header names column {twice[0]!r} twice")
            for row, cells in enumerate(reader, start=1):
                if len(cells) > len(header):
                    raise _fail(path, row, None, f"{len(cells)} cells under a header of {len(header)} columns")
                if any(cells):
                    yield row, {c: _csv_cell(c, v, path, row) for c, v in zip(header, cells) if v != ""}
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except csv.Error as exc:
        raise DataError(f"{path}: not readable as CSV ({exc})") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror})") from None


def _iter_parquet(path: str) -> Iterator[tuple[int, Any]]:
    try:
        rows = read_parquet(path).to_pylist()  # (a FIFO is refused, not waited on)
    except ConfigError:
        raise
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    except Exception as exc:  # pyarrow raises many types for a corrupt file; translate at the boundary
        raise DataError(f"{path}: not a readable Parquet file ({exc})") from None
    for i, row in enumerate(rows, start=1):
        yield i, {k: v for k, v in row.items() if v is not None}


def _number(path: str, row: int, column: str, value: Any) -> float:
    number = finite_float(value) if isinstance(value, (int, float)) else None  # (not a Decimal or a Fraction)
    if number is None:
        raise _fail(path, row, column, f"{shown(value)} is not a finite number")
    return number


def _counts(path: str, row: int, obj: Mapping[str, Any], reward_range: tuple[float, float]) -> tuple[float, float]:
    has_rewards, has_counts = "rewards" in obj, ("n" in obj or "n_correct" in obj)
    if has_rewards == has_counts:
        raise _fail(
            path, row, "rewards", "give either 'rewards' (a list) or both 'n' and 'n_correct', not both or neither"
        )
    if has_rewards:
        rewards = obj["rewards"]
        if not isinstance(rewards, list) or not rewards:
            raise _fail(path, row, "rewards", "must be a non-empty list of numbers")
        low, high = reward_range
        values = [_number(path, row, "rewards", v) for v in rewards]
        bad = [v for v in values if v < low or v > high]
        if bad:
            raise _fail(
                path, row, "rewards", f"{bad[0]!r} is outside the reward range [{low}, {high}] (set --reward-range?)"
            )
        return float(len(values)), float(sum((v - low) / (high - low) for v in values))
    for column in ("n", "n_correct"):
        if column not in obj:
            raise _fail(path, row, column, "missing: rows without 'rewards' need both 'n' and 'n_correct'")
    n, k = _number(path, row, "n", obj["n"]), _number(path, row, "n_correct", obj["n_correct"])
    if n < 1:
        raise _fail(path, row, "n", f"{obj['n']!r}: a row needs at least one sample")
    if not n.is_integer():  # n_correct may be fractional (a sum of scaled rewards); a count of samples may not
        raise _fail(
            path,
            row,
            "n",
            f"{obj['n']!r}: the number of samples must be a whole number (n_correct may be "
            "fractional: the sum of rewards scaled to [0, 1])",
        )
    if not 0 <= k <= n:
        raise _fail(path, row, "n_correct", f"{obj['n_correct']!r} is not between 0 and n={obj['n']!r}")
    return n, k


def _keys(path: str, row: int, obj: Mapping[str, Any]) -> tuple[str, str | int, str]:
    """The row's ``dataset``, ``id`` and ``model``, checked."""
    dataset, pid, model = obj["dataset"], obj["id"], obj.get("model", DEFAULT_MODEL)
    if not isinstance(dataset, str) or not dataset:
        raise _fail(path, row, "dataset", f"{dataset!r} is not a non-empty string")
    if isinstance(pid, bool) or not isinstance(pid, (str, int)):
        raise _fail(path, row, "id", f"{pid!r} is not a string or an integer")
    if isinstance(pid, int) and not INT64_MIN <= pid <= INT64_MAX:
        raise _fail(
            path,
            row,
            "id",
            f"{pid} does not fit in a signed 64-bit integer (nor would a Scheduler take it); use string ids",
        )
    if not isinstance(model, str) or not model or "/" in model:
        raise _fail(path, row, "model", f"{model!r} must be a non-empty string without '/'")
    for column, text in (("dataset", dataset), ("id", pid), ("model", model)):
        bad = lone_surrogate(text) if isinstance(text, str) else None
        if bad is not None:
            raise _fail(
                path,
                row,
                column,
                f"{text!r} holds a lone surrogate ({bad}), which is not text; "
                "fix the encoding of the data it came from",
            )
    return dataset, pid, model


def _add_row(
    out: Completions,
    seen: dict[tuple[Any, ...], tuple[str, int]],
    id_kinds: dict[str, tuple[type, str, int]],
    path: str,
    row: int,
    obj: Any,
    reward_range: tuple[float, float],
) -> None:
    if not isinstance(obj, dict):
        raise _fail(path, row, None, f"expected an object with columns {list(COLUMNS)}, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(COLUMNS))
    if unknown:
        hint = (
            "; this is a reward log of a training run, which `snooze replay` reads (docs/reward-log.md)"
            if "step" in obj
            else ""
        )
        raise _fail(path, row, unknown[0], f"unknown column; allowed columns are {list(COLUMNS)}{hint}")
    for column in ("dataset", "id"):
        if column not in obj:
            raise _fail(path, row, column, "missing")
    dataset, pid, model = _keys(path, row, obj)
    kind = id_kinds.setdefault(dataset, (type(pid), path, row))
    if kind[0] is not type(pid):
        raise _fail(
            path,
            row,
            "id",
            f"{pid!r} is a {type(pid).__name__}, but dataset {dataset!r} has {kind[0].__name__} ids "
            f"({kind[1]}, row {kind[2]}); a dataset's ids are all integers or all strings, as the Scheduler's are",
        )
    n, k = _counts(path, row, obj, reward_range)
    key = (dataset, pid, model)
    if key in seen:
        first = seen[key]
        raise _fail(
            path,
            row,
            "id",
            f"duplicate row for (dataset={dataset!r}, id={pid!r}, model={model!r}); "
            f"first seen at {first[0]}, row {first[1]}: merge the samples into one row",
        )
    seen[key] = (path, row)
    out.datasets.append(dataset)
    out.ids.append(pid)
    out.models.append(model)
    out.n.append(n)
    out.correct.append(k)
    out.where.append((path, row))


def _rows(path: str) -> Iterator[tuple[int, Any]]:
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return _iter_parquet(path)
    return _iter_csv(path) if suffix == ".csv" else _iter_jsonl(path)


def _paths(paths: Any, what: str) -> list[str]:
    """``paths`` as a list of paths, each as given (messages name it so): one ``str``/``os.PathLike`` is one
    path, else an iterable of them, each checked by :func:`~snooze._kit.checks.as_path`."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if isinstance(paths, (bytes, bytearray)) or not isinstance(paths, Iterable):
        raise ConfigError(
            f"{what}={shown(paths)}: must be a path or a list of paths of baseline completions files, "
            f"got {type(paths).__name__}"
        )
    out = []
    for p in paths:
        as_path(p, what)
        out.append(os.fspath(p))
    if not out:
        raise ConfigError(f"{what}=[]: no baseline completions file given")
    return out


def _models(models: Any) -> list[str] | None:
    if models is None:
        return None
    hint = f" (one model: models=[{models!r}])" if isinstance(models, str) else ""
    return as_list(models, "models", "model names or None", "a model name (a non-empty str)", _name, hint)


def _name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def read_completions(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    reward_range: tuple[float, float] = (0.0, 1.0),
    models: Sequence[str] | None = None,
) -> Completions:
    """Read and check baseline completions from ``.jsonl``/``.json``, ``.csv`` and ``.parquet`` files.

    ``paths``: one path (a ``str`` or a :class:`~pathlib.Path`) or a list of them. ``reward_range``:
    ``(low, high)``, finite with ``low < high``. ``models``: a list of the models expected (not a bare
    ``str``); one with no rows is an error (so a missing file or a typo in a model name does not
    silently change the pooled pass rates). A wrong argument is a :class:`~snooze.ConfigError`, before
    any file is read.
    """
    paths = _paths(paths, "read_completions(paths)")
    reward_range = check_reward_range(reward_range)
    models = _models(models)
    out = Completions()
    seen: dict[tuple[Any, ...], tuple[str, int]] = {}
    id_kinds: dict[str, tuple[type, str, int]] = {}  # each dataset's id type, and where it was first seen
    for p in paths:
        path = str(p)
        if Path(path).is_dir():
            raise DataError(f"{path}: is a folder; pass the baseline completions file (.jsonl or .parquet)")
        if not (Path(path).exists() or Path(path).is_symlink()):
            raise DataError(f"{path}: baseline completions file not found")
        rows = _rows(path)
        for row, obj in rows:
            _add_row(out, seen, id_kinds, path, row, obj, reward_range)
    if not out.n:
        raise DataError(f"{', '.join(map(str, paths))}: no rows of baseline completions")
    for model in models or ():
        if model not in set(out.models):
            raise DataError(
                f"{', '.join(map(str, paths))}: model {model!r} has no rows (field 'model'); "
                f"models present: {sorted(set(out.models))}"
            )
    return out


_FIELDS = ("datasets", "ids", "models", "n", "correct")


def check_completions(rows: Completions) -> Completions:
    """A :class:`Completions` built by hand, checked as :func:`read_completions` checks a file's rows (a
    :class:`~snooze.DataError` naming the row, 1-based, and the field): its lists of one length, at least
    one row, each a dataset name, an id (each dataset's of one type), a model name, ``n`` a whole number
    of samples >= 1 and ``correct`` in ``[0, n]``, no ``(dataset, id, model)`` twice. Returns the rows as
    ``read_completions`` would hold them (Python numbers)."""
    lengths = {}
    for name in _FIELDS:
        column = getattr(rows, name)
        if isinstance(column, (str, bytes)) or not isinstance(column, (Sequence, np.ndarray)):
            raise DataError(f"Completions.{name}: must be a list, one entry per row (got {type(column).__name__})")
        lengths[name] = len(column)
    if len(set(lengths.values())) > 1:
        raise DataError(
            f"Completions: its lists must have one entry per row, but their lengths differ ({lengths}); "
            "build it from rows of (dataset, id, model, n, correct)"
        )
    if not lengths["n"]:
        raise DataError("Completions: no rows of baseline completions")
    out = Completions()
    seen: dict[tuple[Any, ...], tuple[str, int]] = {}
    id_kinds: dict[str, tuple[type, str, int]] = {}
    cells = zip(*(getattr(rows, name) for name in _FIELDS))
    for row, (dataset, pid, model, n, k) in enumerate(cells, start=1):
        obj = {"dataset": dataset, "id": pid, "model": model, "n": n, "n_correct": k}
        obj = {c: v.item() if isinstance(v, np.generic) else v for c, v in obj.items()}
        _add_row(out, seen, id_kinds, "Completions", row, obj, (0.0, 1.0))
    return out
