"""`GroupBuffer`: reported groups held inside a step (batch, surplus, zero-signal), as flat arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snooze.core._stateful import check_rows, state_ints, state_reals
from snooze.core.classify import OUTCOME_NAMES
from snooze.core.errors import StateError

__all__ = ["GroupBuffer"]

_FIELDS = ("ds", "row", "ticket", "outcome")


class GroupBuffer:
    """Columns ``ds`` (dataset index), ``row``, ``ticket``, ``outcome`` (``[K]``) and ``rewards`` (``[K, G]``)."""

    def __init__(self, group_size: int) -> None:
        self.group_size = group_size
        self.ds = np.empty(0, dtype=np.int32)
        self.row = np.empty(0, dtype=np.int64)
        self.ticket = np.empty(0, dtype=np.int64)
        self.outcome = np.empty(0, dtype=np.int8)
        self.rewards = np.empty((0, group_size), dtype=np.float64)

    def __len__(self) -> int:
        return int(self.ds.shape[0])

    def extend(self, other: GroupBuffer, mask: np.ndarray | None = None) -> None:
        """Append ``other``'s groups (those where ``mask`` is true, if given), keeping order."""
        sel = slice(None) if mask is None else mask
        if len(self) == 0:  # the common case in a step's first round: a copy, no concatenation
            for name in (*_FIELDS, "rewards"):
                setattr(self, name, getattr(other, name)[sel].copy() if mask is None else getattr(other, name)[sel])
            return
        for name in (*_FIELDS, "rewards"):
            setattr(self, name, np.concatenate([getattr(self, name), getattr(other, name)[sel]]))

    def take(self, mask: np.ndarray) -> GroupBuffer:
        """A new buffer with the selected groups (boolean mask or index array)."""
        out = GroupBuffer(self.group_size)
        out.extend(self, mask)
        return out

    def move_head(self, dst: GroupBuffer, k: int) -> int:
        """Move the first ``k`` groups (at most all) to the end of ``dst``; returns how many moved."""
        k = max(0, min(k, len(self)))
        if k:
            head = np.zeros(len(self), dtype=bool)
            head[:k] = True
            dst.extend(self, head)
            rest = self.take(~head)
            self.ds, self.row, self.ticket, self.outcome, self.rewards = (
                rest.ds,
                rest.row,
                rest.ticket,
                rest.outcome,
                rest.rewards,
            )
        return k

    @classmethod
    def of(
        cls, ds: np.ndarray, row: np.ndarray, ticket: np.ndarray, outcome: np.ndarray, rewards: np.ndarray
    ) -> GroupBuffer:
        out = cls(rewards.shape[1])
        out.ds, out.row = ds.astype(np.int32, copy=False), row.astype(np.int64, copy=False)
        out.ticket, out.outcome = ticket.astype(np.int64, copy=False), outcome.astype(np.int8, copy=False)
        out.rewards = rewards.astype(np.float64, copy=False)
        return out

    # -- undo and state ---------------------------------------------------------------------------
    def snapshot(self) -> tuple[np.ndarray, ...]:
        """The columns, for :meth:`restore`. O(1): they are replaced, never written in place."""
        return self.ds, self.row, self.ticket, self.outcome, self.rewards

    def restore(self, snap: tuple[np.ndarray, ...]) -> None:
        self.ds, self.row, self.ticket, self.outcome, self.rewards = snap

    def state_dict(self) -> dict[str, Any]:
        """Each column, copied: ``ds``, ``row``, ``ticket``, ``outcome`` ``[K]`` and ``rewards`` ``[K, G]``."""
        return {name: getattr(self, name).copy() for name in (*_FIELDS, "rewards")}

    def load_state_dict(
        self,
        state: Mapping[str, Any],
        sizes: Sequence[int] = (),
        what: str = "buffer",
        reward_range: tuple[float, float] = (-np.inf, np.inf),
    ) -> None:
        """Take the columns: integer ``ds``, ``row``, ``ticket`` and ``outcome`` (a code of
        :mod:`~snooze.core.classify`) of one length ``K``, every group naming a prompt of datasets of these
        ``sizes``, and ``[K, G]`` finite rewards inside ``reward_range``."""
        cols = {name: state_ints(state[name], f"{what}.{name}", (None,)) for name in _FIELDS}
        k = cols["ds"].shape[0]
        if any(c.shape[0] != k for c in cols.values()):
            raise StateError(f"buffer {what!r} has columns of different lengths; the state is corrupt")
        rewards = state_reals(state["rewards"], f"{what}.rewards", (k, self.group_size), *reward_range)
        if k and int(cols["outcome"].max()) >= len(OUTCOME_NAMES):
            raise StateError(
                f"array {what}.outcome holds codes outside 0..{len(OUTCOME_NAMES) - 1}; the state is corrupt"
            )
        check_rows(cols["ds"], cols["row"], sizes, what)
        cols = {name: col.astype(getattr(self, name).dtype) for name, col in cols.items()}
        for name, col in cols.items():
            setattr(self, name, col)
        self.rewards = rewards
