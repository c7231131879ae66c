"""`RoundUndo`: what one generation round changed, kept so that :meth:`Scheduler.step` can withdraw a
round whose rollout or report failed (docs/concepts.md, "The step loop").

A round changes little, and all of it is recorded as it happens: the streams' positions, the mix's
encounter counts, the step's counts, the tickets issued, the snooze counters the draw walk counted
down (their rows and by how much, kept by the walk), the policy's own run-level state (its ``state_dict()``: empty for
the seed's policies, a few small arrays for ``predictive``), and, during the report, the prompt memory of
the reported rows (saved before the policy writes them) and the batch buffers' columns. Undoing costs what the round did, never a copy of the state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from snooze.core.scheduler import Scheduler

__all__ = ["RoundUndo"]


class RoundUndo:
    """Taken before a round; :meth:`undo` puts the scheduler back as it was then."""

    def __init__(self, sched: Scheduler) -> None:
        self.streams = [(s.epoch, s.cursor) for s in sched.streams]
        self.drawn = sched.mix.drawn.copy()
        self.counts = sched.counts.snapshot()  # a few small dicts and arrays: the step's counts and the totals
        self.tickets = (sched.pending.next_ticket, len(sched.pending))
        self.policy = sched.policy.state_dict()  # JSON-safe copies; {} for policies without state of their own
        # a buffer's columns are replaced, never written in place, when groups join: keeping them is O(1)
        self.buffers = [
            (b, (b.ds, b.row, b.ticket, b.outcome, b.rewards)) for b in (sched.batch, sched.surplus, sched.zero)
        ]
        self.counted_down: list[
            tuple[int, np.ndarray, np.ndarray | int]
        ] = []  # (dataset, rows, by how much) in walk order
        self.memory: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []  # (memory rows, their columns before)

    def keep_memory(self, columns: dict[str, np.ndarray], rows: np.ndarray) -> None:
        """Save every column at ``rows`` (of the whole prompt memory) before a report writes them."""
        self.memory.append((rows, {name: col[rows] for name, col in columns.items()}))

    def undo(self, sched: Scheduler) -> None:
        for rows, saved in reversed(self.memory):
            for name, values in saved.items():
                sched.memory.columns[name][rows] = values
        for d, rows, by in reversed(self.counted_down):  # a row counted down twice in one round: undone in turn
            table = sched.tables[d]
            table.n_asleep += int(np.count_nonzero(table.counter[rows] == 0))
            table.counter[rows] += by
        if self.memory:  # the report may have got as far as the cached counts: recount (a failure path)
            for table in sched.tables:
                table.recount()
        for stream, (epoch, cursor) in zip(sched.streams, self.streams):
            stream.epoch, stream.cursor = epoch, cursor
        sched.mix.drawn[:] = self.drawn
        if self.policy:
            sched.policy.load_state_dict(self.policy)
        sched.counts.restore(self.counts)
        sched.pending.withdraw(*self.tickets)
        for buffer, (ds, row, ticket, outcome, rewards) in self.buffers:
            buffer.ds, buffer.row, buffer.ticket, buffer.outcome, buffer.rewards = ds, row, ticket, outcome, rewards
