"""The reward log: one JSON line per generated group, in generation order (``docs/reward-log.md``).

::

    {"format": "snooze-reward-log", "version": 1, "group_size": 4, "batch_size": 16, ...}
    {"step": 3, "dataset": "gsm8k", "id": "q-17", "rewards": [1.0, 0.0, 1.0, 1.0]}

The first line may be a header (:class:`~snooze.logs.RewardLogHeader`: the run's sizes, policy and reward
range); every writer in snooze writes one. Each other line of a prompt ``(dataset, id)`` is one *encounter*
of that prompt. The reference trainer, the TRL and verl adapters and the importers write this format;
:class:`RewardLogWriter` is the one writer they share (:func:`write_groups` writes a round straight from
the candidates). Extra fields on a line are allowed and ignored by the readers here.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze.core._checks import (  # steps and integer ids are held as int64
    INT64_MAX,
    INT64_MIN,
    finite_float,
    is_int,
    lone_surrogate,
    shown,
)
from snooze.core.errors import DataError
from snooze.core.types import Candidate
from snooze.logs._header import RewardLogHeader, is_header
from snooze.logs._jsonl import LineWriter, fail, read_lines

__all__ = ["RewardLog", "RewardLogWriter", "read_reward_log", "write_groups", "REQUIRED_FIELDS", "REWARDS_FILE"]

REWARDS_FILE = "rewards.jsonl"
"""The reward log inside a run directory of the reference trainer."""

REQUIRED_FIELDS: tuple[str, ...] = ("step", "dataset", "id", "rewards")


@dataclass(frozen=True)
class RewardLog:
    """A parsed reward log: ``N`` groups of ``G`` rollouts, arrays in generation (file) order."""

    path: str
    """Where the log was read from (used in messages)."""

    steps: np.ndarray
    """``int64 [N]``: the training step each group was generated for."""

    datasets: list[str]
    """``[N]`` dataset name of each group."""

    ids: list[str | int]
    """``[N]`` prompt id of each group (as written: ``str`` or ``int``)."""

    rewards: np.ndarray
    """``float64 [N, G]``: every rollout's reward."""

    lines: np.ndarray
    """``int64 [N]``: 1-based line number of each group in the file (blank lines are skipped)."""

    header: RewardLogHeader | None = None
    """The log's header line, or ``None`` for a log without one (written by hand, or by a snooze before
    headers): then a reader has to infer the run's sizes and cannot know its policy."""

    @property
    def group_size(self) -> int:
        return int(self.rewards.shape[1])

    def __len__(self) -> int:
        return int(self.rewards.shape[0])

    def prompt_index(self) -> tuple[np.ndarray, list[tuple[str, str | int]]]:
        """``(index [N], keys)``: each group's prompt as a dense integer, and the ``(dataset, id)`` keys."""
        table: dict[tuple[str, str | int], int] = {}
        index = np.fromiter(
            (table.setdefault(k, len(table)) for k in zip(self.datasets, self.ids, strict=False)),
            dtype=np.int64,
            count=len(self),
        )
        return index, list(table)


def _check_line(obj: Any, path: str, line: int) -> tuple[int, str, str | int, list[Any]]:
    if not isinstance(obj, dict):
        raise fail(path, line, None, f"expected a JSON object, got {type(obj).__name__}; see docs/reward-log.md")
    for field in REQUIRED_FIELDS:
        if field not in obj:
            raise fail(path, line, field, f"missing; every line needs {list(REQUIRED_FIELDS)} (docs/reward-log.md)")
    step, dataset, pid, rewards = (obj[f] for f in REQUIRED_FIELDS)
    if not is_int(step) or not 0 <= step <= INT64_MAX:
        raise fail(path, line, "step", f"{shown(step)} is not an integer in [0, 2**63 - 1]")
    if not isinstance(dataset, str) or not dataset:
        raise fail(path, line, "dataset", f"{dataset!r} is not a non-empty string")
    if isinstance(pid, bool) or not isinstance(pid, (str, int)):
        raise fail(path, line, "id", f"{pid!r} is not a string or an integer")
    if isinstance(pid, int) and not INT64_MIN <= pid <= INT64_MAX:  # no scheduler issues one: its ids are int64
        raise fail(path, line, "id", f"{shown(pid)} does not fit in a signed 64-bit integer; use string ids")
    for field, text in (("dataset", dataset), ("id", pid)):
        bad = lone_surrogate(text) if isinstance(text, str) else None
        if bad is not None:
            raise fail(
                path,
                line,
                field,
                f"{text!r} holds a lone surrogate ({bad}), which is not text; fix the encoding of its source",
            )
    _check_rewards(rewards, path, line)
    return step, dataset, pid, rewards


def _check_rewards(rewards: Any, path: str, line: int) -> None:
    if not isinstance(rewards, list) or not rewards:
        raise fail(path, line, "rewards", "must be a non-empty list of numbers, one per rollout")
    for r, value in enumerate(rewards):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise fail(path, line, "rewards", f"rollout {r}: {value!r} is not a number")
        if isinstance(value, int) and finite_float(value) is None:  # (NaN and infinities: checked with the range below)
            raise fail(
                path, line, "rewards", f"rollout {r}: an integer of {value.bit_length()} bits is too large for a float"
            )


_WS = r"[ \t\r\n]*"  # JSON's whitespace (not Python's \s, which takes more)
_NUM = r"-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,3})?"  # a JSON number, of at most 16 digits
_TEXT = r'[^"\\\x00-\x1f]'  # a character JSON takes in a string as itself (no escapes: no lone surrogates)
_CANONICAL = re.compile(
    f'{_WS}\\{{{_WS}"step"{_WS}:{_WS}(0|[1-9][0-9]{{0,17}}){_WS},{_WS}"dataset"{_WS}:{_WS}"({_TEXT}+)"{_WS},'
    f'{_WS}"id"{_WS}:{_WS}(?:"({_TEXT}*)"|(-?(?:0|[1-9][0-9]{{0,17}}))){_WS},{_WS}"rewards"{_WS}:{_WS}'
    f"\\[{_WS}({_NUM}(?:{_WS},{_WS}{_NUM})*){_WS}\\]{_WS}\\}}{_WS}"
)
"""A line as :class:`RewardLogWriter` writes it: the four fields in order, nothing else, plain strings,
short numbers. Every such line is a JSON object that :func:`_check_line` accepts (a step of at most 18
digits is below 2**63), so the reader takes its fields from the match, without building the object."""


def _canonical(text: str) -> tuple[int, str, str | int, str] | None:
    """``(step, dataset, id, rewards text)`` of a line in the writer's form, or ``None`` (the JSON reader's)."""
    m = _CANONICAL.fullmatch(text)
    if m is None:
        return None
    step, dataset, sid, iid, rewards = m.groups()
    return int(step), dataset, (sid if iid is None else int(iid)), rewards


def _rewards_array(rows: list[Any]) -> np.ndarray:
    """``float64 [N, G]`` from rows that are lists of numbers or, for lines in the writer's form, the text
    between the brackets (checked JSON numbers: parsed as the JSON reader parses them, with ``float``)."""
    if rows and all(isinstance(r, str) for r in rows):
        flat = np.fromiter(map(float, ",".join(rows).split(",")), dtype=np.float64)
        return flat.reshape(len(rows), -1)
    return np.asarray([[float(x) for x in r.split(",")] if isinstance(r, str) else r for r in rows], dtype=np.float64)


def _header(lines: Iterator[tuple[int, Any]], path: str, group_size: int | None) -> tuple[Any, ...]:
    """The header (or ``None``) and the lines after it; a given ``group_size`` other than the header's is an error."""
    first = next(lines, None)
    if first is None or not is_header(first[1]):
        return None, ([first] if first is not None else [])
    header = RewardLogHeader.from_line(first[1], path, first[0])
    if group_size is not None and group_size != header.group_size:
        raise fail(
            path,
            first[0],
            "group_size",
            f"the header says groups of {header.group_size}, but {group_size} was asked for (--group-size)",
        )
    return header, []


def _parse_lines(
    lines: Iterator[tuple[int, Any]], path: str, group_size: int | None
) -> tuple[RewardLogHeader | None, tuple[list[Any], ...]]:
    header, pending = _header(lines, path, group_size)
    steps: list[int] = []
    datasets: list[str] = []
    ids: list[str | int] = []
    rewards: list[Any] = []  # each a list of numbers, or the checked text of a line in the writer's form
    numbers: list[int] = []
    want = header.group_size if header is not None else group_size
    for line_no, obj in itertools.chain(pending, lines):
        if isinstance(obj, tuple):
            step, dataset, pid, row = obj
            size = row.count(",") + 1
        else:
            if is_header(obj):
                raise fail(path, line_no, "format", "a header can only be the first line (two logs joined into one?)")
            step, dataset, pid, row = _check_line(obj, path, line_no)
            size = len(row)
        if want is None:
            want = size
        if size != want:
            source = (
                "the header"
                if header is not None
                else "--group-size"
                if group_size is not None
                else f"line {numbers[0]}"
            )
            raise fail(path, line_no, "rewards", f"{size} rewards, but {source} has {want}: groups must all be size G")
        if steps and step < steps[-1]:
            raise fail(
                path,
                line_no,
                "step",
                f"{step} after step {steps[-1]}: lines must be in generation order "
                "(a resumed run that re-logs steps should start a new log or drop the repeated steps)",
            )
        steps.append(step)
        datasets.append(dataset)
        ids.append(pid)
        rewards.append(row)
        numbers.append(line_no)
    return header, (steps, datasets, ids, rewards, numbers)


def read_reward_log(
    path: str | os.PathLike[str], group_size: int | None = None, reward_range: tuple[float, float] | None = None
) -> RewardLog:
    """Read and check a reward log. Any bad line raises :class:`~snooze.DataError` naming file, line and field.

    ``group_size``: the expected G (``None``: the header's, else the first line's; one that contradicts the
    header is an error). Every reward must be finite and in ``reward_range`` (``None``: the header's, else
    ``[0, 1]``); ``G >= 2`` (a group of one has no spread).
    """
    name = str(path)
    if not os.path.exists(name):
        raise DataError(f"{name}: reward log not found")
    header, (steps, datasets, ids, rows, lines) = _parse_lines(read_lines(path, _canonical), name, group_size)
    if reward_range is None:
        reward_range = header.reward_range if header is not None else (0.0, 1.0)
    if not rows:
        raise DataError(f"{name}: the reward log has no groups; it needs one JSON line per generated group")
    arr = _rewards_array(rows)  # [N, G]
    line_arr = np.asarray(lines, dtype=np.int64)
    if arr.shape[1] < 2:
        raise fail(name, int(line_arr[0]), "rewards", "groups of 1 rollout have no spread; GRPO needs G >= 2")
    low, high = reward_range
    bad = ~np.isfinite(arr) | (arr < low) | (arr > high)
    if bad.any():
        g, r = (int(i) for i in np.argwhere(bad)[0])
        kind = "not finite" if not math.isfinite(arr[g, r]) else f"outside the reward range [{low}, {high}]"
        raise fail(
            name, int(line_arr[g]), "rewards", f"rollout {r}: {float(arr[g, r])!r} is {kind} (set --reward-range?)"
        )
    return RewardLog(name, np.asarray(steps, dtype=np.int64), datasets, ids, arr, line_arr, header)


def write_groups(writer: RewardLogWriter | None, step: int, candidates: Sequence[Candidate], rewards: Any) -> None:
    """Log one generation round: ``rewards[i]`` (``[N, G]``) is the group of ``candidates[i]``."""
    if writer is None or not candidates:
        return
    writer.write(step, [c.dataset for c in candidates], [c.id for c in candidates], rewards)


class RewardLogWriter(LineWriter):
    """Append groups to a reward log, one JSON line each (``with RewardLogWriter(path) as log: ...``).

    Trainers call :meth:`write` after every generation round, with the groups in the order they were
    generated. Lines are flushed at each call so a crashed run still leaves a usable log. ``header``: the
    run's :class:`RewardLogHeader`, written as the first line of a new (or empty) log; a log appended to
    keeps the header it has.
    """

    kind = "reward log"

    def __init__(
        self, path: str | os.PathLike[str], append: bool = False, header: RewardLogHeader | None = None
    ) -> None:
        super().__init__(path, append)
        if header is not None and self.path.stat().st_size == 0:
            self._write_lines([header.to_line()])

    def write(self, step: int, datasets: Sequence[str], ids: Sequence[Any], rewards: Any) -> None:
        """One line per group: ``datasets[i]``, ``ids[i]``, ``rewards[i]`` (``[N, G]``) at ``step``."""
        arr = np.asarray(rewards, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[0] != len(datasets) or arr.shape[0] != len(ids):
            raise DataError(
                f"{self.path}: rewards of shape {arr.shape} do not match {len(datasets)} datasets and {len(ids)} ids; "
                "pass one [G] row per group"
            )
        out = []
        for name, pid, row in zip(datasets, ids, arr.tolist(), strict=True):
            plain = pid.item() if hasattr(pid, "item") else pid
            out.append(json.dumps({"step": int(step), "dataset": name, "id": plain, "rewards": row}) + "\n")
        self._write_lines(out)
