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
- ``prepare_step``: submits the step's first round (``gen_batch_size`` prompts, not a whole batch). With
  ``screen_size`` each row carries verl's per-prompt ``__rollout_n__`` (a screen's k, a rest's G - k; see
  :mod:`._buffer` for how a rest joins its screen's group).
- ``_save_checkpoint`` / ``_load_checkpoint``: the scheduler's state in ``global_step_N/snooze/``,
  written before verl's ``data.pt`` and ``latest_checkpointed_iteration.txt``, read back on resume.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.utils.dataset.rl_dataset import collate_fn

from snooze.integrations.verl._buffer import SnoozeReplayBuffer
from snooze.integrations.verl._options import VerlOptions, read_options
from snooze.integrations.verl._prompts import PromptIndex, SnoozePromptLoader, check_loader_state, prompt_keys
from snooze.integrations.verl._resume import check_state_folder, resumed_folder
from snooze.integrations.verl._run import SnoozeRun

__all__ = ["SnoozeTrainer", "SnoozeTrainerBase", "TRAINER_MODE", "STATE_DIR"]

TRAINER_MODE = "snooze"  # trainer.v1.trainer_mode
STATE_DIR = "snooze"  # the scheduler's state folder inside each verl global_step_N/, beside data.pt


class SnoozeTrainerBase:
    """What every snooze trainer adds to its verl base class: the stable prompt ids bound to verl's uids,
    and the scheduler's state in verl's checkpoint folder. Mixed in before a verl ``PPOTrainer`` subclass."""

    snooze_options: VerlOptions
    snooze: SnoozeRun
    config: Any
    global_steps: int
    train_dataloader: Any

    def _buffer_kwargs(self, mode: str) -> dict[str, Any]:
        """The replay buffer's arguments, after the config checks (``mode``: the verl mode run)."""
        self.snooze_options = read_options(self.config, mode)
        resumed = resumed_folder(self.config)
        if resumed is not None:  # a resume that cannot load the scheduler fails here, before any worker starts
            check_state_folder(resumed / STATE_DIR)
        sampler = self.config.trainer.v1.sampler
        return dict(
            trainer_mode=mode,
            trainer_config=self.config.trainer.v1.get(mode, {}),
            max_off_policy_threshold=sampler.max_off_policy_threshold,
            max_off_policy_strategy=sampler.max_off_policy_strategy,
            sampler_kwargs=sampler.sampler_kwargs,
            poll_interval=self.snooze_options.poll_interval,
            refill_fn=self._add_prompts_to_generate,  # type: ignore[attr-defined]
            reward_metric=self.snooze_options.reward_metric,
        )

    def _attach_scheduler(self, loader_cls: type = SnoozePromptLoader) -> None:
        """After verl's ``_init_dataloader``: the scheduler, and its loader in place of ``train_dataloader``."""
        dataset = self.train_dataset  # type: ignore[attr-defined]
        self.snooze = SnoozeRun(PromptIndex(prompt_keys(dataset)), self.snooze_options)
        self.train_dataloader = loader_cls(self.snooze, dataset, collate_fn, STATE_DIR)
        self.train_dataloader_it = None
        self.replay_buffer.attach(self.snooze)  # type: ignore[attr-defined]

    def _fetch_one_gen_batch(self) -> Any:
        batch = super()._fetch_one_gen_batch()  # type: ignore[misc]
        extras = [getattr(e, "data", e) for e in batch["extra_info"]]
        keys = [(str(s), e["index"]) for s, e in zip(batch["data_source"], extras)]
        self.snooze.bind(list(batch["uid"]), keys)
        return batch

    def _checkpoint_folder(self) -> Path:
        return Path(self.config.trainer.default_local_dir) / f"global_step_{self.global_steps}"

    def _resumed_folder(self) -> Path:
        """The folder verl's ``_load_checkpoint`` just resumed from (its own two rules)."""
        trainer = self.config.trainer
        folder = trainer.resume_from_path if trainer.resume_mode == "resume_path" else str(self._checkpoint_folder())
        return Path(folder if os.path.isabs(folder) else os.path.join(os.getcwd(), folder))

    def _load_checkpoint(self) -> None:
        super()._load_checkpoint()  # type: ignore[misc]
        if self.global_steps > 0:  # verl resumed a checkpoint (0: a fresh run)
            folder = self._resumed_folder()
            loaded = self.train_dataloader.loaded
            if loaded is not None:
                check_loader_state(loaded, folder / "data.pt", self.global_steps, STATE_DIR)
            self.snooze.restore(folder / STATE_DIR, self.global_steps)


@register_trainer(TRAINER_MODE)
class SnoozeTrainer(SnoozeTrainerBase, PPOTrainerSync):  # type: ignore[misc]
    """verl's sync PPO trainer whose prompts come from a :class:`~snooze.Scheduler` (see the module doc)."""

    @property  # type: ignore[override]
    def trainer_mode(self) -> str:
        return "sync"

    @trainer_mode.setter
    def trainer_mode(self, name: str) -> None:  # verl assigns the registry name here
        self.registered_mode = name

    def _build_replay_buffer(self) -> SnoozeReplayBuffer:
        return SnoozeReplayBuffer(**self._buffer_kwargs("sync"))

    def _init_dataloader(self) -> None:
        super()._init_dataloader()  # datasets, validation loader, step counts; its train loader is replaced
        self._attach_scheduler()

    def prepare_step(self) -> dict:
        if self.snooze.wants_round():  # not when the groups carried in (carry_surplus) fill the batch already
            self._add_prompts_to_generate(self.snooze.config.gen_size)
        return {}

    def _save_checkpoint(self) -> None:
        self.snooze.save(self._checkpoint_folder() / STATE_DIR)  # first: a crash leaves verl's previous one latest
        super()._save_checkpoint()
