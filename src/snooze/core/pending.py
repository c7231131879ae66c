"""`PendingSet`: candidates issued and not yet reported, as three sorted arrays.

Tickets are issued in increasing order, so appending keeps the arrays sorted and membership is a
vectorised ``searchsorted``: checking and removing a report of N candidates costs O(N log P + P)
numpy work instead of N dictionary operations (``P`` = candidates out for rollout).
"""

from __future__ import annotations

import numpy as np

__all__ = ["PendingSet"]


class PendingSet:
    """Columns ``ticket`` (sorted, unique), ``ds`` and ``row``."""

    def __init__(self) -> None:
        self.ticket = np.empty(0, dtype=np.int64)
        self.ds = np.empty(0, dtype=np.int64)
        self.row = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.ticket.shape[0])

    def __contains__(self, ticket: object) -> bool:
        found = self.find(np.array([ticket], dtype=np.int64))
        return isinstance(found, slice) or bool(found[0] >= 0)

    def add(self, ticket: np.ndarray, ds: np.ndarray, row: np.ndarray) -> None:
        """Append newly issued tickets (all above the ones held)."""
        self.ticket = np.concatenate([self.ticket, ticket.astype(np.int64)])
        self.ds = np.concatenate([self.ds, ds.astype(np.int64)])
        self.row = np.concatenate([self.row, row.astype(np.int64)])

    def find(self, ticket: np.ndarray) -> np.ndarray | slice:
        """Index of each ticket in the set, ``-1`` where it is not pending. ``[N]`` -> ``[N]``.

        The usual report (one whole round, in issue order) is a run of consecutive entries: then
        the answer is a ``slice``, found with one comparison instead of a search per ticket."""
        n = ticket.shape[0]
        if n and len(self) >= n:
            start = int(np.searchsorted(self.ticket, ticket[0]))
            if start + n <= len(self) and np.array_equal(self.ticket[start : start + n], ticket):
                return slice(start, start + n)
        idx = np.searchsorted(self.ticket, ticket)
        idx = np.minimum(idx, max(len(self) - 1, 0))
        hit = (len(self) > 0) & (self.ticket[idx] == ticket) if len(self) else np.zeros(ticket.shape, bool)
        return np.where(hit, idx, -1)

    def pop(self, index: np.ndarray | slice) -> tuple[np.ndarray, np.ndarray]:
        """Remove the entries at ``index`` (from :meth:`find`); return their ``(ds, row)``."""
        ds, row = self.ds[index], self.row[index]
        if isinstance(index, slice):
            if index.start == 0 and index.stop == len(self):
                self.ticket, self.ds, self.row = self.ticket[:0], self.ds[:0], self.row[:0]
                return ds, row
            keep = np.r_[0 : index.start, index.stop : len(self)]
            self.ticket, self.ds, self.row = self.ticket[keep], self.ds[keep], self.row[keep]
            return ds, row
        keep = np.ones(len(self), dtype=bool)
        keep[index] = False
        self.ticket, self.ds, self.row = self.ticket[keep], self.ds[keep], self.row[keep]
        return ds, row

    def to_array(self) -> np.ndarray:
        """``[P, 3]`` int64 rows of ``(ticket, ds, row)``."""
        return np.stack([self.ticket, self.ds, self.row], axis=1) if len(self) else np.empty((0, 3), dtype=np.int64)

    @classmethod
    def from_array(cls, arr: np.ndarray) -> PendingSet:
        out = cls()
        arr = np.asarray(arr, dtype=np.int64).reshape(-1, 3)
        order = np.argsort(arr[:, 0], kind="stable")
        out.ticket, out.ds, out.row = arr[order, 0].copy(), arr[order, 1].copy(), arr[order, 2].copy()
        return out
