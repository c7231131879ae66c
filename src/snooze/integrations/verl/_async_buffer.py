"""``SnoozeAsyncReplayBuffer``: verl's async replay buffer with the scheduler choosing each step's groups.

In verl's async modes prompts are submitted ahead of training (``num_warmup_batches`` before the first
step, a batch in each step's ``prepare_step``, one prompt per evicted group), so a group finishes in
whatever step it finishes in. Here each poll of ``sample`` does, in the training partition::

    withdraw failed groups, and finished ones verl's off-policy rule calls stale (max_off_policy_strategy=drop)
    report the oldest finished groups to the scheduler, as many as its open batch has room for
    clear every reported group that did not enter the batch (no signal, too stale for the scheduler's
        max_staleness, over a quota); refill one prompt per group withdrawn or cleared (verl's k for k),
        as long as the step has rounds left (max_gen_rounds, gen_batch_size prompts a round, the step's batch
        the first)
    once the scheduler's batch is full (and no in-flight prompt makes verl's strategy=wait block), or no round
        is left and nothing of the scheduler's is in flight: close the step

Finished groups beyond the batch's room stay in TransferQueue, as verl's own sampleable groups do, and
are reported in a later step: each group is reported once, to the step then open. What verl trains on
is exactly the scheduler's batch. Validation is verl's own async sampling, unchanged.
"""

from __future__ import annotations

import time

from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

from snooze import IntegrationError
from snooze.integrations.verl._buffer import TRAIN, SnoozeReplayBuffer

__all__ = ["SnoozeAsyncReplayBuffer"]

STALE_METRIC = "training/off_policy/evicted_samples"  # verl's name for groups evicted as stale
ROUNDS_METRIC = "snooze/verl/rounds"  # the step's generation in rounds of gen_batch_size: what max_gen_rounds bounds
REFILLS_METRIC = "snooze/verl/refills"  # prompts submitted in the step to replace groups that cannot train


class _RoundBound:
    """``max_gen_rounds`` in the async modes, counted as the sync step loop counts it: ``gen_size`` groups a
    round. The step's first round is the batch verl submits in ``prepare_step``; the refills that replace groups
    that cannot train make the next rounds, so at most ``(max_gen_rounds - 1) * gen_size`` prompts are refilled
    in one step. Refills are submitted in pieces that never cross a round's end, so the scheduler counts at least
    one round per round begun (its ``gen/rounds`` counts verl's submissions): a step cut short has reached
    ``max_gen_rounds`` there too, and ``gen/exhausted`` and its warning are the sync path's."""

    def __init__(self, max_rounds: int, gen_size: int) -> None:
        self.size, self.budget, self.refilled = gen_size, (max_rounds - 1) * gen_size, 0

    @property
    def spent(self) -> bool:
        return self.refilled >= self.budget

    @property
    def rounds(self) -> int:
        return 1 + -(-self.refilled // self.size)

    def take(self, k: int) -> list[int]:
        """The refills to submit for ``k`` groups evicted, in pieces within one round each (fewer once spent)."""
        k = min(k, self.budget - self.refilled)
        pieces = []
        while k > 0:
            piece = min(k, self.size - self.refilled % self.size)
            pieces.append(piece)
            self.refilled += piece
            k -= piece
        return pieces


class SnoozeAsyncReplayBuffer(SnoozeReplayBuffer, ReplayBufferAsync):  # type: ignore[misc]
    """A v1 ``ReplayBufferAsync`` whose training batches are the scheduler's (see the module doc).

    ``refill_fn`` is verl's ``_add_prompts_to_generate``: the scheduler draws each refill prompt."""

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        if partition_id != TRAIN:
            return ReplayBufferAsync.sample(self, global_steps, partition_id, batch_size)
        run = self.run
        if run is None:
            raise IntegrationError("SnoozeAsyncReplayBuffer has no scheduler attached; it is built by the trainer")
        if batch_size != run.config.batch_size:
            raise IntegrationError(
                f"verl asked for {batch_size} groups but the scheduler builds batches of {run.config.batch_size}"
            )
        metrics: dict[str, float] = {}
        bound = _RoundBound(run.config.max_gen_rounds, run.config.gen_size)
        last_debug = time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            evicted = self._take_async_groups(global_steps, metrics)
            if evicted:
                for piece in bound.take(evicted):  # verl's async rule, k evicted for k submitted, within max_gen_rounds
                    self.refill_fn(piece)
                continue
            if run.scheduler.batch_full and self._has_enough_samples(global_steps, TRAIN, 0, set()):
                break  # (with max_off_policy_strategy=wait verl blocks while an in-flight prompt is at the limit)
            if bound.spent and not run.open:
                break  # no round left and nothing in flight: the step ends short, as the sync loop at max_gen_rounds
            last_debug = self._wait_for_next_poll(TRAIN, last_debug)
        train, drop, step_metrics = run.finish_step(in_flight=True)
        self._sync_metadata_from_transfer_queue()
        snapshot = dict(self.partitions[TRAIN])
        self._clear_groups(TRAIN, set(drop))
        metrics.update({ROUNDS_METRIC: float(bound.rounds), REFILLS_METRIC: float(bound.refilled)})
        return self._materialize_batch(TRAIN, train, snapshot), {**metrics, **step_metrics}

    def _take_async_groups(self, global_steps: int, metrics: dict[str, float]) -> int:
        """One poll's withdrawals and reports; returns how many groups left TransferQueue untrained."""
        run = self.run
        stale = [u for u in self._stale_terminal_keys(global_steps, TRAIN) if u in run.open]
        failed = [u for u in run.open if u in self.failure_keys[TRAIN]]
        gone = 0
        for uids, why in ((failed, "failed in rollout"), (stale, "were evicted as stale (max_off_policy_threshold)")):
            if uids:
                run.cancel(uids, why=why, cleared=True)
                self._clear_groups(TRAIN, set(uids))
                gone += len(uids)
        if stale:
            metrics[STALE_METRIC] = metrics.get(STALE_METRIC, 0) + len(stale)
        room = run.scheduler.room()
        if room <= 0:
            return gone
        order = self.prompt_global_steps[TRAIN]
        finished = [u for u in run.open if u in self.finished_keys[TRAIN]]  # run.open: issue order
        finished = sorted(finished, key=lambda u: order.get(u, 0))[:room]  # oldest first, as verl selects
        if finished:
            keys, rewards = self._read_groups(finished)
            reported = [run.open[u] for u in finished]
            run.report(finished, keys, rewards, self._group_tokens(finished))
            # what did not enter the batch never trains: no signal, too stale (max_staleness), or over a quota
            taken = run.scheduler.in_batch(reported)
            cleared = {u for u, inside in zip(finished, taken) if not inside}
            self._clear_groups(TRAIN, cleared)
            gone += len(cleared)
        return gone

    def in_flight(self) -> set[str]:
        """The prompt uids TransferQueue holds in the training partition (any status)."""
        self._sync_metadata_from_transfer_queue()
        return set(self.prompt_global_steps[TRAIN])

    def clear(self, uids: set[str]) -> None:
        self._clear_groups(TRAIN, uids)
