"""The mix of datasets (docs/concepts.md, "Mixing datasets"): weights, encounters drawn, batch quotas.

Counts are split among weighted datasets by largest-remainder rounding (the Hamilton method):
every share is within one of its exact value and the shares add up exactly. Ties go to the dataset
listed first, so results never depend on hash order or floating-point luck across machines.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snooze._kit.checks import check_weights
from snooze._kit.state import state_ints, state_reals
from snooze.core.errors import StateError

__all__ = ["Mix", "batch_fits", "largest_remainder", "interleave", "interleave_order"]


class Mix:
    """Dataset weights, the encounters each dataset has had since they last changed, and the quotas.

    ``drawn[d]`` counts dataset ``d``'s encounters in the mixed stream (``mix="stream"``; its stride
    scheduling reads it) or its issued candidates (``mix="quota"``), since the weights or the set of
    datasets in the mix last changed.
    """

    def __init__(self, names: Sequence[str], weights: Mapping[str, float] | None = None) -> None:
        self.names = list(names)
        self.weights = self.parse(weights)
        self.drawn = np.zeros(len(self.names), dtype=np.int64)
        self._quota_memo: dict[tuple[bytes, bytes, bytes], np.ndarray] = {}

    def parse(self, weights: Mapping[str, float] | None) -> np.ndarray:
        """``[D]`` weights from a mapping by name (``None``: equal; unlisted datasets: 0)."""
        if weights is None:
            return np.ones(len(self.names), dtype=np.float64)
        checked = check_weights(weights, self.names)  # what SchedulerConfig.weights accepts, checked the same way
        return np.array([checked.get(n, 0.0) for n in self.names], dtype=np.float64)

    def set_weights(self, weights: Mapping[str, float] | None) -> None:
        """New weights from now on; the encounter counts start over when they differ from the old ones."""
        self.set_weights_array(self.parse(weights))

    def set_weights_array(self, w: np.ndarray) -> None:
        """:meth:`set_weights` with weights already parsed (:meth:`parse`)."""
        if not np.array_equal(w, self.weights):
            self.restart()
        self.weights = w

    def restart(self) -> None:
        """Start the encounter counts over (the weights, or the datasets in the mix, changed)."""
        self.drawn[:] = 0

    def quotas(self, active: np.ndarray, filled: np.ndarray, batch_size: int) -> np.ndarray:
        """Each dataset's slots in the training batch: its weight's share, by largest remainder.

        Datasets that can issue no more (``~active``) keep only what they have (``filled``); their
        slots go to the rest."""
        fixed = np.where(active, 0, filled)
        key = (active.tobytes(), fixed.tobytes(), self.weights.tobytes())
        quotas = self._quota_memo.get(key)
        if quotas is None:  # a pure function of the key; steps mostly repeat the same few
            quotas = largest_remainder(batch_size - int(fixed.sum()), np.where(active, self.weights, 0.0)) + fixed
            if len(self._quota_memo) >= 256:
                self._quota_memo.clear()
            self._quota_memo[key] = quotas
        return quotas.copy()

    def snapshot(self) -> np.ndarray:
        """The encounters drawn, for :meth:`restore` (an undone round; the weights do not change in one)."""
        return self.drawn.copy()

    def restore(self, snap: np.ndarray) -> None:
        self.drawn = snap.copy()

    def state_dict(self) -> dict[str, Any]:
        return {"weights": self.weights.tolist(), "drawn": self.drawn.tolist()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """``weights: None`` keeps the current weights (a state saved under other configured weights)."""
        D = len(self.names)
        drawn = state_ints(state["drawn"], "drawn", (D,))
        weights = self.weights
        if state.get("weights") is not None:
            weights = state_reals(state["weights"], "weights", (D,), low=0.0)
            with np.errstate(over="ignore"):
                total = weights.sum()
            if not total > 0 or not np.isfinite(total):  # an infinite sum: every share would be 0 or NaN
                raise StateError(
                    f"weights={state['weights']!r}: no dataset has a weight above 0, or their sum is not finite; "
                    "the state is corrupt"
                )
        self.weights, self.drawn = weights, drawn


def batch_fits(ds: np.ndarray, acceptable: np.ndarray, room: int, open_slots: np.ndarray | None = None) -> np.ndarray:
    """Which of a report's groups (dataset ``ds``, ``[N]``) go into the batch: the first acceptable ones
    while there is ``room``, and in quota mode at most ``open_slots[d]`` of dataset ``d``. ``[N]`` bool."""
    fits = np.zeros(ds.shape[0], dtype=bool)
    idx = np.flatnonzero(acceptable)
    if open_slots is not None:
        keep = [idx[ds[idx] == d][: open_slots[d]] for d in range(open_slots.shape[0])]
        idx = np.sort(np.concatenate(keep)) if keep else idx[:0]
    fits[idx[:room]] = True
    return fits


def largest_remainder(total: int, weights: np.ndarray) -> np.ndarray:
    """Split ``total`` into integer shares proportional to ``weights`` (``>= 0``). Returns int64 ``[D]``.

    >>> largest_remainder(5, np.array([1.0, 1.0])).tolist()
    [3, 2]
    """
    w = [float(x) for x in np.asarray(weights, dtype=np.float64).tolist()]  # a handful: plain Python is faster
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
