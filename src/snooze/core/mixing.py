"""Deterministic splitting of counts among weighted datasets (SPEC section 4, "Mixing").

Largest-remainder rounding (the Hamilton method): every share is within one of its exact value
and the shares add up exactly. Ties go to the dataset listed first, so results never depend on
hash order or floating-point luck across machines.
"""

from __future__ import annotations

import numpy as np

__all__ = ["largest_remainder", "interleave"]


def largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Split ``total`` into integer shares proportional to ``weights`` (``>= 0``). Returns int64 ``[D]``.

    >>> largest_remainder(5, np.array([1.0, 1.0])).tolist()
    [3, 2]
    """
    w = np.asarray(weights, dtype=np.float64)
    out = np.zeros(w.shape[0], dtype=np.int64)
    if total <= 0 or w.sum() <= 0:
        return out
    exact = total * w / w.sum()
    out[:] = np.floor(exact + 1e-9)  # 1e-9 absorbs 2.9999999 from rounding of exact thirds etc.
    rest = total - int(out.sum())
    if rest > 0:
        order = np.argsort(-(exact - out), kind="stable")
        out[order[:rest]] += 1
    return out


def interleave(counts: np.ndarray) -> np.ndarray:
    """Dataset index of each slot when ``counts[d]`` slots go to dataset ``d``, spread evenly.

    Dataset ``d``'s j-th slot sits at fraction ``(j + 0.5) / counts[d]`` of the round; slots are
    ordered by that fraction (stable), so ``[2, 1]`` gives ``[0, 1, 0]``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    owners = np.repeat(np.arange(counts.shape[0]), counts)
    pos = np.concatenate([(np.arange(c) + 0.5) / c for c in counts if c > 0]) if counts.sum() else np.empty(0)
    return owners[np.argsort(pos, kind="stable")]
