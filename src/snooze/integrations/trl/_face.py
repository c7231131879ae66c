"""The scheduler questions the TRL trainers ask, each in one function: the scheduler's public face is being
reshaped, and each of these then becomes the one-line call its comment names.

Numpy-only (no TRL), so the benchmarks and the multi-process helpers use them too.
"""

from __future__ import annotations

from snooze import Batch, Scheduler

__all__ = ["wants_round", "batch_full", "exhausted", "carried"]


def wants_round(sched: Scheduler) -> bool:
    """Whether the step's loop asks for another generation round: the batch is not full, rounds are left,
    data is left (docs/concepts.md, "The step loop")."""
    # issue 39: becomes sched.wants_round()
    return not sched.batch_full and sched.round < sched.config.max_gen_rounds and not sched.exhausted


def batch_full(sched: Scheduler) -> bool:
    """Whether the batch being built has no slot left."""
    # issue 39: becomes sched.room() == 0
    return bool(sched.batch_full)


def exhausted(sched: Scheduler) -> bool:
    """Whether no dataset can issue another candidate (finite epochs used up, or every prompt retired)."""
    # issue 39: Scheduler.exhausted (public); kept here beside the questions that move
    return bool(sched.exhausted)


def carried(sched: Scheduler, batch: Batch) -> set[int]:
    """The tickets of the surplus groups ``finish_step()`` carried into the next step (``carry_surplus``)."""
    # issue 39: becomes set(batch.record.tickets("carried"))
    return {int(t) for t in sched.batch.ticket}
