"""Deterministic splitting of counts among weighted datasets (SPEC section 4, "Mixing").

Largest-remainder rounding (the Hamilton method): every share is within one of its exact value
and the shares add up exactly. Ties go to the dataset listed first, so results never depend on
hash order or floating-point luck across machines.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["largest_remainder", "interleave", "interleave_order"]


def largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Split ``total`` into integer shares proportional to ``weights`` (``>= 0``). Returns int64 ``[D]``.

    >>> largest_remainder(5, np.array([1.0, 1.0])).tolist()
    [3, 2]
    """
    w = [float(x) for x in np.asarray(weights, dtype=np.float64).tolist()]  # a handful of datasets: plain Python is faster
    total_w = sum(w)
    if total <= 0 or total_w <= 0:
        return np.zeros(len(w), dtype=np.int64)
    exact = [total * x / total_w for x in w]
    out = [math.floor(e + 1e-9) for e in exact]  # 1e-9 absorbs 2.9999999 from rounding of exact thirds etc.
    rest = total - sum(out)
    if rest > 0:
        order = sorted(range(len(w)), key=lambda i: -(exact[i] - out[i]))  # stable: ties to the first listed
        for i in order[:rest]:
            out[i] += 1
    return np.array(out, dtype=np.int64)


def interleave(counts: np.ndarray) -> np.ndarray:
    """Dataset index of each slot when ``counts[d]`` slots go to dataset ``d``, spread evenly.

    Dataset ``d``'s j-th slot sits at fraction ``(j + 0.5) / counts[d]`` of the round; slots are
    ordered by that fraction (stable), so ``[2, 1]`` gives ``[0, 1, 0]``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    return np.repeat(np.arange(counts.shape[0]), counts)[interleave_order(counts)]


def interleave_order(counts: np.ndarray) -> np.ndarray:
    """The permutation behind :func:`interleave`: slot ``i`` holds item ``order[i]`` of the items
    listed dataset by dataset (``counts[0]`` of dataset 0, then dataset 1, ...), each in its own order.

    >>> interleave_order(np.array([2, 1])).tolist()
    [0, 2, 1]
    """
    return _interleave_order(tuple(int(c) for c in np.asarray(counts).tolist()))


@functools.lru_cache(maxsize=64)  # rounds mostly repeat the same split; the result is read-only
def _interleave_order(counts: tuple[int, ...]) -> np.ndarray:
    pos = np.concatenate([(np.arange(c) + 0.5) / c for c in counts if c > 0]) if sum(counts) else np.empty(0)
    order = np.argsort(pos, kind="stable")
    order.flags.writeable = False
    return order
