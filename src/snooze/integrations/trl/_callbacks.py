"""The callbacks :class:`~snooze.integrations.trl.SnoozeGRPOTrainer` adds to TRL's trainer, and what a checkpoint
without scheduler state is told."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from snooze import Scheduler
from snooze.integrations._curriculum import save_curriculum

__all__ = ["STATE_DIR", "PoolEpochCallback", "SnoozeCheckpointCallback", "no_state"]

log = logging.getLogger(__name__)

STATE_DIR = "snooze"  # scheduler state folder inside each TRL checkpoint-N/


class PoolEpochCallback(TrainerCallback):  # type: ignore[misc]
    """Sets TRL's ``state.epoch`` (the ``epoch`` of every log line, and of ``trainer_state.json``) to the passes
    over the scheduler's pool after each optimizer step (:meth:`Scheduler.progress`): the prompts generated are
    the scheduler's, so the dataloader's passes would say nothing."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        state.epoch = self.scheduler.progress()


class SnoozeCheckpointCallback(TrainerCallback):  # type: ignore[misc]
    """Writes the scheduler's state into each TRL checkpoint as ``checkpoint-N/snooze/`` (and a curriculum's,
    when the run has one, as ``checkpoint-N/snooze_curriculum.json``)."""

    def __init__(self, scheduler: Scheduler, curriculum: Any = None) -> None:
        self.scheduler = scheduler
        self.curriculum = curriculum

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not args.should_save:  # process 0 (each node's first process with save_on_each_node), as TRL's files
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}" / STATE_DIR
        self.scheduler.save(folder)
        save_curriculum(self.curriculum, folder.parent)
        log.info("saved scheduler state (step %d) to %s", self.scheduler.step_index, folder)


def no_state(checkpoint: Path) -> str:
    if not checkpoint.is_dir():
        return f"{checkpoint} is not a folder; pass a checkpoint-N folder SnoozeGRPOTrainer wrote (in args.output_dir)"
    if checkpoint.name == STATE_DIR and (checkpoint / "LATEST").exists():
        return f"{checkpoint} is the scheduler's folder; pass the TRL checkpoint that holds it, {checkpoint.parent}"
    return (
        f"{checkpoint} has no scheduler state ({STATE_DIR}/): it was not written by SnoozeGRPOTrainer (a plain "
        "GRPOTrainer's checkpoint, or another run's folder). Resume from a checkpoint SnoozeGRPOTrainer wrote, or "
        "start the scheduler fresh: load the model weights from it and call train() without resume_from_checkpoint"
    )
