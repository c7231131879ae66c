"""The snooze trainers of verl 0.9's asynchronous v1 modes.

``trainer.v1.trainer_mode=snooze_colocate_async`` is verl's ``PPOTrainerColocateAsync`` (rollout
colocated with training, partial rollout; generation runs ``num_warmup_batches`` ahead, so each step
trains mostly on groups submitted a step earlier: verl's one-step-off-policy-like mode) with prompts
drawn from the scheduler. Its overrides, beside :class:`SnoozeTrainerBase`'s:

- ``trainer_mode`` reads ``"colocate_async"`` (verl branches on that name: TransferQueue checkpoints,
  exact refills, ``data.gen_batch_size=1``, re-issue of in-flight prompts on resume all stay on).
- ``_build_replay_buffer``: :class:`SnoozeAsyncReplayBuffer` after the config checks (``_options``).
- ``_next_train_batch``: the scheduler draws the prompts verl asks for in one round, before verl fetches
  them one by one (``_fetch_one_gen_batch``); snoozed and retired prompts are skipped there, with the
  feedback reported so far.
- ``_save_checkpoint``: the scheduler's state, its in-flight candidates among it, and the uid of each
  (``snooze/inflight.json``) before verl's files; verl then saves TransferQueue with the same prompts.
- ``_reissue_inflight_prompts`` (on resume): verl re-issues its checkpointed pending/running prompts
  under their uids, so each stays the scheduler's pending candidate and is reported when it finishes;
  a candidate TransferQueue lost is withdrawn (``gen/cancelled``), a prompt the scheduler did not issue
  is cleared.

``trainer.v1.trainer_mode=snooze_separate_async`` is verl's ``PPOTrainerSeparateAsync`` (rollout on standalone
replicas, weights sent through ``checkpoint_engine.backend`` after each step, partial rollout) with the same
overrides. verl splits its step into ``trainer.v1.separate_async.parameter_sync_step`` samples (default 4) while
the scheduler closes one batch a step, so it must be 1 (refused otherwise, at build).
"""

from __future__ import annotations

import logging
from typing import Any

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync
from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync

from snooze.integrations.verl._async_buffer import SnoozeAsyncReplayBuffer
from snooze.integrations.verl._options import read_options
from snooze.integrations.verl._prompts import OnePromptLoader
from snooze.integrations.verl._trainer import STATE_DIR, SnoozeTrainerBase

__all__ = ["SnoozeColocateAsyncTrainer", "SnoozeSeparateAsyncTrainer", "COLOCATE_MODE", "SEPARATE_MODE"]

log = logging.getLogger(__name__)

COLOCATE_MODE = "snooze_colocate_async"
SEPARATE_MODE = "snooze_separate_async"


class SnoozeAsyncTrainerBase(SnoozeTrainerBase):
    """The overrides both async snooze trainers share (the module doc); ``VERL_MODE``: the verl mode run."""

    VERL_MODE = ""

    @property  # type: ignore[override]
    def trainer_mode(self) -> str:
        return self.VERL_MODE

    @trainer_mode.setter
    def trainer_mode(self, name: str) -> None:  # verl assigns the registry name here
        self.registered_mode = name

    def _build_replay_buffer(self) -> SnoozeAsyncReplayBuffer:
        return SnoozeAsyncReplayBuffer(**self._buffer_kwargs(self.VERL_MODE))

    def _init_dataloader(self) -> None:
        super()._init_dataloader()  # verl sets data.gen_batch_size=1 here (exact refills)
        self._attach_scheduler(OnePromptLoader)

    def _next_train_batch(self, num_prompts: int | None = None) -> Any:
        self.snooze.draw(self.config.data.train_batch_size if num_prompts is None else num_prompts)
        return super()._next_train_batch(num_prompts)

    def _save_checkpoint(self) -> None:
        self.snooze.save(self._checkpoint_folder() / STATE_DIR, in_flight=True)  # before verl's files
        super()._save_checkpoint()

    def _reissue_inflight_prompts(self, partition_id: str = "train") -> int:
        count = super()._reissue_inflight_prompts(partition_id)
        held = self.replay_buffer.in_flight()
        lost = [uid for uid in self.snooze.open if uid not in held]
        if lost:
            self.snooze.cancel(
                lost, why="were in flight in the scheduler's state but not in TransferQueue's", cleared=True
            )
        foreign = held - set(self.snooze.open)
        if foreign:
            log.warning("%d prompt(s) in TransferQueue were not issued by the scheduler; cleared", len(foreign))
            self.replay_buffer.clear(foreign)
        self._restored_tq_prompt_count -= len(foreign)
        return count


@register_trainer(COLOCATE_MODE)
class SnoozeColocateAsyncTrainer(SnoozeAsyncTrainerBase, PPOTrainerColocateAsync):  # type: ignore[misc]
    """verl's colocated async PPO trainer whose prompts come from a :class:`~snooze.Scheduler`."""

    VERL_MODE = "colocate_async"


@register_trainer(SEPARATE_MODE)
class SnoozeSeparateAsyncTrainer(SnoozeAsyncTrainerBase, PPOTrainerSeparateAsync):  # type: ignore[misc]
    """verl's separate async PPO trainer (standalone rollout replicas, weights synced through its checkpoint
    engine after each step) whose prompts come from a :class:`~snooze.Scheduler`; ``parameter_sync_step=1``."""

    VERL_MODE = "separate_async"

    def __init__(self, config: Any) -> None:
        read_options(config, self.VERL_MODE)  # the snooze refusals first: verl's __init__ asserts on the same keys
        super().__init__(config)
