"""The scheduler's side of :class:`~snooze.integrations.trl.SnoozeAsyncGRPOTrainer`: its step loop under delayed
feedback, run in the trainer's main process as TRL's rollout queue (:class:`ScheduledQueue`).

TRL's trainer pulls scored rows one at a time from its rollout queue and batches a fixed number of them into each
optimizer step. Here that queue runs the scheduler (docs/integrations/trl.md, "The asynchronous trainer"):

- **Issuing.** While the step's loop wants a round (batch not full, ``max_gen_rounds`` not spent, data left) and
  the candidates out leave room for one more round (``window``), the scheduler proposes a round and every
  candidate goes to the rollout worker, under its ticket. Snoozed and retired prompts are skipped there, on the
  feedback reported so far. Candidates out may be of earlier steps.
- **Reporting.** Each scored group the worker pushes is reported at once; it joins the batch of the step open
  then (the core's rule), unless it is too stale for ``SchedulerConfig.max_staleness`` (steps between its draw
  and its report), has no signal, or is over a quota.
- **Closing.** The step closes when its batch is full, or, once no round can be drawn, when every candidate it
  drew is back (every candidate out, once the data is used up): a short batch, ``on_short``. Training stops
  after the step that closes with the data used up and nothing out. The step's rows go to TRL, exactly
  ``rows_per_step`` of them, the number TRL trains on in one optimizer step: a short batch is filled with copies
  of its rows (or of the step's zero-signal rows) whose advantage is 0, which carry no gradient. Once the data is
  used up, the steps TRL still reads ahead (never trained: the trainer stops first) are such copies of the last
  step's rows.
- **State.** At each close the scheduler's state is kept (:attr:`AsyncRun.snapshots`): TRL's dataloader reads
  ahead into the next step before the optimizer step ends, so the state a checkpoint of step ``N`` must hold
  is the one at the close of step ``N - 1``, candidates out included. On resume those candidates are issued
  again, under their tickets, before anything new is drawn: nothing issued is lost.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import queue as queue_module
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from snooze import Batch, Candidate, IntegrationError, Scheduler, StateError
from snooze.core.checkpoint import load_state, save_state
from snooze.integrations._paths import open_log
from snooze.integrations.trl import _data as data
from snooze.logs import RewardLogWriter, truncate_log, write_groups

__all__ = ["AsyncRun", "ScheduledQueue", "METRIC_PREFIX"]

log = logging.getLogger(__name__)

METRIC_PREFIX = "snooze/"
KEPT_SNAPSHOTS = 3  # the states at the last closes: the one a checkpoint needs, and the read-ahead's


class AsyncRun:
    """The scheduler of an async run and what is out: issue, report, close, snapshots, save and restore.

    ``send(ticket, record)`` hands a prompt to the rollout worker; ``rows_per_step`` is TRL's rows per optimizer
    step; ``window`` bounds the candidates out (issued, not yet reported).
    """

    def __init__(
        self,
        scheduler: Scheduler,
        send: Callable[[int, dict[str, Any]], None],
        rows_per_step: int,
        window: int,
        reward_log: Path | None = None,
        on_batch: Callable[[Batch], None] | None = None,
    ) -> None:
        self.scheduler = scheduler
        self.send = send
        self.rows_per_step = rows_per_step
        self.window = max(window, scheduler.config.gen_size)
        self.reward_log = reward_log
        self.on_batch = on_batch
        self.out: dict[int, tuple[Candidate, int]] = {}  # ticket -> (candidate, step it was drawn at; -1: re-issued)
        self.rows: dict[int, list[Any]] = {}  # ticket -> rows, for groups reported this step and groups carried
        self.snapshots: dict[int, dict[str, Any]] = {}  # steps finished -> the state at that close
        self.metrics: dict[int, dict[str, float]] = {}  # step -> its metrics, flushed when TRL ends that step
        self.exhausted_after: int | None = None  # the step that closed with the data used up, nothing out or carried
        self._reissue = False
        self._last_rows: list[Any] = []  # the last step's: what fills the steps TRL reads ahead once data is used up
        self._writer: RewardLogWriter | None = None
        self._resumed = False

    # -- issuing --------------------------------------------------------------------------------------------------
    def issue(self) -> None:
        """Issue what the step's loop allows now (module doc)."""
        sched = self.scheduler
        if self._reissue:  # after a restore: the candidates the checkpoint held out, under their tickets
            self._reissue = False
            for cand in sched.pending_candidates():
                self._send(cand, -1)
        while sched.wants_round() and (not self.out or len(self.out) + sched.config.gen_size <= self.window):
            cands = sched.propose()
            if not cands:
                break
            for cand in cands:
                self._send(cand, sched.step_index)

    def _send(self, cand: Candidate, step: int) -> None:
        self.out[cand.ticket] = (cand, step)
        self.send(cand.ticket, data.trl_record(cand.record, cand.dataset, cand.id))

    # -- reporting ------------------------------------------------------------------------------------------------
    def report(self, item: Any) -> None:
        """Report one scored group (a ``ScoredGroup`` of the worker) to the scheduler."""
        entry = self.out.pop(int(item.ticket), None)
        if entry is None:
            raise IntegrationError(
                f"the rollout worker returned group {item.ticket}, which the scheduler did not issue or has had "
                "reported already; only SnoozeAsyncGRPOTrainer may feed its rollout worker"
            )
        cand, sched = entry[0], self.scheduler
        rewards = np.asarray(item.rewards, dtype=np.float64)
        if rewards.shape != (sched.config.group_size,):
            raise IntegrationError(
                f"group {cand.key}: the rollout worker scored {rewards.shape[0]} completions, not num_generations="
                f"{sched.config.group_size}"
            )
        rewards = np.where(np.isnan(rewards), float(sched.config.reward_range[0]), rewards)  # unscorable: the low end
        tokens = getattr(item, "tokens", None)  # the group's completion tokens (ScoredGroup.tokens), when known
        sched.report([cand], rewards[None, :], None if tokens is None else [tokens])
        write_groups(self._log(), sched.step_index, [cand], rewards[None, :], None if tokens is None else [tokens])
        rows = list(item.samples)
        for row in rows:  # TRL's sample/time_in_queue_s: from the group's scoring to its step's handing over
            if getattr(row, "enqueued_at", 0) is None:
                row.enqueued_at = item.enqueued_at
        self.rows[cand.ticket] = rows

    # -- closing --------------------------------------------------------------------------------------------------
    def closable(self) -> bool:
        """Whether the open step can close: its batch is full, or no round can be drawn and none of its own
        candidates is out (none at all, once the data is used up)."""
        sched = self.scheduler
        if sched.batch_full:
            return True
        if sched.wants_round():
            return False
        if sched.exhausted:  # the data is used up: what is out is all that will still come
            return not self.out
        return all(step != sched.step_index for _, step in self.out.values())

    def close(self) -> list[Any]:
        """Finish the step: its rows for TRL (exactly ``rows_per_step``), its state and metrics kept."""
        sched = self.scheduler
        seen = [r for rows in self.rows.values() for r in rows]  # every row reported this step (or carried)
        batch = sched.finish_step()
        rows, missing = [], 0
        for cand in batch.candidates:
            if cand.ticket not in self.rows:  # carried in before a resume: its rows are gone
                missing += 1
            rows += self.rows.get(cand.ticket, [])
        filled = self._fill(rows, seen, batch)
        carried = set(sched.step_record().tickets("trained").tolist())
        self.rows = {t: r for t, r in self.rows.items() if t in carried}
        self.snapshots[sched.step_index] = copy.deepcopy(sched.state_dict())
        for old in [s for s in self.snapshots if s <= sched.step_index - KEPT_SNAPSHOTS]:
            del self.snapshots[old]
        self.metrics[batch.step] = {
            **{METRIC_PREFIX + k: float(v) for k, v in batch.metrics.items()},
            METRIC_PREFIX + "fill_rows": float(filled),
        }
        if missing:
            log.warning(
                "step %d: %d carried group(s) had no rows (resumed run); trained without them", batch.step, missing
            )
        if sched.finished and not self.out and self.exhausted_after is None:  # carried groups trained first
            log.info("every dataset is used up after step %d; stopping training", batch.step)
            self.exhausted_after = batch.step
        if self.on_batch is not None:
            self.on_batch(batch)
        return rows

    def _fill(self, rows: list[Any], seen: list[Any], batch: Batch) -> int:
        """Fill ``rows`` up to ``rows_per_step`` with zero-advantage copies; returns how many were added."""
        if len(rows) > self.rows_per_step:
            raise IntegrationError(
                f"step {batch.step}: the batch's groups hold {len(rows)} rows, more than the {self.rows_per_step} "
                "TRL trains on in one step (a conversation became several rows?)"
            )
        short = self.rows_per_step - len(rows)
        source = rows or seen or (self._last_rows if self.exhausted_after is not None else [])
        if short and not source:
            raise IntegrationError(
                f"step {batch.step}: nothing could be generated (every dataset is used up, or every prompt is "
                "asleep or retired); lower max_steps, raise SchedulerConfig.epochs, or set epochs=None"
            )
        if short and not rows and source is not self._last_rows:
            log.warning("step %d: no group carried signal; this step trains on zero-advantage rows only", batch.step)
        rows += [dataclasses.replace(source[i % len(source)], advantage=0.0) for i in range(short)]
        self._last_rows = rows
        return short

    # -- reward log and state ---------------------------------------------------------------------------------------
    def _log(self) -> RewardLogWriter | None:
        if self._writer is None and self.reward_log is not None:
            self._writer = open_log(self.reward_log, self._resumed)
        return self._writer

    def close_log(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def save(self, folder: Path, steps: int) -> None:
        """Write the state at the close of step ``steps - 1`` (the one TRL's checkpoint ``steps`` trained on)."""
        state = self.snapshots.get(steps)
        if state is None:
            raise IntegrationError(
                f"no scheduler state was kept at the close of step {steps - 1} (kept: {sorted(self.snapshots)}); "
                "the checkpoint would not match its model"
            )
        save_state(folder, state)

    def restore(self, folder: Path, steps: int) -> None:
        """Load the state saved in ``folder`` by the checkpoint of TRL's step ``steps``; its candidates out are
        issued again, before anything new is drawn. Nothing changes unless it loads."""
        state = load_state(folder)
        saved = int(state["meta"]["metrics"]["totals"]["steps"]) if "metrics" in state["meta"] else -1
        if saved != steps:
            raise StateError(
                f"{folder} holds the scheduler after {saved} steps, but TRL resumes after step {steps}: the folder "
                "does not belong to this checkpoint"
            )
        self.scheduler.load_state_dict(state)
        self.out, self.rows, self.snapshots, self.metrics = {}, {}, {steps: copy.deepcopy(state)}, {}
        self._reissue, self._resumed = True, True
        self.close_log()
        if self.reward_log is not None:
            truncate_log(self.reward_log, self.scheduler.step_index)


class ScheduledQueue:
    """TRL's rollout queue for its ``RolloutQueueDataset``: ``get`` returns the rows of closed steps, one at a time,
    running the step loop of :class:`AsyncRun` over the worker's scored groups (``source``) as needed."""

    def __init__(self, run: AsyncRun, source: Any) -> None:
        self.run = run
        self.source = source
        self.ready: deque[Any] = deque()

    def qsize(self) -> int:
        return len(self.ready)

    def get(self, timeout: float | None = None) -> Any:
        """The next row to train on; ``queue.Empty`` after ``timeout`` seconds without one (TRL then checks the
        worker's health and asks again: nothing is lost in between)."""
        deadline = math.inf if timeout is None else time.monotonic() + timeout
        run = self.run
        while not self.ready:
            run.issue()
            if run.closable():
                self.ready.extend(run.close())
                break
            left = deadline - time.monotonic()
            if left <= 0:
                raise queue_module.Empty
            try:
                item = self.source.get(timeout=min(left, 1.0))
            except queue_module.Empty:
                continue
            run.report(item)
        return self.ready.popleft()
