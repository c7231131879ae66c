"""`GroupBuffer`: reported groups held inside a step (batch, surplus, zero-signal), as flat arrays."""

from __future__ import annotations

import numpy as np

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

    @classmethod
    def of(cls, ds: np.ndarray, row: np.ndarray, ticket: np.ndarray, outcome: np.ndarray, rewards: np.ndarray) -> GroupBuffer:
        out = cls(rewards.shape[1])
        out.ds, out.row = ds.astype(np.int32, copy=False), row.astype(np.int64, copy=False)
        out.ticket, out.outcome = ticket.astype(np.int64, copy=False), outcome.astype(np.int8, copy=False)
        out.rewards = rewards.astype(np.float64, copy=False)
        return out

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        out = {f"{prefix}.{name}": getattr(self, name) for name in _FIELDS}
        out[f"{prefix}.rewards"] = self.rewards
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str, group_size: int) -> GroupBuffer:
        out = cls(group_size)
        for name in _FIELDS:
            setattr(out, name, arrays[f"{prefix}.{name}"].astype(getattr(out, name).dtype))
        out.rewards = arrays[f"{prefix}.rewards"].astype(np.float64).reshape(-1, group_size)
        return out
