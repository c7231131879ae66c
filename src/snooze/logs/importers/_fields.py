"""Every field an importer reads, checked in one place by one rule (as the reward log's reader checks its
lines, :mod:`snooze.logs._line_checks`): each check returns ``None`` for a good value or what is wrong with it,
and :func:`checked` names where (``<file>, line <n>, field '<f>'``). A value of a type the importer does not
expect is a :class:`~snooze.DataError`, never a ``TypeError`` or ``ValueError`` from deeper down.

- a prompt id, a group key (verl's ``uid``, prime-rl's ``group.id``): a string or an integer in int64
  (:func:`~snooze.logs._line_checks.id_problem`);
- a reward: a finite number, or ``true``/``false`` read as 1/0 (verl's older trainer dumps ``acc`` as a bool);
- a flag (prime-rl's ``ok``, ``trainable``): a real JSON bool, never the string ``"false"``;
- a number inside a name (a step file ``12.jsonl``, a uid's ``_<session>_<index>``): ASCII digits only
  (``re.ASCII``, never Unicode digits such as ``١``), at most 19 of them, matched whole (``fullmatch``: no
  trailing newline).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from snooze._kit.checks import INT64_MAX, finite_float, shown
from snooze.core.errors import DataError

__all__ = ["checked", "reward_problem", "reward_value", "flag_problem", "name_number", "DIGITS"]

DIGITS = "[0-9]+"
"""A number in a name: ASCII digits (patterns are compiled with ``re.ASCII`` and matched with ``fullmatch``)."""


def checked(value: Any, problem: Callable[[Any], str | None], at: str, field: str) -> Any:
    """``value``, or the :class:`DataError` of ``problem(value)`` naming the dump's line and field."""
    what = problem(value)
    if what is not None:
        raise DataError(f"{at}, field {field!r}: {what}")
    return value


def reward_problem(value: Any) -> str | None:
    """A reward is a finite number, or a JSON bool (read as 1 or 0)."""
    if isinstance(value, bool) or finite_float(value) is not None:
        return None
    return f"{shown(value)} is not a finite number (or true/false)"


def reward_value(value: Any, at: str, field: str) -> float:
    """``value`` as a reward (:func:`reward_problem`), or its :class:`DataError`."""
    checked(value, reward_problem, at, field)
    return float(value)


def flag_problem(value: Any) -> str | None:
    """A flag is ``true`` or ``false`` (a string ``"false"`` is not false)."""
    return None if isinstance(value, bool) else f"{shown(value)} is not true or false"


def name_number(text: str, at: str, what: str) -> int:
    """The number ``text`` (ASCII digits, from a name matched by a pattern of :data:`DIGITS`) as an int;
    more digits than int64 holds is a :class:`DataError` (``int()`` of 5,000 digits raised ``ValueError``)."""
    if len(text) > 19 or int(text) > INT64_MAX:
        value = text if len(text) <= 30 else f"<a number of {len(text):,} digits>"
        raise DataError(f"{at}: {what}, {value} is not an integer in [0, 2**63 - 1]")
    return int(text)


def pattern(text: str) -> re.Pattern[str]:
    """A name pattern: ASCII classes only (``re.ASCII``); match it with ``fullmatch``."""
    return re.compile(text, re.ASCII)
