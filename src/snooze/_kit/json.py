"""The one JSON reader of every file the library reads (commit records, states' metadata, run logs,
curricula, datasets, baseline completions, the trainer's records).

Python's ``json`` lets hostile text escape as errors that are not about JSON: an integer of more
than 4,300 digits is a ``ValueError`` (Python's limit on converting long digit strings), nesting
thousands deep a ``RecursionError``. :func:`parse_json` turns every way a text can fail to be JSON
into the caller's error class (a :class:`~snooze.SnoozeError`), naming where the text came from: a
file, or a file and a line. :func:`read_json` reads a whole file so (only a regular file is read).
Nesting is limited to :data:`MAX_DEPTH` levels, which no file of snooze comes near, so what is read
can be walked, compared and written again without running out of stack.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

from snooze._kit.errors import SnoozeError
from snooze._kit.files import read_regular

__all__ = ["parse_json", "read_json", "plain_problem", "same_version", "MAX_DEPTH"]

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted (snooze's own files nest a few levels deep)."""


def parse_json(text: str | bytes, where: str, error: type[SnoozeError], fix: str = "") -> Any:
    """The value of JSON ``text`` (``bytes`` must be UTF-8), or ``error(f"{where}: ...")`` saying why not.

    ``where`` names the source (``"rewards.jsonl, line 3"``); ``fix``, a sentence, is appended."""
    tail = f"; {fix}" if fix else ""
    try:
        text = text.decode("utf-8") if isinstance(text, bytes) else text  # (json.loads(bytes) would take UTF-16 too)
        value = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise error(
            f"{where}: the key {exc.args[0]!r} appears twice in one object (which one is meant?){tail}"
        ) from None
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}, column {exc.colno}" if "\n" in exc.doc.rstrip() else f"column {exc.colno}"
        msg = exc.msg.removesuffix(" at")  # ("Invalid control character at": its position follows)
        raise error(f"{where}: not valid JSON ({msg} at {at}){tail}") from None
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start}){tail}") from None
    except RecursionError:
        raise error(f"{where}: JSON nested deeper than {MAX_DEPTH} levels{tail}") from None
    except ValueError:  # int("<more than sys.get_int_max_str_digits() digits>")
        raise error(f"{where}: holds an integer of more than {_digits()} digits{tail}") from None
    if _nesting_may_exceed(text) and _depth(value) > MAX_DEPTH:
        raise error(f"{where}: JSON nested deeper than {MAX_DEPTH} levels{tail}")
    return value


def read_json(path: str | os.PathLike[str], error: type[SnoozeError], fix: str = "", limit: int = -1) -> Any:
    """The JSON value of file ``path`` (a regular file: see :func:`snooze._kit.files.open_regular`),
    or ``error`` naming it: the file cannot be read, is over ``limit`` bytes (when given), or is not JSON."""
    tail = f"; {fix}" if fix else ""
    try:
        raw = read_regular(path, limit + 1 if limit >= 0 else -1)
    except OSError as exc:
        raise error(f"{path}: cannot be read ({exc.strerror or exc}){tail}") from None
    if 0 <= limit < len(raw):
        raise error(f"{path}: over {limit} bytes, so not the file expected here{tail}")
    return parse_json(raw, str(path), error, fix)


def _digits() -> int:
    return getattr(sys, "get_int_max_str_digits", lambda: 4300)()


def _nesting_may_exceed(text: str | bytes) -> bool:
    """A cheap bound: nesting deeper than ``MAX_DEPTH`` needs more than that many brackets."""
    return text.count("[") + text.count("{") > MAX_DEPTH


def _depth(value: Any) -> int:
    """Deepest nesting of lists and dicts in ``value``, walked without recursion."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, level = todo.pop()
        if isinstance(node, (list, dict)):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:  # deeper than the limit is known to be too deep
                todo.extend((child, level + 1) for child in (node.values() if isinstance(node, dict) else node))
    return deepest


def plain_problem(value: Any, where: str) -> str | None:
    """Where ``value`` holds something the saved format does not give back as it was, ``None`` when nothing:
    only dicts with string keys, lists, strings, booleans, integers, finite floats and ``None`` are plain (a
    numpy number or array, a tuple, NaN are not)."""
    todo = [(value, where)]
    while todo:
        item, at = todo.pop()
        kind = type(item)
        if kind is dict:
            bad = next((k for k in item if type(k) is not str), None)
            if bad is not None:
                return f"{at} has the key {bad!r} ({type(bad).__name__}; keys must be strings)"
            todo += [(v, f"{at}[{k!r}]") for k, v in item.items()]
        elif kind is list:
            todo += [(v, f"{at}[{i}]") for i, v in enumerate(item)]
        elif kind is float and not math.isfinite(item):
            return f"{at} is {item!r}, not a finite number"
        elif kind not in (str, int, float, bool, type(None)):
            return f"{at} is a {kind.__module__}.{kind.__qualname__}"
    return None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict; a key given twice (Python's ``json`` keeps the last silently) is refused."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def same_version(value: Any, version: int) -> bool:
    """Whether a file's ``version`` field is ``version`` itself: an integer, never ``true`` or ``1.0``."""
    return type(value) is int and value == version
