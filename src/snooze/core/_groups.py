"""`Groups`: the groups of the step being built, one row each, as flat numpy columns.

Every group reported in a step, and every group carried into it from the step before, is one row:
its prompt (``ds``, ``row``), ``ticket``, ``outcome`` and ``rewards`` (``[K, G]``; a screen stopped after its
first k rollouts, ``SchedulerConfig.screen_size``, holds NaN after them and is always dropped), whether it
audits a skipped encounter (``audit``), whether it was carried in (``carried_in``), where it went
(``place``: a code of :data:`~snooze.core.types.PLACES`) and, for a group in the batch, its
position there (``slot``; -1 outside it). Columns are replaced, never written in place, so a
snapshot of them is O(1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snooze._kit.state import check_rows, state_ints, state_reals
from snooze.core.classify import OUTCOME_NAMES
from snooze.core.errors import StateError
from snooze.core.types import PLACES

__all__ = ["Groups", "COLUMNS"]

COLUMNS = {  # name -> dtype of every column but ``rewards``
    "ds": np.int32,
    "row": np.int64,
    "ticket": np.int64,
    "outcome": np.int8,
    "audit": np.bool_,
    "carried_in": np.bool_,
    "place": np.int8,
    "slot": np.int64,
}
_EMPTY = {name: np.empty(0, dtype=dtype) for name, dtype in COLUMNS.items()}
for _column in _EMPTY.values():
    _column.flags.writeable = False
_HIGH = {"outcome": len(OUTCOME_NAMES) - 1, "audit": 1, "carried_in": 1, "place": len(PLACES) - 1}


class Groups:
    """Columns of :data:`COLUMNS` (``[K]`` each) and ``rewards`` (``[K, G]``)."""

    __slots__ = (*COLUMNS, "rewards", "group_size")

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        for name, empty in _EMPTY.items():  # shared: a column is replaced, never written in place
            setattr(self, name, empty)
        self.rewards = np.empty((0, group_size), dtype=np.float64)

    def __len__(self) -> int:
        return int(self.ticket.shape[0])

    @classmethod
    def reported(
        cls,
        ds: np.ndarray,
        row: np.ndarray,
        ticket: np.ndarray,
        outcome: np.ndarray,
        rewards: np.ndarray,
        audit: np.ndarray,
    ) -> Groups:
        """Groups of a report, not placed yet (the step batch sets their place and slot before it keeps them)."""
        out = cls(rewards.shape[1])
        out.ds, out.row = ds.astype(np.int32, copy=False), row.astype(np.int64, copy=False)
        out.ticket, out.outcome = ticket.astype(np.int64, copy=False), outcome.astype(np.int8, copy=False)
        out.rewards, out.audit = rewards.astype(np.float64, copy=False), audit
        out.carried_in = np.zeros(ticket.shape[0], dtype=bool)
        return out

    def columns(self) -> tuple[np.ndarray, ...]:
        """Every column, ``rewards`` last: a snapshot (O(1): columns are never written in place)."""
        return (*(getattr(self, name) for name in COLUMNS), self.rewards)

    def restore(self, snap: tuple[np.ndarray, ...]) -> None:
        for name, column in zip((*COLUMNS, "rewards"), snap):
            setattr(self, name, column)

    def append(self, other: Groups) -> None:
        """``other``'s rows after these (the first rows of a step are taken as they are)."""
        if not len(self):
            self.restore(other.columns())
            return
        self.restore(tuple(np.concatenate([a, b]) for a, b in zip(self.columns(), other.columns())))

    def select(self, mask: np.ndarray, names: tuple[str, ...] = (*COLUMNS, "rewards")) -> Groups:
        """A new table of the selected rows (boolean mask or index array), in this order; only the columns
        ``names`` are taken (the others are left empty)."""
        out = Groups(self.group_size)
        for name in names:
            setattr(out, name, getattr(self, name)[mask])
        return out

    def set(self, index: np.ndarray, place: int, slot: np.ndarray | int = -1) -> None:
        """Rows ``index`` move to ``place`` (and ``slot``): new columns, so a snapshot keeps the old ones."""
        self.place, self.slot = self.place.copy(), self.slot.copy()
        self.place[index] = place
        self.slot[index] = slot

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Each column, copied (``audit`` and ``carried_in`` as 0/1 ``int8``)."""
        out = {name: getattr(self, name).copy() for name in COLUMNS}
        out["audit"], out["carried_in"] = out["audit"].astype(np.int8), out["carried_in"].astype(np.int8)
        out["rewards"] = self.rewards.copy()
        return out

    def load_state_dict(
        self, state: Mapping[str, Any], sizes: Sequence[int], reward_range: tuple[float, float], what: str = "step"
    ) -> None:
        """Take the columns: integers of one length ``K`` in range, every group naming a prompt of datasets of
        these ``sizes``, ``[K, G]`` finite rewards inside ``reward_range``."""
        low = {"slot": -1}
        cols = {n: state_ints(state[n], f"{what}.{n}", (None,), low.get(n, 0), _HIGH.get(n)) for n in COLUMNS}
        k = cols["ticket"].shape[0]
        if any(c.shape[0] != k for c in cols.values()):
            raise StateError(f"the {what} columns have different lengths; the state is corrupt")
        rewards = _rewards(state["rewards"], f"{what}.rewards", (k, self.group_size), reward_range, cols["place"])
        check_rows(cols["ds"], cols["row"], sizes, what)
        self.restore((*(cols[n].astype(dtype) for n, dtype in COLUMNS.items()), rewards))


def _rewards(
    value: Any, what: str, shape: tuple[int, int], reward_range: tuple[float, float], place: np.ndarray
) -> np.ndarray:
    """The step's rewards: finite and within ``reward_range``, but for the NaN tail of a screen stopped after its
    first k >= 2 rollouts (a dropped group: never trained on, never padding)."""
    arr = np.asarray(value)
    gap = np.isnan(arr) if arr.dtype.kind == "f" and arr.shape == shape else None
    if gap is None or not gap.any():
        return state_reals(value, what, shape, *reward_range)
    width = shape[1] - gap.sum(axis=1)
    tail = np.arange(shape[1])[None, :] >= width[:, None]
    partial = width < shape[1]
    dropped = place == PLACES.index("dropped")
    if (gap != tail).any() or (partial & ((width < 2) | ~dropped)).any():
        raise StateError(f"array {what} holds NaN outside the tail of a dropped screen; the state is corrupt")
    filled = np.where(gap, reward_range[0], arr) if np.isfinite(reward_range[0]) else np.where(gap, 0.0, arr)
    state_reals(filled, what, shape, *reward_range)
    return arr.astype(np.float64)
