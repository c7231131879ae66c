"""The reward log: one JSON line per generated group, in generation order (``docs/reward-log.md``).

::

    {"format": "snooze-reward-log", "version": 1, "group_size": 4, "batch_size": 16, ...}
    {"step": 3, "dataset": "gsm8k", "id": "q-17", "rewards": [1.0, 0.0, 1.0, 1.0], "tokens": 812}

A line's ``tokens`` (optional) is the completion tokens the group's rollouts generated, summed; a writer that
does not know them leaves it out. The first line may be a header (:class:`~snooze.logs.RewardLogHeader`: the
run's sizes, policy and reward range); every writer in snooze writes one. Each other line of a prompt
``(dataset, id)`` is one *encounter* of that prompt. The reference trainer, the TRL and verl adapters and the
importers write this format; :class:`RewardLogWriter` is the one writer they share (:func:`write_groups`
writes a round straight from the candidates). Extra fields on a line are allowed and ignored by the readers
here.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from snooze._kit.checks import INT64_MAX, as_int, check_reward_range
from snooze.core.errors import ConfigError, DataError
from snooze.core.types import Candidate
from snooze.logs._header import RewardLogHeader, is_header
from snooze.logs._jsonl import LineWriter, fail, read_lines, refuse_cut_short
from snooze.logs._line_checks import (
    LineChecks,
    dataset_problem,
    first_bad_reward,
    id_problem,
    rewards_problem,
    step_problem,
    tokens_problem,
)

__all__ = [
    "RewardLog",
    "RewardLogWriter",
    "read_reward_log",
    "write_groups",
    "REQUIRED_FIELDS",
    "OPTIONAL_FIELDS",
    "REWARDS_FILE",
]

log = logging.getLogger(__name__)

REWARDS_FILE = "rewards.jsonl"
"""The reward log inside a run directory of the reference trainer."""

REQUIRED_FIELDS: tuple[str, ...] = ("step", "dataset", "id", "rewards")

OPTIONAL_FIELDS: tuple[str, ...] = ("tokens",)
"""Fields a group's line may hold that the readers here read (``tokens``: the group's generated tokens)."""

NO_TOKENS = -1
""":attr:`RewardLog.tokens` of a line without ``tokens``."""


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

    tokens: np.ndarray | None = None
    """``int64 [N]``: each group's generated tokens, its line's ``tokens`` (:data:`NO_TOKENS`, -1, where a line
    has none); ``None`` when no line has them (a log of a writer that did not know them, or of a snooze before
    them)."""

    @property
    def group_size(self) -> int:
        return int(self.rewards.shape[1])

    def __len__(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def rollouts(self) -> np.ndarray:
        """``int64 [N]``: each group's rollouts, its count of rewards (every line holds ``G``: the format's rule).
        A read-only view of one number, so it takes no memory at any ``N``."""
        return np.broadcast_to(np.int64(self.rewards.shape[1]), (len(self),))

    @property
    def tokens_known(self) -> bool:
        """Whether every group's line gives its generated tokens (``tokens``)."""
        return self.tokens is not None and bool(np.all(self.tokens >= 0))

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
    """The four fields of a group's line, each checked (:mod:`snooze.logs._line_checks`), or a DataError."""
    if not isinstance(obj, dict):
        raise fail(path, line, None, f"expected a JSON object, got {type(obj).__name__}; see docs/reward-log.md")
    for field in REQUIRED_FIELDS:
        if field not in obj:
            raise fail(path, line, field, f"missing; every line needs {list(REQUIRED_FIELDS)} (docs/reward-log.md)")
    values = tuple(obj[f] for f in REQUIRED_FIELDS)
    for field, check, value in zip(REQUIRED_FIELDS, _CHECKS, values, strict=True):
        what = check(value)
        if what is not None:
            raise fail(path, line, field, what)
    step, dataset, pid, rewards = values
    return step, dataset, pid, rewards


_CHECKS = (step_problem, dataset_problem, id_problem, rewards_problem)
"""The check of each of :data:`REQUIRED_FIELDS`, in order."""


def _tokens_of(obj: dict[str, Any], path: str, line: int) -> int:
    """A checked line's ``tokens`` (:func:`~snooze.logs._line_checks.tokens_problem`), or :data:`NO_TOKENS`."""
    if "tokens" not in obj:
        return NO_TOKENS
    what = tokens_problem(obj["tokens"])
    if what is not None:
        raise fail(path, line, "tokens", what)
    return int(obj["tokens"])


_WS = r"[ \t\r\n]*"  # JSON's whitespace (not Python's \s, which takes more)
_NUM = r"-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,3})?"  # a JSON number, of at most 16 digits
_TEXT = r'[^"\\\x00-\x1f]'  # a character JSON takes in a string as itself (no escapes: no lone surrogates)
_CANONICAL = re.compile(
    f'{_WS}\\{{{_WS}"step"{_WS}:{_WS}(0|[1-9][0-9]{{0,17}}){_WS},{_WS}"dataset"{_WS}:{_WS}"({_TEXT}+)"{_WS},'
    f'{_WS}"id"{_WS}:{_WS}(?:"({_TEXT}*)"|(-?(?:0|[1-9][0-9]{{0,17}}))){_WS},{_WS}"rewards"{_WS}:{_WS}'
    f"\\[{_WS}({_NUM}(?:{_WS},{_WS}{_NUM})*){_WS}\\]"
    f'(?:{_WS},{_WS}"tokens"{_WS}:{_WS}(0|[1-9][0-9]{{0,17}}))?{_WS}\\}}{_WS}'
)
"""A line as :class:`RewardLogWriter` writes it: the four fields in order, then ``tokens`` or not, nothing
else, plain strings, short numbers. Every such line is a JSON object that :func:`_check_line` accepts (a step
of at most 18 digits is below 2**63), so the reader takes its fields from the match, without building the object."""


def _canonical(text: str) -> tuple[int, str, str | int, str, int] | None:
    """``(step, dataset, id, rewards text, tokens)`` of a line in the writer's form (``tokens``
    :data:`NO_TOKENS` when it has none), or ``None`` (the JSON reader's)."""
    m = _CANONICAL.fullmatch(text)
    if m is None:
        return None
    step, dataset, sid, iid, rewards, tokens = m.groups()
    return int(step), dataset, (sid if iid is None else int(iid)), rewards, NO_TOKENS if tokens is None else int(tokens)


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


@dataclass
class _Parsed:
    """A log's lines, each checked on its own and against the lines before it (not yet its reward range)."""

    header: RewardLogHeader | None
    checks: LineChecks
    steps: list[int]
    datasets: list[str]
    ids: list[str | int]
    rewards: list[Any]
    """Each a list of numbers, or the checked text of a line in the writer's form."""
    tokens: list[int]
    """Each line's ``tokens``, :data:`NO_TOKENS` where it has none."""
    numbers: list[int]
    last_line: int
    """The number of the last line read (the header's, when it has no group), 0 for an empty log."""


def _parse_lines(lines: Iterator[tuple[int, Any]], path: str, group_size: int | None) -> _Parsed:
    header, pending = _header(lines, path, group_size)
    checks = LineChecks()
    if header is not None:
        checks.group_size, checks.size_from = header.group_size, "the header"
    elif group_size is not None:
        checks.group_size, checks.size_from = group_size, "--group-size"
    out = _Parsed(header, checks, [], [], [], [], [], [], 0 if header is None else 1)
    for line_no, obj in itertools.chain(pending, lines):
        if isinstance(obj, tuple):
            step, dataset, pid, row, tokens = obj
            size = row.count(",") + 1
        else:
            if is_header(obj):
                raise fail(path, line_no, "format", "a header can only be the first line (two logs joined into one?)")
            step, dataset, pid, row = _check_line(obj, path, line_no)
            tokens = _tokens_of(obj, path, line_no)
            size = len(row)
        problem = checks.problem(step, dataset, pid, size, f"line {line_no}")
        if problem is not None:
            raise fail(path, line_no, *problem)
        out.steps.append(step)
        out.datasets.append(dataset)
        out.ids.append(pid)
        out.rewards.append(row)
        out.tokens.append(tokens)
        out.numbers.append(line_no)
        out.last_line = line_no
    return out


def _arguments(group_size: Any, reward_range: Any) -> tuple[int | None, tuple[float, float] | None]:
    """:func:`read_reward_log`'s arguments, checked as every argument of snooze is (a ConfigError naming it)."""
    if group_size is not None:
        group_size = as_int(group_size, "group_size", 2, INT64_MAX)
    if reward_range is not None:
        reward_range = check_reward_range(reward_range, "reward_range")
    return group_size, reward_range


def read_reward_log(
    path: str | os.PathLike[str], group_size: int | None = None, reward_range: tuple[float, float] | None = None
) -> RewardLog:
    """Read and check a reward log. Any bad line raises :class:`~snooze.DataError` naming file, line and field.

    ``group_size``: the expected G (``None``: the header's, else the first line's; one that contradicts the
    header is an error). Every reward must be finite and in ``reward_range`` (``None``: the header's, else
    ``[0, 1]``; a header of a run that accepted rewards outside its range, ``out_of_range: "accept"``, is
    widened to hold its lines' rewards, with a warning, and the returned header says so in its ``caveats``);
    ``G >= 2`` (a group of one has no spread). A bad argument is a :class:`~snooze.ConfigError`.
    """
    group_size, reward_range = _arguments(group_size, reward_range)
    name = str(path)
    if not os.path.exists(name):
        raise DataError(f"{name}: reward log not found")
    parsed = _parse_lines(read_lines(path, _canonical), name, group_size)
    if not parsed.rewards:
        raise DataError(f"{name}: the reward log has no groups; it needs one JSON line per generated group")
    arr = _rewards_array(parsed.rewards)  # [N, G]
    line_arr = np.asarray(parsed.numbers, dtype=np.int64)
    if arr.shape[1] < 2:
        raise fail(name, int(line_arr[0]), "rewards", "groups of 1 rollout have no spread; GRPO needs G >= 2")
    header = parsed.header
    if reward_range is None and header is not None and header.out_of_range == "accept":
        header = _seen_range(header, arr, name)
    if reward_range is None:
        reward_range = header.reward_range if header is not None else (0.0, 1.0)
    bad = first_bad_reward(arr, *reward_range)
    if bad is not None:
        raise fail(name, int(line_arr[bad[0]]), "rewards", bad[1])
    tokens = np.asarray(parsed.tokens, dtype=np.int64)
    return RewardLog(
        name,
        np.asarray(parsed.steps, dtype=np.int64),
        parsed.datasets,
        parsed.ids,
        arr,
        line_arr,
        header,
        tokens if np.any(tokens != NO_TOKENS) else None,
    )


def _seen_range(header: RewardLogHeader, rewards: np.ndarray, name: str) -> RewardLogHeader:
    """The header of a log written under ``out_of_range="accept"`` with its range widened to hold every reward
    its lines hold (the range the run's rewards really had), and a warning when that differs from the one it
    declared. Non-finite rewards are left for the range check to refuse."""
    finite = rewards[np.isfinite(rewards)]
    if finite.size == 0:
        return header
    low, high = min(header.reward_range[0], float(finite.min())), max(header.reward_range[1], float(finite.max()))
    if (low, high) == header.reward_range:
        return header
    log.warning(
        "%s: the header declares the reward range %s with out_of_range 'accept', and its rewards lie in [%g, %g]: "
        "read with the range [%g, %g]",
        name,
        list(header.reward_range),
        float(finite.min()),
        float(finite.max()),
        low,
        high,
    )
    seen = f"rewards seen in [{low:g}, {high:g}]; the run declared {list(header.reward_range)} (out_of_range accept)"
    return dataclasses.replace(header, reward_range=(low, high), caveats=(*header.caveats, seen))


def write_groups(
    writer: RewardLogWriter | None, step: int, candidates: Sequence[Candidate], rewards: Any, tokens: Any = None
) -> None:
    """Log one generation round: ``rewards[i]`` (``[N, G]``) is the group of ``candidates[i]``, ``tokens[i]`` its
    generated tokens (``None``: not known)."""
    if writer is None or not candidates:
        return
    writer.write(step, [c.dataset for c in candidates], [c.id for c in candidates], rewards, tokens)


class RewardLogWriter(LineWriter):
    """Append groups to a reward log, one JSON line each (``with RewardLogWriter(path) as log: ...``).

    Trainers call :meth:`write` after every generation round, with the groups in the order they were
    generated. Lines are flushed at each call so a crashed run still leaves a usable log. ``header``: the
    run's :class:`RewardLogHeader`, written as the first line of a new (or empty) log; a log appended to
    keeps the header it has (one whose group size or reward range differs from ``header`` is refused, as is
    one whose last line is cut short: cut it back first, :func:`~snooze.logs.truncate_log`).

    Every line is checked as :func:`read_reward_log` checks it (:mod:`snooze.logs._line_checks`) before
    anything is written: a write the reader would refuse is a :class:`~snooze.DataError` naming the line it
    would have been, and writes nothing. Rewards are checked against the header's reward range (without a
    header, only that they are finite: the reader's range is chosen when it reads). ``out_of_range``: as
    :attr:`SchedulerConfig.out_of_range <snooze.SchedulerConfig.out_of_range>`; ``"accept"`` (a run whose
    scheduler accepts rewards outside its range) writes any finite reward, and such a log is replayed with a
    wider ``--reward-range``.
    """

    kind = "reward log"

    def __init__(
        self,
        path: str | os.PathLike[str],
        append: bool = False,
        header: RewardLogHeader | None = None,
        out_of_range: str = "raise",
    ) -> None:
        if header is not None and not isinstance(header, RewardLogHeader):
            raise ConfigError(f"header={type(header).__name__}: must be a snooze.logs.RewardLogHeader or None")
        if out_of_range not in ("raise", "accept"):
            raise ConfigError(f"out_of_range={out_of_range!r}: must be 'raise' or 'accept'")
        self.out_of_range = out_of_range
        if header is not None and out_of_range == "accept" and header.out_of_range != "accept":
            header = dataclasses.replace(header, out_of_range="accept")  # the header says what the lines may hold
        first_line = header.to_line() if header is not None else ""  # (before anything is opened or moved)
        on_disk = _on_disk(Path(path)) if append else None
        if on_disk is not None and header is not None:
            _check_agrees(header, on_disk, path)
        super().__init__(path, append)
        self._checks = on_disk.checks if on_disk is not None else LineChecks()
        self._line = on_disk.last_line if on_disk is not None else 0
        self.header = on_disk.header if on_disk is not None else header
        """The header the log has (``None``: a log without one)."""
        if header is not None and self.path.stat().st_size == 0:
            self._write_lines([first_line])
            self._line, self.header = 1, header
        if self.header is not None:
            self._checks.group_size, self._checks.size_from = self.header.group_size, "the header"

    def write(self, step: int, datasets: Sequence[str], ids: Sequence[Any], rewards: Any, tokens: Any = None) -> None:
        """One line per group: ``datasets[i]``, ``ids[i]``, ``rewards[i]`` (``[N, G]``) at ``step``, and
        ``tokens[i]`` (``[N]`` integers >= 0: the group's generated tokens, summed over its rollouts; ``None``:
        not known, the lines have no ``tokens``); all of them, or none and a :class:`~snooze.DataError` (see
        the class)."""
        lines, checks = self._lines(step, datasets, ids, rewards, tokens)
        self._write_lines(lines)
        self._checks, self._line = checks, self._line + len(lines)

    def _refused(self, line: int, field: str, what: str) -> DataError:
        return DataError(f"{self.path}, line {line} (not written), field {field!r}: {what}")

    def _lines(
        self, step: Any, datasets: Sequence[str], ids: Sequence[Any], rewards: Any, tokens: Any
    ) -> tuple[list[str], Any]:
        """The lines of a write and the checks' state after them, or the DataError of its first bad line."""
        first = self._line + 1
        what = step_problem(step)
        if what is not None:
            raise self._refused(first, "step", what)
        rows = _plain_rows(rewards)
        if len(rows) != len(datasets) or len(rows) != len(ids):
            raise DataError(
                f"{self.path}: {len(rows)} rows of rewards do not match {len(datasets)} datasets and {len(ids)} ids; "
                "pass one [G] row per group (nothing was written)"
            )
        counts = None if tokens is None else _token_counts(tokens)
        if counts is None and tokens is not None:
            raise DataError(
                f"{self.path}: tokens={tokens!r:.80}: must be one integer per group ([N], >= 0), or None when not "
                "known (nothing was written)"
            )
        if counts is not None and len(counts) != len(rows):
            raise DataError(
                f"{self.path}: {len(counts)} token counts do not match {len(rows)} rows of rewards; pass one count per "
                "group, or tokens=None when not known (nothing was written)"
            )
        checks = dataclasses.replace(self._checks, id_types=dict(self._checks.id_types))
        low, high = -math.inf, math.inf
        if self.header is not None and self.out_of_range == "raise":
            low, high = self.header.reward_range
        out = []
        for i, (name, pid, row) in enumerate(zip(datasets, ids, rows, strict=True)):
            plain = pid.item() if hasattr(pid, "item") else pid
            field, what = _first_problem(name, plain, row, low, high)
            if what is None and len(row) < 2:
                field, what = "rewards", "groups of 1 rollout have no spread; GRPO needs G >= 2"
            if what is None and counts is not None:
                field, what = "tokens", tokens_problem(counts[i])
            if what is None:
                field, what = checks.problem(int(step), name, plain, len(row), f"line {first + i}") or (field, None)
            if what is not None:
                raise self._refused(first + i, field, what)
            line = {"step": int(step), "dataset": name, "id": plain, "rewards": row}
            if counts is not None:
                line["tokens"] = int(counts[i])
            out.append(json.dumps(line) + "\n")
        return out, checks


def _plain_rows(rewards: Any) -> list[Any]:
    """The rows of ``rewards`` as Python values (numpy's and torch's numbers as Python's), nothing converted:
    a string stays a string, a bool a bool, for the reader's check to refuse."""
    if hasattr(rewards, "tolist"):  # a numpy array, a tensor
        return list(rewards.tolist())
    return [row.tolist() if hasattr(row, "tolist") else [_plain(v) for v in row] for row in rewards]


def _token_counts(tokens: Any) -> list[Any] | None:
    """``tokens`` as a list of Python values (numpy's and torch's as Python's, nothing converted, for
    :func:`~snooze.logs._line_checks.tokens_problem` to check), or ``None`` when it is not a sequence."""
    if hasattr(tokens, "tolist"):  # a numpy array, a tensor (a 0-d one is no sequence)
        tokens = tokens.tolist()
    if isinstance(tokens, (str, bytes, Mapping)) or not isinstance(tokens, Sequence):
        return None
    return [_plain(v) for v in tokens]


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _first_problem(name: Any, pid: Any, row: Any, low: float, high: float) -> tuple[str, str | None]:
    """``(field, what)`` of the first problem of a group's own fields (``what`` ``None``: none)."""
    for field, check, value in (("dataset", dataset_problem, name), ("id", id_problem, pid)):
        what = check(value)
        if what is not None:
            return field, what
    what = rewards_problem(row)
    if what is None:
        bad = first_bad_reward(np.asarray([row], dtype=np.float64), low, high, "the header's reward_range")
        what = bad[1] if bad is not None else None
    return "rewards", what


def _on_disk(path: Path) -> _Parsed | None:
    """The log a writer appends to, read as :func:`read_reward_log` reads it; ``None``: no log there yet."""
    if not path.is_file() or path.stat().st_size == 0:
        return None
    refuse_cut_short(path)
    return _parse_lines(read_lines(path, _canonical), str(path), None)


def _check_agrees(header: RewardLogHeader, on_disk: _Parsed, path: str | os.PathLike[str]) -> None:
    """A log appended to has the writer's group size and reward range, or its lines would not read as one log."""
    size = on_disk.checks.group_size
    if size is not None and size != header.group_size:
        raise DataError(
            f"{path}: the log has groups of {size} ({on_disk.checks.size_from}), but the header given says "
            f"{header.group_size}; a log holds one group size: write this run's groups to a new log"
        )
    if on_disk.header is not None and on_disk.header.reward_range != header.reward_range:
        raise DataError(
            f"{path}: the log's header has the reward range {list(on_disk.header.reward_range)}, but the header "
            f"given has {list(header.reward_range)}; write this run's groups to a new log"
        )
