"""``SnoozeAsyncReplayBuffer``: verl's async replay buffer with the scheduler choosing each step's groups.

In verl's async modes prompts are submitted ahead of training (``num_warmup_batches`` before the first
step, a batch in each step's ``prepare_step``, one prompt per evicted group), so a group finishes in
whatever step it finishes in. Here each poll of ``sample`` does, in the training partition::

    withdraw failed groups, and finished ones verl's off-policy rule calls stale (max_off_policy_strategy=drop)
    report the oldest finished groups to the scheduler, as many as its open batch has room for
    clear every reported group that did not enter the batch (no signal, too stale for the scheduler's
        max_staleness, over a quota); refill one prompt per group withdrawn or cleared (verl's k for k)
    once the scheduler's batch is full (and no in-flight prompt makes verl's strategy=wait block): close the step

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
        last_debug = time.time()
        while True:
            self._sync_metadata_from_transfer_queue()
            evicted = self._take_async_groups(global_steps, metrics)
            if evicted:
                self.refill_fn(evicted)  # verl's async rule: k groups evicted, k prompts submitted
                continue
            if run.scheduler.batch_full and self._has_enough_samples(global_steps, TRAIN, 0, set()):
                break  # (with max_off_policy_strategy=wait verl blocks while an in-flight prompt is at the limit)
            last_debug = self._wait_for_next_poll(TRAIN, last_debug)
        train, drop, step_metrics = run.finish_step(in_flight=True)
        self._sync_metadata_from_transfer_queue()
        snapshot = dict(self.partitions[TRAIN])
        self._clear_groups(TRAIN, set(drop))
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
            run.report(finished, keys, rewards)
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
