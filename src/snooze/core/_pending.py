"""`PendingSet`: candidates issued and not yet reported, and the ticket counter that issues them.

A ticket is ``(run_id, number)``: ``run_id`` is the run's id (random, made once when a run starts and
kept through save/load), so a candidate of another scheduler is refused however its number falls; and
a number names one prompt, so a *stale* candidate (issued before the state was restored from an older
checkpoint, whose number now names another prompt) is refused too.

Tickets are issued in increasing order, so appending keeps the arrays sorted and membership is a
vectorised ``searchsorted``: checking and removing a report of N candidates costs O(N log P + P)
numpy work instead of N dictionary operations (``P`` = candidates out for rollout).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snooze._kit.checks import INT64_MAX
from snooze._kit.state import check_rows, state_int, state_ints
from snooze.core.errors import ReportError, StateError

__all__ = ["PendingSet", "new_run_id"]

_RUN_ID = re.compile(r"\A[0-9a-f]{16}\Z")


def new_run_id() -> str:
    """A fresh run id: 64 random bits, as 16 hex digits."""
    return secrets.token_hex(8)


class PendingSet:
    """Columns ``ticket`` (sorted, unique), ``ds``, ``row``, ``audit`` (the candidate is an audit of a skipped
    encounter, snooze.core._audit) and ``step`` (the step it was drawn at: its age when reported is the steps
    finished since, docs/concepts.md "Delayed feedback"); ``next_ticket`` is the next one to issue."""

    def __init__(self, sizes: Sequence[int] = (), run_id: str | None = None) -> None:
        self.sizes = list(sizes)  # rows per dataset, to check a loaded state
        self.run_id = run_id if run_id is not None else new_run_id()
        self.next_ticket = 0
        self.ticket = np.empty(0, dtype=np.int64)
        self.ds = np.empty(0, dtype=np.int64)
        self.row = np.empty(0, dtype=np.int64)
        self.audit = np.empty(0, dtype=bool)
        self.step = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return int(self.ticket.shape[0])

    def __contains__(self, ticket: object) -> bool:
        return bool(self.find(np.array([ticket], dtype=np.int64))[0] >= 0)

    def check_room(self, n: int) -> None:
        """Refuse, before anything is drawn, a round whose ``n`` tickets would pass int64 (a crafted state)."""
        if n > INT64_MAX + 1 - self.next_ticket:
            raise StateError(
                f"the ticket counter is at {self.next_ticket}: {n} more tickets would pass int64 "
                "(2**63 - 1); the state was not written by this scheduler's own run"
            )

    def issue(self, ds: np.ndarray, row: np.ndarray, audit: np.ndarray | None = None, step: int = 0) -> np.ndarray:
        """Tickets for newly drawn prompts ``(ds[i], row[i])``, drawn at ``step``, held until reported.
        ``[N]`` -> ``[N]``."""
        ticket = np.arange(self.next_ticket, self.next_ticket + ds.shape[0], dtype=np.int64)
        self.add(ticket, ds, row, audit, step)
        self.next_ticket += int(ds.shape[0])
        return ticket

    def add(
        self, ticket: np.ndarray, ds: np.ndarray, row: np.ndarray, audit: np.ndarray | None = None, step: int = 0
    ) -> None:
        """Append tickets (all above the ones held), drawn at ``step``; ``audit`` ``None``: none of them is an audit."""
        n = ds.shape[0]
        self.audit = np.concatenate([self.audit, np.zeros(n, dtype=bool) if audit is None else audit.astype(bool)])
        self.ticket = np.concatenate([self.ticket, ticket.astype(np.int64)])
        self.ds = np.concatenate([self.ds, ds.astype(np.int64)])
        self.row = np.concatenate([self.row, row.astype(np.int64)])
        self.step = np.concatenate([self.step, np.full(n, step, dtype=np.int64)])

    def out_at_draw(self, ds: np.ndarray, row: np.ndarray) -> tuple[int, int]:
        """Before ``(ds[i], row[i])`` are issued: how many candidates are out, and how many of these prompts
        have one out already (drawn again before the feedback of their last group came). ``(0, 0)`` at once
        when nothing is out (the synchronous loop)."""
        if not len(self):
            return 0, 0
        span = max(int(self.row.max()), int(row.max(initial=0))) + 1
        return len(self), int(np.isin(ds * span + row, self.ds * span + self.row).sum())

    def ages(self, index: np.ndarray, now: int) -> np.ndarray | None:
        """Steps since the entries at ``index`` were drawn, ``now`` being the step in progress; ``None`` when
        every entry was drawn at ``now`` (the synchronous loop: O(1), as ``step`` never decreases along the
        tickets, so the first entry is the oldest)."""
        if not len(self) or self.step[0] == now:
            return None
        return now - self.step[index]

    def snapshot(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The ticket counter and the columns, for :meth:`restore` (an undone round). O(1): columns are
        replaced, never written in place, when tickets are issued or popped."""
        return self.next_ticket, self.ticket, self.ds, self.row, self.audit, self.step

    def restore(self, snap: tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
        """Back to :meth:`snapshot`: every ticket issued since taken back, every one reported since pending again."""
        self.next_ticket, self.ticket, self.ds, self.row, self.audit, self.step = snap

    def find(self, ticket: np.ndarray) -> np.ndarray:
        """Index of each ticket in the set, ``-1`` where it is not pending. ``[N]`` -> ``[N]``.

        The usual report (one whole round, in issue order) is a run of consecutive entries: it is
        recognised with one comparison instead of a search per ticket."""
        n, held = ticket.shape[0], len(self)
        if n and held >= n:
            start = int(np.searchsorted(self.ticket, ticket[0]))
            if start + n <= held and np.array_equal(self.ticket[start : start + n], ticket):
                return np.arange(start, start + n)
        if not held:
            return np.full(n, -1, dtype=np.int64)
        idx = np.minimum(np.searchsorted(self.ticket, ticket), held - 1)
        return np.where(self.ticket[idx] == ticket, idx, -1)

    def locate(self, issued: Any, candidates: Sequence[Any]) -> np.ndarray:
        """:meth:`find` for a report (``issued``: its ``ticket``, ``ds`` and ``row`` arrays): raises
        :class:`ReportError` naming the first candidate that is not pending, or whose ticket this set
        holds for another prompt (a stale candidate), and why."""
        index = self.find(issued.ticket)
        if (index < 0).any():
            c = candidates[int(np.argmax(index < 0))]
            why = (
                "was already reported (or cancelled)"
                if 0 <= c.ticket < self.next_ticket
                else "was never issued by this scheduler"
            )
            raise ReportError(
                f"candidate {c.dataset!r}/{c.id!r} (ticket {c.ticket}) {why}; report only what propose() "
                "returned, once each. Nothing was recorded."
            )
        stale = (self.ds[index] != issued.ds) | (self.row[index] != issued.row)
        if stale.any():
            c = candidates[int(np.argmax(stale))]
            raise ReportError(
                f"candidate {c.dataset!r}/{c.id!r} (ticket {c.ticket}) is stale: this scheduler issued ticket "
                f"{c.ticket} for another prompt, so the candidate was issued before its state was restored from an "
                "older checkpoint. Roll out pending_candidates() instead. Nothing was recorded."
            )
        return index

    def pop(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Remove the entries at ``index`` (from :meth:`find`, all found); return their ``(ds, row)``."""
        ds, row = self.ds[index], self.row[index]
        if index.shape[0] == len(self):  # the whole set (a report of everything out): nothing to keep
            keep: slice | np.ndarray = slice(0, 0)
        else:
            keep = np.ones(len(self), dtype=bool)
            keep[index] = False
        self.ticket, self.ds, self.row = self.ticket[keep], self.ds[keep], self.row[keep]
        self.audit, self.step = self.audit[keep], self.step[keep]
        return ds, row

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``next_ticket``, ``pending`` (``[P, 3]`` int64 rows of ``(ticket, ds, row)``), ``step`` (``[P]``, the
        step each was drawn at, in the same order), ``audit`` (the tickets of audit candidates, a list) and
        ``run_id``."""
        rows = np.stack([self.ticket, self.ds, self.row], axis=1) if len(self) else np.empty((0, 3), dtype=np.int64)
        return {
            "next_ticket": self.next_ticket,
            "pending": rows,
            "step": self.step.copy(),
            "audit": self.ticket[self.audit].tolist(),
            "run_id": self.run_id,
        }

    def load_state_dict(self, state: Mapping[str, Any], now: int | None = None) -> None:
        """``now``: the steps the saved run had finished (no candidate was drawn later; ``None``: not checked)."""
        run_id = state["run_id"]
        if not isinstance(run_id, str) or not _RUN_ID.match(run_id):
            raise StateError(f"run_id={run_id!r} is not a run id (16 hex digits); the state is corrupt")
        next_ticket = state_int(state["next_ticket"], "next_ticket", 0, INT64_MAX)  # tickets are int64
        arr = state_ints(state["pending"], "pending", (None, 3))
        check_rows(arr[:, 1], arr[:, 2], self.sizes, "pending")
        if arr.shape[0] and (
            arr[:, 0].min() < 0 or arr[:, 0].max() >= next_ticket or np.unique(arr[:, 0]).shape[0] != arr.shape[0]
        ):
            raise StateError("array pending holds tickets that were never issued, or twice; the state is corrupt")
        audit = state_ints(state["audit"], "pending audit tickets", (None,))
        if not np.isin(audit, arr[:, 0]).all():
            raise StateError("the pending audit tickets are not all pending; the state is corrupt")
        step = state_ints(state["step"], "pending step", (arr.shape[0],), 0, now)  # at a step >= 0, never a future one
        order = np.argsort(arr[:, 0], kind="stable")
        if (np.diff(step[order]) < 0).any():
            raise StateError(
                "array pending step goes down along the tickets (a later ticket drawn at an earlier step); "
                "the state is corrupt"
            )
        self.run_id = run_id
        self.next_ticket = next_ticket
        self.ticket, self.ds, self.row = arr[order, 0].copy(), arr[order, 1].copy(), arr[order, 2].copy()
        self.audit, self.step = np.isin(self.ticket, audit), step[order].copy()
