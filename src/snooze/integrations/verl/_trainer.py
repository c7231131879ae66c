"""``SnoozeTrainer``: verl 0.9's synchronous v1 trainer with its prompts drawn from the scheduler.

Registered in verl's trainer registry as ``trainer.v1.trainer_mode=snooze``. It is verl's
``PPOTrainerSync`` with seven small overrides and nothing else changed (actor, critic, reference,
rollout servers, reward loop, advantages, weight sync and logging are verl's):

- ``trainer_mode`` reads ``"sync"``: verl branches on that name (TransferQueue checkpoints, exact
  refills, in-flight re-issue are for the async modes), and this trainer is the sync one.
- ``_build_replay_buffer``: :class:`SnoozeReplayBuffer`, after the config checks of ``_options``.
- ``_init_dataloader``: reads the stable prompt ids, builds the scheduler, and puts
  :class:`SnoozePromptLoader` in place of ``train_dataloader``.
- ``_fetch_one_gen_batch``: verl's, then the uids it assigned are bound to the issued prompts.
- ``prepare_step``: submits the step's first round (``gen_batch_size`` prompts, not a whole batch).
- ``_save_checkpoint`` / ``_load_checkpoint``: the scheduler's state in ``global_step_N/snooze/``,
  written before verl's ``data.pt`` and ``latest_checkpointed_iteration.txt``, read back on resume.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync
from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.dataset.rl_dataset import collate_fn

from snooze import IntegrationError
from snooze.integrations.verl._buffer import SnoozeReplayBuffer
from snooze.integrations.verl._options import SnoozeOptions, read_options
from snooze.integrations.verl._prompts import PromptIndex, SnoozePromptLoader, prompt_keys
from snooze.integrations.verl._resume import check_state_folder, resumed_folder
from snooze.integrations.verl._run import SnoozeRun

__all__ = ["SnoozeTrainer", "TRAINER_MODE", "STATE_DIR"]

TRAINER_MODE = "snooze"  # trainer.v1.trainer_mode
STATE_DIR = "snooze"  # the scheduler's state folder inside each verl global_step_N/, beside data.pt


@register_trainer(TRAINER_MODE)
class SnoozeTrainer(PPOTrainerSync):  # type: ignore[misc]
    """verl's sync PPO trainer whose prompts come from a :class:`~snooze.Scheduler` (see the module doc)."""

    snooze_options: SnoozeOptions
    snooze: SnoozeRun

    @property  # type: ignore[override]
    def trainer_mode(self) -> str:
        return "sync"

    @trainer_mode.setter
    def trainer_mode(self, name: str) -> None:  # verl assigns the registry name here
        self.registered_mode = name

    def _build_replay_buffer(self) -> SnoozeReplayBuffer:
        self.snooze_options = read_options(self.config)
        resumed = resumed_folder(self.config)
        if resumed is not None:  # a resume that cannot load the scheduler fails here, before any worker starts
            check_state_folder(resumed / STATE_DIR)
        sampler = self.config.trainer.v1.sampler
        return SnoozeReplayBuffer(
            trainer_mode="sync",
            trainer_config=self.config.trainer.v1.get("sync", {}),
            max_off_policy_threshold=sampler.max_off_policy_threshold,
            max_off_policy_strategy=sampler.max_off_policy_strategy,
            sampler_kwargs=sampler.sampler_kwargs,
            poll_interval=self.snooze_options.poll_interval,
            refill_fn=self._add_prompts_to_generate,
            reward_metric=self.snooze_options.reward_metric,
        )

    def _init_dataloader(self) -> None:
        super()._init_dataloader()  # datasets, validation loader, step counts; its train loader is replaced
        self.snooze = SnoozeRun(PromptIndex(prompt_keys(self.train_dataset)), self.snooze_options)
        self.train_dataloader = SnoozePromptLoader(self.snooze, self.train_dataset, collate_fn, STATE_DIR)
        self.train_dataloader_it = None
        self.replay_buffer.attach(self.snooze)

    def _fetch_one_gen_batch(self) -> Any:
        batch = super()._fetch_one_gen_batch()
        extras = [getattr(e, "data", e) for e in batch["extra_info"]]
        keys = [(str(s), e["index"]) for s, e in zip(batch["data_source"], extras)]
        self.snooze.bind(list(batch["uid"]), keys)
        return batch

    def prepare_step(self) -> dict:
        self._add_prompts_to_generate(self.snooze.config.gen_size)
        return {}

    def _checkpoint_folder(self) -> Path:
        return Path(self.config.trainer.default_local_dir) / f"global_step_{self.global_steps}"

    def _resumed_folder(self) -> Path:
        """The folder verl's ``_load_checkpoint`` just resumed from (its own two rules)."""
        trainer = self.config.trainer
        folder = trainer.resume_from_path if trainer.resume_mode == "resume_path" else str(self._checkpoint_folder())
        return Path(folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder))

    def _save_checkpoint(self) -> None:
        self.snooze.save(
            self._checkpoint_folder() / STATE_DIR
        )  # first: a crash leaves verl's previous checkpoint latest
        super()._save_checkpoint()

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()
        if self.global_steps > 0:  # verl resumed a checkpoint (0: a fresh run)
            loaded = self.train_dataloader.loaded
            if loaded is not None and int(loaded["step"]) != self.global_steps:
                raise IntegrationError(f"data.pt is from step {loaded['step']}, not {self.global_steps}")
            self.snooze.restore(self._resumed_folder() / STATE_DIR, self.global_steps)


_ASYNC_WHY = (
    "trainer.v1.trainer_mode={mode} is not supported: in verl's {base} mode prompts are submitted ahead of the "
    "feedback (num_warmup_batches of prompts in flight before the first step, and generation running on while the "
    "actor trains), so the scheduler would draw each prompt before the groups that decide whether it sleeps are "
    "scored, and the groups of one step would land in another step's batch. Use trainer.v1.trainer_mode=snooze "
    "(verl's sync mode with the scheduler's step loop)."
)


@register_trainer("snooze_colocate_async")
class SnoozeColocateAsyncTrainer(PPOTrainerColocateAsync):  # type: ignore[misc]
    """Refuses: see ``_ASYNC_WHY``."""

    def __init__(self, config: Any) -> None:
        raise IntegrationError(_ASYNC_WHY.format(mode="snooze_colocate_async", base="colocate_async"))


@register_trainer("snooze_separate_async")
class SnoozeSeparateAsyncTrainer(PPOTrainerSeparateAsync):  # type: ignore[misc]
    """Refuses: see ``_ASYNC_WHY``."""

    def __init__(self, config: Any) -> None:
        raise IntegrationError(_ASYNC_WHY.format(mode="snooze_separate_async", base="separate_async"))
