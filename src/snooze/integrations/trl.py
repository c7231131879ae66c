"""TRL integration: a ``GRPOTrainer`` whose prompts come from a :class:`~snooze.Scheduler`.

Why an override of the generation step (and not a sampler + callback pair): TRL's ``RepeatSampler``
fixes the generation batch before anything is generated, and nothing after generation may change its
size. Dynamic sampling needs to generate *again* within one optimisation step until the batch holds
enough signal groups, which only the generation step itself can do. So
:class:`SnoozeGRPOTrainer` overrides ``_generate_and_score_completions``: it ignores the prompts the
dataloader drew and runs the scheduler's step loop (SPEC section 4) instead, calling TRL's own
generation and scoring once per round, then hands TRL the signal groups it kept::

    trainer = SnoozeGRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=ds,
                                processing_class=tok, scheduler=sched, reward_log="out/rewards.jsonl")
    trainer.train()

Everything else is TRL's: the loss, the advantages within each kept group (``scale_rewards``), the
reference model, vLLM. The scheduler's metrics go into TRL's logs under ``snooze/`` and its state is
saved into every TRL checkpoint (``checkpoint-N/snooze/``) and restored by ``resume_from_checkpoint``.
Limits (see ``docs/integrations/trl.md``): one process only; text prompts only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from snooze.core.checkpoint import load_state
from snooze.core.errors import IntegrationError
from snooze.core.scheduler import Scheduler
from snooze.core.types import Batch, Candidate
from snooze.integrations._tensors import concat_rows, count_loss_tokens, inert_copy, take_rows
from snooze.integrations.reward_log import RewardLogWriter, truncate_reward_log, write_groups

try:
    import torch
    from transformers import TrainerCallback
    from trl import GRPOTrainer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise IntegrationError(
        f"snooze.integrations.trl needs TRL ({exc}); install it with: pip install 'snooze-rl[trl]'"
    ) from exc

__all__ = ["SnoozeGRPOTrainer", "SnoozeCheckpointCallback", "STATE_DIR", "METRIC_PREFIX"]

log = logging.getLogger(__name__)

STATE_DIR = "snooze"  # scheduler state folder inside each TRL checkpoint-N/
METRIC_PREFIX = "snooze/"  # scheduler metrics in TRL's logs: "snooze/gen/rounds", "snooze/efficiency", ...


class SnoozeCheckpointCallback(TrainerCallback):  # type: ignore[misc]
    """Writes the scheduler's state into each TRL checkpoint as ``checkpoint-N/snooze/``."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if not state.is_world_process_zero:
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}" / STATE_DIR
        self.scheduler.save(folder)
        log.info("saved scheduler state (step %d) to %s", self.scheduler.step_index, folder)


class SnoozeGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
    """TRL's ``GRPOTrainer`` with snooze's dynamic sampling, filtering and snoozing.

    Takes every ``GRPOTrainer`` argument plus:

    - ``scheduler``: the :class:`~snooze.Scheduler` that picks prompts. Its records are TRL rows (a
      ``"prompt"`` plus any columns the reward functions read). ``group_size`` must equal
      ``num_generations`` and ``batch_size * group_size`` must equal TRL's ``generation_batch_size``.
    - ``reward_log``: path of the per-group JSONL reward log ``snooze replay`` reads (optional).
    - ``on_batch``: called with each finished :class:`~snooze.Batch` (metrics, kept groups).

    ``train_dataset`` is still required by TRL (it sizes epochs); the prompts its dataloader draws are
    ignored, so pass the same data the scheduler holds.
    """

    def __init__(
        self,
        *args: Any,
        scheduler: Scheduler,
        reward_log: str | Path | None = None,
        on_batch: Callable[[Batch], None] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(scheduler, Scheduler):
            raise IntegrationError(f"scheduler must be a snooze.Scheduler, got {type(scheduler).__name__}")
        super().__init__(*args, **kwargs)
        self.scheduler = scheduler
        self.on_batch = on_batch
        self._reward_log_path = Path(reward_log) if reward_log is not None else None
        self._reward_log: RewardLogWriter | None = None
        self._resumed = False
        self._rows: dict[int, tuple[dict[str, Any], int]] = {}  # ticket -> (round output, group index)
        self._round_rewards: torch.Tensor | None = None
        self._check_compatible()
        self.add_callback(SnoozeCheckpointCallback(scheduler))

    def _check_compatible(self) -> None:
        cfg, G = self.scheduler.config, self.num_generations
        if self.accelerator.num_processes != 1:
            raise IntegrationError(
                f"SnoozeGRPOTrainer runs in one process; this run has {self.accelerator.num_processes}. Each process "
                "would need the same scheduler decisions, which TRL cannot share. Train on one process, or use verl "
                "(snooze.integrations.verl) to scale out."
            )
        if cfg.group_size != G:
            raise IntegrationError(
                f"SchedulerConfig.group_size={cfg.group_size} but GRPOConfig.num_generations={G}; set them equal"
            )
        if cfg.batch_size * G != self.args.generation_batch_size:
            raise IntegrationError(
                f"SchedulerConfig.batch_size={cfg.batch_size} groups x {G} completions = {cfg.batch_size * G}, but "
                f"TRL's generation_batch_size={self.args.generation_batch_size}; set batch_size = "
                f"generation_batch_size / num_generations = {self.args.generation_batch_size // G}"
            )

    # -- TRL hooks ------------------------------------------------------------------------------
    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        self._round_rewards = rewards_per_func  # [N*G, n_funcs], kept for the scheduler's report
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        if not self.model.training:  # evaluation: TRL's own path, no scheduling
            return super()._generate_and_score_completions(inputs)
        return self._scheduled_generation()

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            self.restore_scheduler(checkpoint)

    # -- the step loop --------------------------------------------------------------------------
    def _scheduled_generation(self) -> dict[str, Any]:
        sched, cfg = self.scheduler, self.scheduler.config
        last: dict[str, Any] | None = None
        while not sched.batch_full and sched.round < cfg.max_gen_rounds:
            cands = sched.propose()
            if not cands:
                break
            last = self._generate_round(cands)
        batch = sched.finish_step()
        out = self._assemble(batch, last)
        self._log_metrics(batch.metrics)
        if sched.exhausted:
            log.info("every dataset is used up after step %d; stopping training", batch.step)
            self.control.should_training_stop = True
        if self.on_batch is not None:
            self.on_batch(batch)
        return out

    def _generate_round(self, cands: list[Candidate]) -> dict[str, Any]:
        G = self.num_generations
        inputs = []
        for c in cands:
            record = c.record
            if not isinstance(record, dict) or "prompt" not in record:
                raise IntegrationError(
                    f"prompt {c.dataset!r}/{c.id!r}: TRL needs each scheduler record to be a dict with a 'prompt' "
                    f"field; got {type(record).__name__} with fields {sorted(record) if isinstance(record, dict) else []}"
                )
            inputs.extend(dict(record) for _ in range(G))
        self._round_rewards = None
        out = super()._generate_and_score_completions(inputs)
        rewards = self._group_rewards(len(cands))
        self.scheduler.report(cands, rewards)
        write_groups(self._writer(), self.scheduler.step_index, cands, rewards)
        for i, c in enumerate(cands):
            self._rows[c.ticket] = (out, i)
        return out

    def _group_rewards(self, n: int) -> np.ndarray:
        """The weighted reward sum TRL logs as ``reward``, ``[n, G]``; unscorable rows get the range's low end."""
        if self._round_rewards is None:
            raise IntegrationError("TRL scored no rewards for this round (is a custom rollout_func skipping scoring?)")
        per_func = self._round_rewards.detach().float().cpu()
        weights = self.reward_weights.detach().float().cpu()
        unscorable = torch.isnan(per_func).all(dim=1)
        rewards = (per_func * weights.unsqueeze(0)).nansum(dim=1)
        rewards[unscorable] = float(self.scheduler.config.reward_range[0])
        return rewards.view(n, self.num_generations).numpy().astype(np.float64)

    def _assemble(self, batch: Batch, last: dict[str, Any] | None) -> dict[str, Any]:
        """TRL's generation output for the batch's groups, rounded up to TRL's accumulation split."""
        G = self.num_generations
        parts, missing = [], 0
        for c in batch.candidates:
            if c.ticket not in self._rows:  # carried in before a resume: its completions are gone
                missing += 1
                continue
            out, i = self._rows[c.ticket]
            parts.append(take_rows(out, torch.arange(i * G, (i + 1) * G, device=out["advantages"].device)))
        if missing:
            log.warning(
                "step %d: %d carried group(s) had no completions (resumed run); trained without them",
                batch.step,
                missing,
            )
        carried = set(self.scheduler.batch.ticket.tolist())  # surplus carried into the next step
        self._rows = {t: v for t, v in self._rows.items() if t in carried}
        if not parts:
            if last is None:
                raise IntegrationError(
                    f"step {batch.step}: nothing could be generated (every dataset is used up or every prompt is "
                    "asleep/retired); lower max_steps, raise SchedulerConfig.epochs, or set epochs=None"
                )
            log.warning(
                "step %d: no group carried signal in %d round(s); this step trains on nothing",
                batch.step,
                self.scheduler.config.max_gen_rounds,
            )
            parts = [inert_copy(take_rows(last, torch.arange(G, device=last["advantages"].device)), G)]
        rows = concat_rows(parts, self._pad_id())
        spg = self.args.steps_per_generation
        n = rows["advantages"].shape[0]
        short = (-n) % spg if n >= spg else spg - n
        if short:
            rows = concat_rows([rows, inert_copy(rows, short)], self._pad_id())
        rows["num_items_in_batch"] = count_loss_tokens(rows)
        return rows

    def _pad_id(self) -> int:
        pad = self._tokenizer.pad_token_id
        return int(pad) if pad is not None else 0

    # -- logs, reward log, state ----------------------------------------------------------------
    def _log_metrics(self, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self._metrics["train"][METRIC_PREFIX + key].append(float(value))

    def _writer(self) -> RewardLogWriter | None:
        if self._reward_log is None and self._reward_log_path is not None:
            self._reward_log = RewardLogWriter(self._reward_log_path, append=self._resumed)
        return self._reward_log

    def restore_scheduler(self, checkpoint: str | Path) -> bool:
        """Load the scheduler state saved in TRL checkpoint ``checkpoint``; False if it holds none."""
        folder = Path(checkpoint) / STATE_DIR
        if not folder.exists():
            log.warning("%s has no scheduler state (%s/); the scheduler starts fresh", checkpoint, STATE_DIR)
            return False
        self.scheduler.load_state_dict(load_state(folder))
        self._rows.clear()
        self._resumed = True
        if self._reward_log_path is not None:
            if self._reward_log is not None:
                self._reward_log.close()
                self._reward_log = None
            dropped = truncate_reward_log(self._reward_log_path, self.scheduler.step_index)
            log.info("resume: dropped %d reward-log line(s) from steps >= %d", dropped, self.scheduler.step_index)
        log.info("restored scheduler state at step %d from %s", self.scheduler.step_index, folder)
        return True

    def train(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().train(*args, **kwargs)
        finally:
            if self._reward_log is not None:
                self._reward_log.close()
                self._reward_log = None
