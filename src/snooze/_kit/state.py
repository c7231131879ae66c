"""The state protocol every stateful piece of snooze follows (the scheduler's parts, the curriculum), and the
checks their loaders share.

``state_dict()`` returns a snapshot in plain data: JSON-safe values and numpy arrays, sharing no
memory with the object. ``load_state_dict(state)`` checks all of it before it changes anything and
raises :class:`~snooze.StateError` saying what is wrong; only then does it take the state over. So
a component that refuses a state is left exactly as it was (the pattern of torchdata's ``Stateful``
and mosaicml streaming's dataset state). The scheduler composes its components' states; the file
layout they are saved in is :mod:`snooze.core._state`'s business, not theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from snooze._kit.checks import INT64_MAX, INT64_MIN, is_int, shown
from snooze._kit.errors import StateError

__all__ = ["state_int", "state_ints", "state_reals", "state_array", "check_rows"]


def _int64_bounds(low: int, high: int | None) -> tuple[int, int]:
    """``[low, high]`` within int64 (``high`` ``None``: up to int64's largest). Every integer of a state is
    held as, or added up in, an ``int64``: a larger one would wrap or raise ``OverflowError`` later (at the
    next step, or in the next save's file), so it is refused on load, like any other out of range."""
    return max(low, INT64_MIN), INT64_MAX if high is None else min(high, INT64_MAX)


def state_int(value: Any, what: str, low: int = 0, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (and in int64), or a :class:`StateError` naming ``what``."""
    low, high = _int64_bounds(low, high)
    if not is_int(value) or not low <= value <= high:
        raise StateError(f"{what}={shown(value)} is out of range [{low}, {high}]; the state is corrupt")
    return int(value)


def _shaped(value: Any, what: str, shape: tuple[int | None, ...], kinds: str) -> np.ndarray:
    arr = np.asarray(value)
    fits = arr.ndim == len(shape) and all(want is None or got == want for got, want in zip(arr.shape, shape))
    if not fits or (arr.size and arr.dtype.kind not in kinds):  # an empty JSON list reads as float64: let it be
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        of = "integers" if kinds == "iu" else "numbers"
        raise StateError(
            f"array {what} has shape {arr.shape} / {arr.dtype}, expected {want} of {of}; the state is corrupt"
        )
    return arr


def state_ints(
    value: Any, what: str, shape: tuple[int | None, ...], low: int = 0, high: int | None = None
) -> np.ndarray:
    """``value`` as an ``int64`` array of ``shape`` (``None``: any length) with values in ``[low, high]`` (and in
    int64: a ``uint64`` value above it is refused, never wrapped), or a :class:`StateError`. Only integers: a
    float or a string is never cut or parsed to one."""
    arr = _shaped(value, what, shape, "iu")
    low, high = _int64_bounds(low, high)
    if arr.size and (int(arr.min()) < low or int(arr.max()) > high):
        raise StateError(f"array {what} holds values outside [{low}, {high}]; the state is corrupt")
    return arr.astype(np.int64)


def state_reals(
    value: Any, what: str, shape: tuple[int | None, ...], low: float = -np.inf, high: float = np.inf
) -> np.ndarray:
    """``value`` as a finite ``float64`` array of ``shape`` with values in ``[low, high]``, or a :class:`StateError`."""
    arr = _shaped(value, what, shape, "iuf").astype(np.float64)
    if not np.isfinite(arr).all() or (arr.size and (arr.min() < low or arr.max() > high)):
        raise StateError(
            f"array {what} holds values that are not finite or outside [{low:g}, {high:g}]; the state is corrupt"
        )
    return arr


def state_array(value: Any, what: str, shape: tuple[int, ...], dtype: Any, copy: bool = True) -> np.ndarray:
    """``value`` (a copy unless ``copy=False``), which must be an array of exactly ``shape`` and ``dtype``."""
    arr = np.asarray(value)
    if arr.shape != shape or arr.dtype != np.dtype(dtype):
        raise StateError(f"array {what} has shape {arr.shape} / {arr.dtype}, expected {shape} / {np.dtype(dtype)}")
    return arr.copy() if copy else arr


def check_rows(ds: np.ndarray, rows: np.ndarray, sizes: Sequence[int], what: str) -> None:
    """Every ``(ds[i], rows[i])`` names a prompt of a dataset of these ``sizes``."""
    if ds.shape[0] == 0:
        return
    if ds.min() < 0 or ds.max() >= len(sizes):
        raise StateError(f"{what} names a dataset index outside 0..{len(sizes) - 1}; the state is corrupt")
    if rows.min() < 0 or (rows >= np.asarray(sizes)[ds]).any():
        raise StateError(f"{what} names a row beyond its dataset; the state is corrupt")
