"""Checks of user input shared by the config, the scheduler's public methods and the public helpers.

One rule everywhere: a value is taken as it is or refused with a :class:`~snooze.ConfigError` that
names it, says what it got and what is allowed. Numbers of numpy's types are numbers (``np.int64(8)``
is an integer, ``np.float32(0.9)`` a real number) and are stored as Python ``int``/``float``, which
loses nothing; booleans are not numbers here (``True`` as a batch size is a mistake), and nothing is
clamped, rounded or parsed from a string.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snooze.core.errors import ConfigError

__all__ = ["as_int", "as_real", "check_weights", "check_reward_range", "check_thresholds", "check_band", "INT64_MIN", "INT64_MAX"]

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # integer ids and steps are held as int64: the range they must fit


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def as_int(value: Any, what: str, minimum: int | None = None) -> int:
    """``value`` as a Python ``int`` (any integer type but ``bool``), at least ``minimum``."""
    if _is_bool(value) or not isinstance(value, numbers.Integral) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ConfigError(f"{what}={value!r}: must be an integer{bound}")
    return int(value)


def as_real(value: Any, what: str, low: float = -math.inf, high: float = math.inf, allowed: str = "") -> float:
    """``value`` as a finite Python ``float`` (any real number type but ``bool``) in ``[low, high]``."""
    ok = not _is_bool(value) and isinstance(value, numbers.Real) and math.isfinite(value) and low <= value <= high
    if not ok:
        raise ConfigError(f"{what}={value!r}: must be {allowed or _interval(low, high)}")
    return float(value)


def _interval(low: float, high: float) -> str:
    if math.isinf(low) and math.isinf(high):
        return "a finite number"
    if math.isinf(high):
        return f"a finite number >= {low:g}"
    return f"a number in [{low:g}, {high:g}]"


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
        raise ConfigError(f"{what}: at least one dataset needs a weight above 0, and their sum must be finite (got {total!r})")
    return out


def check_reward_range(rr: Any, what: str = "reward_range") -> tuple[float, float]:
    """``(low, high)``: two finite numbers, ``low < high``, whose width ``high - low`` is finite too
    (thresholds are fractions of the width: an infinite one would class every group too hard)."""
    ok = isinstance(rr, (tuple, list)) and len(rr) == 2 and all(not _is_bool(x) and isinstance(x, numbers.Real) for x in rr)
    if ok:
        low, high = float(rr[0]), float(rr[1])
        ok = math.isfinite(low) and math.isfinite(high) and low < high and math.isfinite(high - low)
    if not ok:
        raise ConfigError(f"{what}={rr!r}: must be (low, high) with finite low < high and a finite width high - low")
    return low, high


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
    ok = isinstance(band, (tuple, list)) and len(band) == 2 and all(not _is_bool(x) and isinstance(x, numbers.Real) for x in band)
    if ok:
        lo, hi = float(band[0]), float(band[1])
        ok = 0.0 <= lo < hi <= 1.0  # NaN fails too
    if not ok:
        raise ConfigError(f"{what}={band!r}: must be None (off) or (lo, hi), fractions of the reward range with 0 <= lo < hi <= 1")
    return lo, hi
