"""Checked fields of a JSON object read from a file: the one way every reader outside the core takes a field.

:func:`snooze._kit.json.parse_json` guarantees JSON (no integer of more than 4,300 digits, no nesting
deeper than 64 levels, UTF-8); what the JSON holds is the reader's to check. A :class:`Record` wraps one
parsed object and hands out its fields only as the type they must be, or raises the reader's error class
(a :class:`~snooze.SnoozeError`) naming the file, the line where there is one, and the field:

- an integer is an ``int`` and not a ``bool`` (``true`` is not 1, ``0.9`` not 0, ``"3"`` not 3), within
  the bounds given (by default ``[0, 2**63 - 1]``: what a step or a ticket held as int64 can be);
- a real number is finite as a float (:func:`~snooze._kit.checks.finite_float`: no ``NaN``, no
  infinity, no ``10**400``), and not a ``bool``;
- a string is a non-empty ``str`` with no lone surrogate (it could not be written back as UTF-8);
- a missing field is named as missing.

Messages read ``<where>, field 'a.b': <what is wrong>; <fix>``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from snooze._kit.checks import INT64_MAX, finite_float, is_int, lone_surrogate, shown
from snooze._kit.errors import SnoozeError

__all__ = ["Record", "kind_of"]


def kind_of(value: Any) -> str:
    """What a JSON value is, in JSON's words (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


class Record:
    """One JSON object read from ``where`` (``"run/summary.json"``, ``"metrics.jsonl, line 3"``).

    ``error``: the reader's error class; ``fix``: a sentence appended to every message; ``path``: the
    dotted field path of a nested object (:meth:`obj`)."""

    def __init__(self, value: Any, where: str, error: type[SnoozeError], fix: str = "", path: str = "") -> None:
        self.where, self.error, self.fix, self.path = where, error, fix, path
        if not isinstance(value, dict):
            raise self._fail(None, f"expected a JSON object, got {kind_of(value)}")
        self.value: dict[str, Any] = value

    def _name(self, key: str | None) -> str | None:
        if key is None:
            return self.path or None
        return f"{self.path}.{key}" if self.path else key

    def _fail(self, key: str | None, what: str) -> SnoozeError:
        name = self._name(key)
        field = f", field {name!r}" if name else ""
        return self.error(f"{self.where}{field}: {what}" + (f"; {self.fix}" if self.fix else ""))

    def fail(self, key: str | None, what: str) -> SnoozeError:
        """The reader's error about field ``key`` (``None``: the object itself)."""
        return self._fail(key, what)

    def has(self, key: str) -> bool:
        return key in self.value

    def keys(self) -> list[str]:
        return list(self.value)

    def raw(self, key: str) -> Any:
        """The field as it is (missing: an error)."""
        if key not in self.value:
            raise self._fail(key, "missing")
        return self.value[key]

    def integer(self, key: str, low: int = 0, high: int = INT64_MAX) -> int:
        """An integer field in ``[low, high]``."""
        return self.check_int(key, self.raw(key), low, high)

    def check_int(self, key: str, value: Any, low: int = 0, high: int = INT64_MAX) -> int:
        if not is_int(value) or not low <= value <= high:
            raise self._fail(key, f"{shown(value)} is not an integer in [{low}, {high}]")
        return int(value)

    def number(self, key: str, low: float = -math.inf, high: float = math.inf) -> float:
        """A finite real-number field in ``[low, high]``."""
        return self.check_real(key, self.raw(key), low, high)

    def check_real(self, key: str, value: Any, low: float = -math.inf, high: float = math.inf) -> float:
        out = finite_float(value)
        if out is None or not low <= out <= high:
            bounds = "" if math.isinf(low) and math.isinf(high) else f" in [{low:g}, {high:g}]"
            raise self._fail(key, f"{shown(value)} is not a finite number{bounds}")
        return out

    def text(self, key: str) -> str:
        """A non-empty string field."""
        return self.check_text(key, self.raw(key))

    def check_text(self, key: str, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise self._fail(key, f"{shown(value)} is not a non-empty string")
        bad = lone_surrogate(value)
        if bad is not None:
            raise self._fail(key, f"{value!r} holds a lone surrogate ({bad}), which is not text")
        return value

    def flag(self, key: str) -> bool:
        """A ``true``/``false`` field."""
        value = self.raw(key)
        if not isinstance(value, bool):
            raise self._fail(key, f"{shown(value)} is not true or false")
        return value

    def array(self, key: str) -> list[Any]:
        """An array field."""
        value = self.raw(key)
        if not isinstance(value, list):
            raise self._fail(key, f"expected an array, got {kind_of(value)}")
        return value

    def numbers(self, key: str, low: float = -math.inf, high: float = math.inf) -> list[float]:
        """A non-empty array of finite real numbers."""
        values = self.array(key)
        if not values:
            raise self._fail(key, "is an empty array")
        return [self.check_real(f"{key}[{i}]", v, low, high) for i, v in enumerate(values)]

    def obj(self, key: str) -> Record:
        """An object field, as a :class:`Record` whose messages name ``key`` as the path."""
        return Record(self.raw(key), self.where, self.error, self.fix, self._name(key) or "")

    def mapping(self) -> Mapping[str, Any]:
        return self.value
