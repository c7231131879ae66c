"""What a reward log's group line must hold: the one source of truth for its reader, its writer and the
importers (``docs/reward-log.md``).

Each check is a small pure function that returns ``None`` for a good value or what is wrong with it (the
end of the message); the caller names where (``<file>, line <n>, field '<f>'``: the log's line for the
reader, the line not written for the writer, the dump's file, line and field for an importer), so a value
refused anywhere is refused with the same words. :class:`LineChecks` holds what earlier lines decide: the
group size, the last step, and the type of each dataset's ids.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from snooze._kit.checks import INT64_MAX, INT64_MIN, finite_float, is_int, lone_surrogate, shown

__all__ = [
    "step_problem",
    "dataset_problem",
    "id_problem",
    "rewards_problem",
    "tokens_problem",
    "first_bad_reward",
    "LineChecks",
]


def _surrogate(text: str) -> str | None:
    bad = lone_surrogate(text)
    if bad is None:
        return None
    return f"{text!r} holds a lone surrogate ({bad}), which is not text; fix the encoding of its source"


def step_problem(step: Any) -> str | None:
    """A step is an integer in ``[0, 2**63 - 1]`` (steps are held as int64)."""
    if not is_int(step) or not 0 <= step <= INT64_MAX:
        return f"{shown(step)} is not an integer in [0, 2**63 - 1]"
    return None


def dataset_problem(name: Any) -> str | None:
    """A dataset is a non-empty string that is text (no lone surrogate: no UTF-8 file can hold one)."""
    if not isinstance(name, str) or not name:
        return f"{shown(name)} is not a non-empty string"
    return _surrogate(name)


def id_problem(pid: Any) -> str | None:
    """An id is a string (text) or an integer that fits in int64, as a scheduler holds it."""
    if isinstance(pid, bool) or not isinstance(pid, (str, int)):
        return f"{shown(pid)} is not a string or an integer"
    if isinstance(pid, int):
        if not INT64_MIN <= pid <= INT64_MAX:  # no scheduler issues one: its ids are int64
            return f"{shown(pid)} does not fit in a signed 64-bit integer; use string ids"
        return None
    return _surrogate(pid)


def rewards_problem(rewards: Any) -> str | None:
    """Rewards are a non-empty list of numbers, each one a float can hold (finiteness and the range are
    checked over the whole log: :func:`first_bad_reward`)."""
    if not isinstance(rewards, list) or not rewards:
        return "must be a non-empty list of numbers, one per rollout"
    for r, value in enumerate(rewards):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"rollout {r}: {shown(value)} is not a number"
        if isinstance(value, int) and finite_float(value) is None:  # (NaN and infinities: first_bad_reward)
            return f"rollout {r}: an integer of {value.bit_length()} bits is too large for a float"
    return None


def tokens_problem(tokens: Any) -> str | None:
    """A group's ``tokens`` (optional) is an integer in ``[0, 2**63 - 1]``: the completion tokens its rollouts
    generated, summed (as ``report(..., tokens=)`` takes them)."""
    if not is_int(tokens) or not 0 <= tokens <= INT64_MAX:
        return (
            f"{shown(tokens)} is not an integer in [0, 2**63 - 1] (the group's generated tokens; leave it out "
            "when not known)"
        )
    return None


def first_bad_reward(
    rewards: np.ndarray, low: float, high: float, hint: str = "set --reward-range?"
) -> tuple[int, str] | None:
    """``(group, what)`` of the first reward of ``rewards`` (``float64 [N, G]``) that is not finite or lies
    outside ``[low, high]``, or ``None``. ``hint``: what to do, in the message's closing brackets."""
    bad = ~np.isfinite(rewards) | (rewards < low) | (rewards > high)
    if not bad.any():
        return None
    g, r = (int(i) for i in np.argwhere(bad)[0])
    value = float(rewards[g, r])
    kind = "not finite" if not math.isfinite(value) else f"outside the reward range [{low}, {high}]"
    return g, f"rollout {r}: {value!r} is {kind} ({hint})"


@dataclass
class LineChecks:
    """What a line is checked against that the lines before it decided, line by line in file order."""

    group_size: int | None = None
    """G: every line has this many rewards (``None``: the next line's size sets it)."""

    size_from: str = ""
    """Where G came from, for messages (``the header``, ``--group-size``, ``line 2``)."""

    last_step: int | None = None
    """The step of the last line (steps never decrease down the file)."""

    id_types: dict[str, tuple[type, Any, str]] = field(default_factory=dict)
    """Dataset -> the type of its first id, that id, and where it was (a dataset's ids are all integers or all
    strings, as a scheduler's are: ``0`` and ``"0"`` would be two prompts)."""

    def problem(self, step: int, dataset: str, pid: str | int, size: int, where: str) -> tuple[str, str] | None:
        """``(field, what)`` for a line (its fields already checked one by one) that the lines before it rule
        out, or ``None``; a good line is recorded. ``where``: the line, for later messages."""
        if self.group_size is None:
            self.group_size, self.size_from = size, where
        if size != self.group_size:
            return "rewards", f"{size} rewards, but {self.size_from} has {self.group_size}: groups must all be size G"
        if self.last_step is not None and step < self.last_step:
            return "step", (
                f"{step} after step {self.last_step}: lines must be in generation order "
                "(a resumed run that re-logs steps should start a new log or drop the repeated steps)"
            )
        first = self.id_types.setdefault(dataset, (type(pid), pid, where))
        if first[0] is not type(pid):
            kind = "an integer" if isinstance(pid, int) else "a string"
            return "id", (
                f"{shown(pid)} is {kind}, but dataset {dataset!r} has the id {shown(first[1])} at {first[2]}: a "
                "dataset's ids must be all integers or all strings (as a scheduler holds them; 0 and '0' would be "
                "two prompts)"
            )
        self.last_step = step
        return None
