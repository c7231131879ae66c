"""The scheduler questions the TRL trainers ask, each in one function: the scheduler's public face is being
reshaped, and each of these then becomes the one-line call its comment names.

Numpy-only (no TRL), so the benchmarks and the multi-process helpers use them too.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from snooze import Batch, Scheduler

__all__ = ["wants_round", "in_batch", "carried"]


def wants_round(sched: Scheduler) -> bool:
    """Whether the step's loop asks for another generation round: the batch is not full, rounds are left,
    data is left (docs/concepts.md, "The step loop")."""
    # issue 39: becomes sched.wants_round()
    return not sched.batch_full and sched.round < sched.config.max_gen_rounds and not sched.exhausted


def in_batch(sched: Scheduler, tickets: Sequence[int]) -> np.ndarray:
    """``[len(tickets)]``: whether each reported candidate's group is in the batch being built."""
    # issue 39: becomes sched.in_batch(candidates)
    return np.isin(np.asarray(tickets, dtype=np.int64), sched.batch.ticket)


def carried(sched: Scheduler, batch: Batch) -> set[int]:
    """The tickets of the surplus groups ``finish_step()`` carried into the next step (``carry_surplus``)."""
    # issue 39: becomes set(batch.record.tickets("carried"))
    return {int(t) for t in sched.batch.ticket}
