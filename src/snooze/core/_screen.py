"""`Screens`: partial groups (``SchedulerConfig.screen_size``; docs/concepts.md, "Partial groups").

With screening on, every freshly drawn candidate is a *screen*: ``k`` of its ``G`` rollouts. When its ``k``
rewards are reported, the policy's :meth:`~snooze.core.policies.Policy.screen` decides: *the rest* (the other
``G - k`` rollouts, asked in the step's next round under the same ticket) or *none* (the ``k`` rewards are the
group). This component holds the screens that passed, from their report until their rest is reported: their
tickets (still pending in the :class:`~snooze.core._pending.PendingSet`), their first ``k`` rewards, the tokens
reported with them (``-1``: none), and whether their rest has been handed out. It counts the step's screens
(``gen/screened``, ``gen/screen_stopped``, ``gen/screen_continued``) and their totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from snooze._kit.state import state_int, state_ints, state_reals
from snooze.core.errors import StateError

__all__ = ["Screens", "KEYS"]

KEYS = ("screened", "screen_stopped", "screen_continued")
"""The counts, per step (``gen/<key>``) and in total (``total/<key>``)."""


class Screens:
    """Screens that passed and wait for (or have out) their rest; the step's and the run's screening counts."""

    def __init__(self, k: int, group_size: int) -> None:
        self.k, self.group_size = k, group_size
        self.ticket = np.empty(0, dtype=np.int64)  # sorted: screens pass in ticket order within a report
        self.first = np.empty((0, k), dtype=np.float64)
        self.tokens = np.empty(0, dtype=np.int64)  # -1: the screen was reported without tokens
        self.out = np.empty(0, dtype=bool)  # the rest has been handed out by propose()
        self.step = dict.fromkeys(KEYS, 0)
        self.totals = dict.fromkeys(KEYS, 0)

    @property
    def rest(self) -> int:
        """Rollouts asked of a screen's rest: ``G - k``."""
        return self.group_size - self.k

    def waiting(self) -> int:
        """Rests not handed out yet."""
        return int(np.count_nonzero(~self.out))

    def hand_out(self, m: int) -> np.ndarray:
        """The tickets of the first ``m`` rests waiting (in ticket order), now out."""
        index = np.flatnonzero(~self.out)[:m]
        self.out = self.out.copy()
        self.out[index] = True
        return self.ticket[index]

    def out_tickets(self) -> np.ndarray:
        return self.ticket[self.out]

    def waiting_tickets(self) -> np.ndarray:
        return self.ticket[~self.out]

    def find(self, tickets: np.ndarray) -> np.ndarray:
        """Index of each ticket among the passed screens, ``-1`` where it is none."""
        held = self.ticket.shape[0]
        if not held:
            return np.full(tickets.shape[0], -1, dtype=np.int64)
        idx = np.minimum(np.searchsorted(self.ticket, tickets), held - 1)
        return np.where(self.ticket[idx] == tickets, idx, -1)

    def add(self, tickets: np.ndarray, first: np.ndarray, tokens: np.ndarray | None) -> None:
        """Screens that passed: their rests wait to be handed out."""
        n = tickets.shape[0]
        toks = np.full(n, -1, dtype=np.int64) if tokens is None else tokens.astype(np.int64)
        order = np.argsort(np.concatenate([self.ticket, tickets]), kind="stable")
        self.ticket = np.concatenate([self.ticket, tickets.astype(np.int64)])[order]
        self.first = np.concatenate([self.first, first.astype(np.float64)])[order]
        self.tokens = np.concatenate([self.tokens, toks])[order]
        self.out = np.concatenate([self.out, np.zeros(n, dtype=bool)])[order]

    def remove(self, index: np.ndarray) -> None:
        """The screens at ``index`` are done (their rest reported, or cancelled)."""
        keep = np.ones(self.ticket.shape[0], dtype=bool)
        keep[index] = False
        self.ticket, self.first, self.tokens, self.out = (
            a[keep] for a in (self.ticket, self.first, self.tokens, self.out)
        )

    def count(self, screened: int, stopped: int) -> None:
        self.step = {**self.step}
        self.step["screened"] += screened
        self.step["screen_stopped"] += stopped
        self.step["screen_continued"] += screened - stopped

    def finish(self) -> dict[str, int]:
        """The step's counts as metrics (and the totals after them); the next step's counts start at 0."""
        out = {f"gen/{k}": v for k, v in self.step.items()}
        self.totals = {k: self.totals[k] + self.step[k] for k in KEYS}
        self.step = dict.fromkeys(KEYS, 0)
        return out | self.cumulative()

    def cumulative(self) -> dict[str, int]:
        return {f"total/{k}": v for k, v in self.totals.items()}

    # -- undo and state ---------------------------------------------------------------------------
    def snapshot(self) -> tuple[Any, ...]:
        return self.ticket, self.first, self.tokens, self.out, dict(self.step), dict(self.totals)

    def restore(self, snap: tuple[Any, ...]) -> None:
        self.ticket, self.first, self.tokens, self.out, self.step, self.totals = snap

    def state_dict(self) -> dict[str, Any]:
        """``meta``: the counts and the tickets whose rest is out; ``arrays``: tickets, first rewards, tokens."""
        return {
            "meta": {"step": dict(self.step), "totals": dict(self.totals), "out": self.ticket[self.out].tolist()},
            "arrays": {"ticket": self.ticket.copy(), "first": self.first.copy(), "tokens": self.tokens.copy()},
        }

    def load_state_dict(self, state: Mapping[str, Any], pending: np.ndarray, bounds: tuple[float, float]) -> None:
        """Every passed screen's ticket pending (``pending``: the pending tickets), its first ``k`` rewards within
        ``bounds``, its tokens an integer >= -1."""
        meta, arrays = state["meta"], state["arrays"]
        ticket = state_ints(arrays["ticket"], "screens.ticket", (None,))
        s = ticket.shape[0]
        first = state_reals(arrays["first"], "screens.first", (s, self.k), *bounds)
        tokens = state_ints(arrays["tokens"], "screens.tokens", (s,), -1)
        out = state_ints(meta["out"], "screens.out", (None,))
        if (np.diff(ticket) <= 0).any() or not np.isin(ticket, pending).all() or not np.isin(out, ticket).all():
            raise StateError("the screens' tickets are not sorted, not pending, or out without a screen; corrupt state")
        step = {k: state_int(meta["step"][k], f"screens.step[{k!r}]") for k in KEYS}
        totals = {k: state_int(meta["totals"][k], f"screens.totals[{k!r}]") for k in KEYS}
        self.ticket, self.first, self.tokens, self.out = ticket, first, tokens, np.isin(ticket, out)
        self.step, self.totals = step, totals
