"""Checks of user input shared by every package: one rule per kind of value, each message worded once
(:func:`as_int`: an integer in a range; :func:`as_real`: a finite number in a range, a rate above 0, a
probability; :func:`as_bool`; :func:`as_path`; :func:`as_list`: a list of names or numbers; the reward range,
the thresholds, the band and the weights). A caller names the value (``"GRPOConfig.lr"``, ``"save(path)"``)
and writes no check of its own.

One rule everywhere: a value is taken as it is or refused with a :class:`~snooze.ConfigError` that
names it, says what it got and what is allowed. Numbers of numpy's types are numbers (``np.int64(8)``
is an integer, ``np.float32(0.9)`` a real number) and are stored as Python ``int``/``float``, which
loses nothing; booleans are not numbers here (``True`` as a batch size is a mistake), and nothing is
clamped, rounded or parsed from a string. A real number is one :func:`finite_float` takes: an integer
too large for a float (``10**400``) is refused like infinity, never an ``OverflowError``. The readers of
files (logs, curricula, baseline completions) test their numbers with it too.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snooze._kit.errors import ConfigError

__all__ = [
    "is_int",
    "as_int",
    "as_real",
    "finite_float",
    "shown",
    "lone_surrogate",
    "check_weights",
    "check_reward_range",
    "check_thresholds",
    "check_band",
    "as_path",
    "as_list",
    "as_bool",
    "INT64_MIN",
    "INT64_MAX",
]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # integer ids and steps are held as int64: the range they must fit


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer: any integer type (``int``, numpy's) but ``bool``. The one test of
    an integer in snooze (config fields, state, logs, curricula, adapters' options)."""
    return isinstance(value, numbers.Integral) and not _is_bool(value)


def finite_float(value: Any) -> float | None:
    """``value`` as a finite Python ``float``, or ``None`` when it is not a real number (a ``bool``, a
    string, ``None``...), or is not finite as a float: NaN, infinite, or an integer beyond the largest
    float (``10**400``, where ``float()`` and ``math.isfinite`` raise ``OverflowError``). The one test of
    a real number for every value snooze takes from a user or a file."""
    if _is_bool(value) or not isinstance(value, numbers.Real):
        return None
    try:
        out = float(value)
    except (OverflowError, ValueError, TypeError):
        return None
    return out if math.isfinite(out) else None


def as_int(value: Any, what: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """``value`` as a Python ``int`` (any integer type but ``bool``) in ``[minimum, maximum]`` (each bound
    where given)."""
    if not is_int(value) or (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        huge = maximum is not None and is_int(value) and value > maximum
        if maximum == INT64_MAX and not huge:  # the storage limit is named only to the value it stops
            maximum = None
        if minimum is not None and maximum is not None:
            bound = f" in [{minimum}, {maximum}]"
        else:
            bound = f" >= {minimum}" if minimum is not None else f" <= {maximum}" if maximum is not None else ""
        raise ConfigError(f"{what}={shown(value)}: must be an integer{bound}")
    return int(value)


def as_real(
    value: Any, what: str, low: float = -math.inf, high: float = math.inf, allowed: str = "", above: bool = False
) -> float:
    """``value`` as a finite Python ``float`` (any real number type but ``bool``: :func:`finite_float`) in
    ``[low, high]`` (``(low, high]`` where ``above``: ``as_real(lr, "lr", 0, above=True)`` is a rate > 0)."""
    out = finite_float(value)
    if out is None or not (low < out if above else low <= out) or not out <= high:
        raise ConfigError(f"{what}={shown(value)}: must be {allowed or _interval(low, high, above)}")
    return out


def as_bool(value: Any, what: str) -> bool:
    """``value`` as a Python ``bool`` (``True``, ``False`` or numpy's), never read from a number or a string
    (``"no"`` is true in Python); else a :class:`ConfigError` ``<what>=<value>: must be True or False``
    (``f(x=<value>)`` for a ``what`` of ``f(x)``)."""
    if not _is_bool(value):
        raise ConfigError(f"{_given(what, value)}: must be True or False")
    return bool(value)


def _given(what: str, value: Any) -> str:
    """``what=value``, or ``f(x=value)`` for a ``what`` of ``f(x)``: the argument as the caller wrote it."""
    return f"{what[:-1]}={shown(value)})" if what.endswith(")") else f"{what}={shown(value)}"


def as_path(value: Any, what: str) -> Path:
    """``value`` as a :class:`~pathlib.Path`: a ``str`` or an ``os.PathLike`` of ``str``, not empty and without a
    NUL character. ``Path("")`` is the current folder (a checkpoint saved there by mistake), bytes are not a
    path here, and a NUL would be an ``OSError``/``ValueError`` deep in the file calls; each is refused
    with a :class:`~snooze.ConfigError` naming ``what`` (``"save(path)"``)."""
    try:
        text = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    except TypeError:  # an os.PathLike whose __fspath__ returns neither str nor bytes
        text = None
    if not isinstance(text, str):
        raise ConfigError(
            f"{what}={shown(value)}: must be a path, a str or a pathlib.Path (got {type(value).__name__})"
        )
    if not text:
        raise ConfigError(f"{what}='': an empty path; pass a directory path ('.' for the current folder)")
    if "\0" in text:
        raise ConfigError(f"{what}={text!r}: a path cannot hold a NUL character ('\\0')")
    return Path(text)


def as_list(value: Any, what: str, kinds: str, one: str, accepts: Callable[[Any], bool], hint: str = "") -> list[Any]:
    """``value`` read once into a list: any iterable but a str, bytes or mapping (each of those is one thing,
    not a list: ``"ab"`` would be ``["a", "b"]``), every element of which ``accepts``. Else a
    :class:`ConfigError`: ``<what>=<value>: must be a list of <kinds><hint>`` (``f(x=<value>)`` for a ``what``
    of ``f(x)``), or ``<what>: <element> is not <one><hint>``."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise ConfigError(f"{_given(what, value)}: must be a list of {kinds}{hint}")
    out = list(value)
    for element in out:
        if not accepts(element):
            raise ConfigError(f"{what}: {shown(element)} is not {one}{hint}")
    return out


def shown(value: Any) -> str:
    """``repr(value)``, shortened for an integer of many digits (a message must stay one readable line)."""
    if is_int(value) and abs(int(value)) >= 10**30:
        return f"<an integer of {abs(int(value)).bit_length()} bits>"  # (repr of over 4,300 digits raises ValueError)
    return repr(value)


def _interval(low: float, high: float, above: bool = False) -> str:
    if math.isinf(low) and math.isinf(high):
        return "a finite number"
    if math.isinf(high):
        return f"a finite number {'>' if above else '>='} {low:g}"
    return f"a number in {'(' if above else '['}{low:g}, {high:g}]"


def lone_surrogate(text: str) -> str | None:
    """The first lone surrogate in ``text`` as ``"U+D800"``, or ``None``. JSON's ``"\\ud800"`` decodes to
    one; no UTF-8 file can hold it, so a name or an id holding one could never be written to a log."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"U+{ord(text[exc.start]):04X}"
    return None


def check_weights(weights: Any, names: Sequence[str] | None = None, what: str = "weights") -> dict[str, float]:
    """Dataset weights by name: a non-empty mapping of ``str`` to finite numbers ``>= 0`` with a positive,
    finite sum (and, given ``names``, naming only those datasets). Returns them as ``{name: float}``."""
    if not isinstance(weights, Mapping) or not weights:
        raise ConfigError(f"{what}={weights!r}: must be a non-empty mapping of dataset name to weight (or None: equal)")
    out: dict[str, float] = {}
    for name, w in weights.items():
        if not isinstance(name, str):
            raise ConfigError(f"{what}: key {name!r} is not a dataset name (a string)")
        out[name] = as_real(w, f"{what}[{name!r}]", 0.0, allowed="a finite number >= 0")
    if names is not None:
        unknown = sorted(set(out) - set(names))
        if unknown:
            raise ConfigError(f"{what} name unknown dataset(s) {unknown}; datasets are {list(names)}")
    total = sum(out.values())  # (math.fsum raises OverflowError where this gives inf, refused below)
    if not total > 0 or not math.isfinite(total):
        raise ConfigError(
            f"{what}: at least one dataset needs a weight above 0, and their sum must be finite (got {total!r})"
        )
    return out


def check_reward_range(rr: Any, what: str = "reward_range") -> tuple[float, float]:
    """``(low, high)``: two finite numbers, ``low < high``, whose width ``high - low`` is finite too
    (thresholds are fractions of the width: an infinite one would class every group too hard)."""
    pair = [finite_float(x) for x in rr] if isinstance(rr, (tuple, list)) and len(rr) == 2 else [None]
    if None in pair or not pair[0] < pair[1] or not math.isfinite(pair[1] - pair[0]):  # type: ignore[operator]
        given = f"({', '.join(shown(x) for x in rr)})" if isinstance(rr, (tuple, list)) else repr(rr)
        raise ConfigError(f"{what}={given}: must be (low, high) with finite low < high and a finite width high - low")
    return pair[0], pair[1]  # type: ignore[return-value]


def check_thresholds(easy: Any, hard: Any, signal_tol: Any) -> tuple[float, float, float]:
    """The classification thresholds: ``0 <= hard < easy <= 1`` (fractions of the reward range) and
    ``0 <= signal_tol < 0.5`` (a fraction of the rewards' size)."""
    easy_f = as_real(easy, "easy_threshold", 0.0, 1.0, "a fraction of the reward range in [0, 1]")
    hard_f = as_real(hard, "hard_threshold", 0.0, 1.0, "a fraction of the reward range in [0, 1]")
    if hard_f >= easy_f:
        raise ConfigError(f"hard_threshold={hard_f} must be below easy_threshold={easy_f}")
    tol = as_real(signal_tol, "signal_tol", 0.0, allowed="in [0, 0.5) (0: any spread is signal)")
    if tol >= 0.5:
        raise ConfigError(f"signal_tol={signal_tol!r}: must be in [0, 0.5) (0: any spread is signal)")
    return easy_f, hard_f, tol


def check_band(band: Any, what: str = "reward_band") -> tuple[float, float] | None:
    """``None``, or ``(lo, hi)``: two fractions of the reward range with ``0 <= lo < hi <= 1``."""
    if band is None:
        return None
    pair = [finite_float(x) for x in band] if isinstance(band, (tuple, list)) and len(band) == 2 else [None]
    ok = None not in pair
    if ok:
        lo, hi = pair
        ok = 0.0 <= lo < hi <= 1.0
    if not ok:
        raise ConfigError(
            f"{what}={band!r}: must be None (off) or (lo, hi), fractions of the reward range with 0 <= lo < hi <= 1"
        )
    return lo, hi
