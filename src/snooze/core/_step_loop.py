"""The step loop's two ends (docs/concepts.md, "The step loop"): :func:`run_step`, rounds of propose, roll
out and report until the batch is full, each undone if it raises; and :func:`finish_step`, which closes the
step (short batch, surplus, advantages, metrics) and opens the next one."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from snooze.core._buffer import GroupBuffer
from snooze.core._metrics import StepEnd
from snooze.core.advantages import scaled_advantages
from snooze.core.classify import SIGNAL
from snooze.core.errors import BatchShortError, ConfigError
from snooze.core.types import Batch, Candidates, RolloutFn

if TYPE_CHECKING:
    from snooze.core.scheduler import Scheduler

__all__ = ["run_step", "finish_step"]


def run_step(sched: Scheduler, rollout_fn: RolloutFn) -> Batch:
    """Rounds until the batch is full or ``max_gen_rounds``, then :func:`finish_step`. A round that raises is
    undone by the components (:meth:`Components.round`) and the error goes on."""
    if not callable(rollout_fn):
        raise ConfigError(
            f"step(rollout_fn): rollout_fn must be a function of the candidates that returns their "
            f"rewards [len(candidates), group_size], got {type(rollout_fn).__name__}"
        )
    while not sched.batch_full and sched.round < sched.config.max_gen_rounds:
        with sched.parts.round():
            candidates = sched.propose()
            if not candidates:
                break
            sched.report(candidates, rollout_fn(candidates))
    return finish_step(sched)


def finish_step(sched: Scheduler) -> Batch:
    """Close the step: handle a short batch (``on_short``), the surplus, advantages and metrics."""
    cfg, parts = sched.config, sched.parts
    _refuse_short(sched)  # before any change
    starved = np.zeros(len(sched.sources), dtype=bool)
    room = cfg.batch_size - len(parts.batch)
    if cfg.mix == "quota":
        starved = sched._quotas() - sched._filled() > 0
        if room > 0:
            parts.surplus.move_head(parts.batch, room)  # starved slots go to the rest
    bound = not sched.batch_full and sched.round >= cfg.max_gen_rounds  # the round limit, not the data, stopped it
    padded = parts.padding.move_head(parts.batch, cfg.batch_size - len(parts.batch)) if cfg.on_short == "pad" else 0
    batch = _build_batch(sched)
    parts.step_metrics.close_surplus(parts.surplus.ds, carried=cfg.carry_surplus)
    end = StepEnd(
        parts.batch.ds,
        batch.signal,
        padded,
        starved,
        cfg.group_size,
        [t.asleep() for t in sched.tables],
        sum(t.retired() for t in sched.tables),
        [s.epoch for s in parts.streams],
        bound,
        cfg.audit,
        len(parts.pending),
    )
    batch.metrics = sched.last_metrics = parts.step_metrics.finish(end)
    _next_step(sched)
    return batch


def _refuse_short(sched: Scheduler) -> None:
    """``on_short='raise'``: a batch the surplus cannot fill is a :class:`BatchShortError`, nothing changed."""
    cfg = sched.config
    room = cfg.batch_size - len(sched.batch)
    if cfg.on_short == "raise" and room > (min(room, len(sched.surplus)) if cfg.mix == "quota" else 0):
        raise BatchShortError.at(
            sched.step_index, len(sched.batch), cfg.batch_size, sched.round, cfg.max_gen_rounds, sched.exhausted
        )


def _next_step(sched: Scheduler) -> None:
    """Empty buffers for the next step; carried groups go first, and what does not fit now is discarded,
    never carried twice."""
    cfg, parts = sched.config, sched.parts
    carried = parts.new_step()
    carried = carried if cfg.carry_surplus else GroupBuffer(cfg.group_size)
    parts.step_metrics.start_step(carried_in=carried.ds)
    parts.policy.end_step(sched.step_index)
    if len(carried):
        fits = sched._fits(carried.ds, np.ones(len(carried), dtype=bool))
        parts.batch.extend(carried, fits)
        parts.step_metrics.add_discarded(carried.ds[~fits])


def _build_batch(sched: Scheduler) -> Batch:
    b = sched.batch
    cands = Candidates(sched.sources, b.ds.astype(np.int64), b.row.copy(), b.ticket.copy(), sched.run_id)
    adv = scaled_advantages(b.rewards, sched.config.advantage, 1e-6)
    return Batch(sched.step_index, cands, b.rewards.copy(), adv, b.outcome == SIGNAL)
