"""The reference training loop: ``Scheduler.step(rollout_fn)`` then one GRPO update, every step.

Reads top to bottom (CleanRL-style). Each arm of ``snooze compare`` is this loop with a different
:class:`snooze.SchedulerConfig`; a user with their own data runs the same code path.

Files written into ``run_dir``:

- ``metrics.jsonl``: one JSON object per step: every key of ``batch.metrics`` (docs/metrics.md; with
  ``TrainConfig.metrics="compact"`` the five of ``snooze.logs.DASHBOARD`` and the ``total/*`` keys),
  ``train/loss``, ``train/clip_frac``, ``train/kl``, ``train/ratio``, ``train/ratio_max``,
  ``train/staleness``, ``time/step_s``, ``time/elapsed_s``, and on
  evaluation steps ``eval/accuracy`` and ``eval/accuracy/<task>`` with ``eval/updates`` (how many
  updates the evaluated weights had). Step ``s`` is evaluated *before* its update when
  ``s % eval_every == 0`` (so step 0 carries the base model), and the last step *after* its update
  (the final accuracy).
- ``rewards.jsonl``: the reward log (a header line with the run's sizes and policy, then one line per
  generated group, in generation order).
- ``tb/``: TensorBoard events when ``tensorboard`` is installed.
- ``checkpoint/``: model, optimizer, RNG states, stored rollouts and the scheduler, for exact resume
  (and ``curriculum.json``, the curriculum's ``state_dict()``, when training with one).

With ``curriculum=`` (a :class:`snooze.curriculum.Curriculum`) the curriculum is applied to the
scheduler before the first step (and again after a resume), updated with each step's metrics, and
each metrics line carries ``curriculum/stage``: the 0-based index of the stage the step's prompts
were drawn under. ``config.json`` records the curriculum's sha256, so a run is resumed only with the
curriculum it started with (or, without one, only without).

With ``TrainConfig.staleness = k`` generation runs ``k`` steps ahead of training, as in an asynchronous
trainer: step ``t`` builds batch ``t + k`` with the current weights (the scheduler proposes and is
reported to then) and trains on batch ``t``, built ``k`` steps earlier and held in a
:class:`~snooze.trainer.pipeline.Pipeline` (saved in the checkpoint). Each metrics line carries the
scheduler's keys of the batch it trained on; the reward log's ``step`` is the step a group is trained in.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from snooze.core.config import SchedulerConfig
from snooze.core.errors import StateError
from snooze.core.scheduler import Scheduler
from snooze.curriculum import Curriculum
from snooze.logs import LATE_EVALS, METRICS_FILE, REWARDS_FILE, MetricsLogWriter, RewardLogHeader, RewardLogWriter
from snooze.logs.dashboard import select
from snooze.trainer import checkpoint as ckpt
from snooze.trainer._records import read_curriculum_state, read_trainer_meta
from snooze.trainer._resume import check_resume, curriculum_key, reconcile_logs, refuse_orphan_logs, run_lock
from snooze.trainer.config import TrainConfig
from snooze.trainer.evaluate import accuracy_by_task, sampled_accuracy_by_task
from snooze.trainer.grpo import GRPOConfig, grpo_loss
from snooze.trainer.model import ModelConfig, TinyGPT, completion_logprobs
from snooze.trainer.pipeline import Pending, Pipeline
from snooze.trainer.result import RunResult, read_result
from snooze.trainer.rollout import Roller, collate

__all__ = [
    "TrainConfig",
    "RunResult",
    "train",
    "read_result",
    "METRICS_FILE",
    "REWARDS_FILE",
    "CURRICULUM_STATE",
    "LATE_EVALS",
]

logger = logging.getLogger(__name__)

_CKPT = "checkpoint"
CONFIG_FILE = "config.json"
"""The run's configuration (scheduler, trainer, model, curriculum key): in the run folder and in each checkpoint."""
CURRICULUM_STATE = "curriculum.json"
"""The curriculum's ``state_dict()`` inside the checkpoint folder (next to ``trainer.json``)."""


class _Run:
    """The mutable pieces of one run: model, optimizer, generator, scheduler, rollout store, curriculum."""

    def __init__(
        self,
        datasets: Mapping[str, Any],
        sched_cfg: SchedulerConfig,
        cfg: TrainConfig,
        model_cfg: ModelConfig,
        base: Mapping[str, torch.Tensor],
        curriculum: Curriculum | None = None,
    ) -> None:
        torch.manual_seed(cfg.seed)
        self.model = TinyGPT(model_cfg).to(cfg.device)
        self.model.load_state_dict(base)
        self.ref: TinyGPT | None = None
        if cfg.grpo.kl_coef > 0:
            self.ref = TinyGPT(model_cfg).to(cfg.device)
            self.ref.load_state_dict(base)
            self.ref.requires_grad_(False)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.grpo.lr, weight_decay=cfg.grpo.weight_decay)
        self.gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed)
        self.sched = Scheduler(datasets, sched_cfg, seed=cfg.seed)
        self.roller = Roller(self.model, sched_cfg.group_size, cfg.temperature, cfg.max_new_tokens, self.gen)
        self.curriculum = curriculum
        self.pipe = Pipeline()  # batches generated ahead (TrainConfig.staleness), oldest first
        self.step = 0
        self.elapsed = 0.0

    @property
    def drained(self) -> bool:
        """No batch can be trained on any more: the scheduler is finished (the data used up, the groups carried past
        it trained) and no generated batch waits."""
        return self.sched.finished and not self.pipe

    def save(self, root: Path, config: Mapping[str, Any]) -> None:
        """Commit a checkpoint of the run at ``self.step`` into ``root`` (:func:`snooze.trainer.checkpoint.commit`)."""

        def write(folder: Path) -> None:
            torch.save(self.model.state_dict(), folder / "model.pt")
            torch.save(self.opt.state_dict(), folder / "optimizer.pt")
            torch.save({"torch": torch.get_rng_state(), "gen": self.gen.get_state()}, folder / "rng.pt")
            torch.save(self.roller.state_dict(), folder / "rollouts.pt")
            self.pipe.save(folder)
            self.sched.save(folder / "scheduler")
            if self.curriculum is not None:
                (folder / CURRICULUM_STATE).write_text(json.dumps(self.curriculum.state_dict()))
            (folder / CONFIG_FILE).write_text(json.dumps(config, indent=1))
            (folder / "trainer.json").write_text(json.dumps({"step": self.step, "elapsed": self.elapsed}))

        ckpt.commit(root, self.step, write)

    def load(self, folder: Path, datasets: Mapping[str, Any]) -> None:
        """Restore the run from a committed step folder (its files already verified by ``committed``)."""

        def load(name: str) -> Any:
            return torch.load(folder / name, map_location="cpu", weights_only=True)

        try:
            self.model.load_state_dict(load("model.pt"))
            self.opt.load_state_dict(load("optimizer.pt"))
            rng = load("rng.pt")
            torch.set_rng_state(rng["torch"])
            self.gen.set_state(rng["gen"])
            rollouts = load("rollouts.pt")
        except (OSError, RuntimeError, KeyError, TypeError, ValueError, OverflowError) as exc:
            raise StateError(
                f"{folder}: the trainer checkpoint cannot be restored ({type(exc).__name__}: {exc})"
            ) from None
        step, elapsed = read_trainer_meta(folder / "trainer.json")  # (int() read true as step 1, 0.9 as 0)
        self.sched = Scheduler.load(folder / "scheduler", datasets, config=self.sched.config, seed=self.sched.seed)
        self.step, self.elapsed = step, elapsed
        self.pipe.load(folder)
        self.roller.load_state_dict(rollouts, sampled_in=self.step + len(self.pipe) - 1)  # the last batch generated
        if self.curriculum is not None:  # train() checked that the checkpoint has its state
            self.curriculum.load_state_dict(read_curriculum_state(folder / CURRICULUM_STATE))


_UPDATE_KEYS = ("loss", "clip_frac", "kl", "ratio", "ratio_max")


def _update(run: _Run, batch: Pending, cfg: GRPOConfig, device: str, temperature: float) -> dict[str, float]:
    """One GRPO update on the batch's rollouts, the ratio taken against the log-probs of the weights that
    generated them (the behaviour policy); loss and ratio stats (NaN when the batch is empty)."""
    if len(batch) == 0:
        return {f"train/{k}": math.nan for k in _UPDATE_KEYS}
    pid, pmask, tokens, old_logp, mask = collate(batch.groups, device)  # rows [B*G, ...]
    adv = torch.as_tensor(batch.advantages.reshape(-1), dtype=torch.float32, device=device)  # [B*G]
    ref_logp = None
    if run.ref is not None:
        with torch.no_grad():
            ref_logp = completion_logprobs(run.ref, pid, pmask, tokens, mask, temperature, run.roller.group_size)
    stats: dict[str, float] = {}
    for _ in range(cfg.updates_per_batch):
        logp = completion_logprobs(
            run.model, pid, pmask, tokens, mask, temperature, run.roller.group_size
        )  # [B*G, T]: rows by group
        loss, stats = grpo_loss(logp, old_logp, adv, mask, cfg, ref_logp)
        run.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.max_grad_norm)
        run.opt.step()
        stats["loss"] = loss.item()
    return {f"train/{k}": stats[k] for k in _UPDATE_KEYS}


def _eval(
    run: _Run, test_sets: Mapping[str, Sequence[Mapping[str, Any]]], updates: int, samples: int
) -> dict[str, float]:
    out = _accuracy_keys("eval/accuracy", accuracy_by_task(run.model, test_sets, run.roller.max_new))
    if samples > 0:
        acc = sampled_accuracy_by_task(run.model, test_sets, samples, run.roller.temperature, run.roller.max_new)
        out.update(_accuracy_keys("eval/sampled_accuracy", acc))
    out["eval/updates"] = float(updates)
    return out


def _accuracy_keys(prefix: str, acc: Mapping[str, float]) -> dict[str, float]:
    """``prefix`` (mean over tasks) and ``prefix/<task>``."""
    out = {f"{prefix}/{k}": v for k, v in acc.items()}
    out[prefix] = float(np.mean(list(acc.values()))) if acc else math.nan
    return out


def _tensorboard(run_dir: Path, step: int) -> Any:
    """A TensorBoard writer for ``run_dir/tb`` (``None`` without tensorboard). ``purge_step``: a resumed run
    marks the events of steps from ``step`` on as orphaned (a killed run may have written them after its
    last checkpoint), so TensorBoard shows each step once, as the cut-back metrics log does."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(run_dir / "tb"), purge_step=step if step > 0 else None)


def _one_step(
    run: _Run, test_sets: Mapping[str, Sequence[Mapping[str, Any]]], sched_cfg: SchedulerConfig, cfg: TrainConfig
) -> dict[str, Any]:
    """Evaluate (when due), build the batches due through the scheduler, update on the oldest; the step's
    metrics line (the scheduler's keys are those of the batch trained on, from the step that built it)."""
    t0 = time.perf_counter()
    line: dict[str, Any] = {}
    if run.step % cfg.eval_every == 0:
        line.update(_eval(run, test_sets, run.step, cfg.eval_samples))
    _generate(run, sched_cfg, cfg)
    batch = run.pipe.pop()
    stats = _update(run, batch, cfg.grpo, cfg.device, cfg.temperature)
    logged = select(batch.metrics, cfg.metrics, keep=COMPACT_KEEPS)
    line = {**logged, **stats, "train/staleness": float(run.step - batch.version), **line}
    run.step += 1
    if run.step == cfg.steps or run.drained:
        line.update(_eval(run, test_sets, run.step, cfg.eval_samples))
    step_s = time.perf_counter() - t0
    run.elapsed += step_s
    line.update({"step": run.step - 1, "time/step_s": step_s, "time/elapsed_s": run.elapsed})
    return line


COMPACT_KEEPS = ("total/", "curriculum/stage")
"""The scheduler's keys ``TrainConfig.metrics="compact"`` writes beside the five to watch: the totals the run's
result (:func:`~snooze.trainer.result.read_result`) and a resume read, and the curriculum's stage."""


def _generate(run: _Run, sched_cfg: SchedulerConfig, cfg: TrainConfig) -> None:
    """Build, with the current weights, every batch up to ``run.step + cfg.staleness`` (none past the last step).
    The scheduler proposes and is reported to here, at generation time; the batch waits in ``run.pipe``."""
    last = min(run.step + cfg.staleness, cfg.steps - 1)
    while run.step + len(run.pipe) <= last and not run.sched.finished:
        run.roller.begin_step(run.step + len(run.pipe))  # the step the batch is trained in: the reward log's step
        batch = run.sched.step(run.roller)
        metrics = dict(batch.metrics)
        if run.curriculum is not None:  # the stage the batch was drawn under; the next one applies from the next batch
            metrics["curriculum/stage"] = run.curriculum.stage
            run.curriculum.update(run.sched, batch.metrics)
        run.pipe.push(Pending(run.step, run.roller.take(batch.candidates), batch.advantages, metrics))
        run.roller.prune(keep_carried=sched_cfg.carry_surplus)


def _write(mlog: MetricsLogWriter, tb: Any, line: Mapping[str, Any]) -> None:
    mlog.write(line)
    if tb is not None:
        for k, v in line.items():
            if isinstance(v, (int, float)) and math.isfinite(v):
                tb.add_scalar(k, v, int(line["step"]))


def _default_config() -> dict[str, Any]:
    """Each section of ``config.json`` with every field at its default (what a field added to snooze after
    a run started is taken to have been; see :func:`snooze.trainer._resume.config_differences`)."""
    config = {
        "scheduler": SchedulerConfig().to_dict(),
        "train": asdict(TrainConfig()),
        "model": ModelConfig().to_dict(),
    }
    return json.loads(json.dumps(config, default=str))


def _start(run_dir: Path, run: _Run, config: dict[str, Any], datasets: Mapping[str, Any], resume: bool) -> _Run:
    """Restore ``run`` from the committed checkpoint (its logs cut back to it), or start it afresh: a
    checkpoint of step 0 is committed before any log is written, so logs never exist without one."""
    root = run_dir / _CKPT
    folder = ckpt.committed(root) if resume else None
    if folder is not None:
        check_resume(folder, run_dir, config, CURRICULUM_STATE, _default_config())
        run.load(folder, datasets)
        logger.info("resuming %s at step %d", run_dir, run.step)
    elif resume:
        refuse_orphan_logs(run_dir, root)
    if folder is None and run.curriculum is not None:
        run.curriculum.load_state_dict(
            Curriculum(run.curriculum.stages, run.curriculum.drop).state_dict()
        )  # first stage
    if run.curriculum is not None:
        run.curriculum.apply(run.sched)  # after building or restoring the scheduler (idempotent)
    if folder is None:
        run.save(root, config)
        for name in (METRICS_FILE, REWARDS_FILE):
            (run_dir / name).unlink(missing_ok=True)
    else:
        ahead = list(run.pipe)  # batches generated before the checkpoint, trained after it
        reconcile_logs(
            run_dir, run.step, run.step + len(ahead), ahead[-1].metrics.get("total/gen_groups") if ahead else None
        )
    ckpt.write_atomic(run_dir / CONFIG_FILE, json.dumps(config, indent=1))
    return run


def _loop(
    run: _Run,
    run_dir: Path,
    test_sets: Mapping[str, Sequence[Mapping[str, Any]]],
    sched_cfg: SchedulerConfig,
    cfg: TrainConfig,
    config: Mapping[str, Any],
    stop_after: int | None,
    on_step: Callable[[dict[str, Any]], None] | None,
    tb: Any,
) -> None:
    """Train until ``cfg.steps`` (or ``stop_after`` more steps), committing a checkpoint every ``checkpoint_every``
    steps and at the end. The logs are fsynced before each commit: a committed step's lines are on disk."""
    header = RewardLogHeader.of_config(sched_cfg, source="snooze.trainer")
    with (
        RewardLogWriter(
            run_dir / REWARDS_FILE, append=True, header=header, out_of_range=sched_cfg.out_of_range
        ) as rlog,
        MetricsLogWriter(run_dir / METRICS_FILE) as mlog,
    ):
        run.roller.log_to(rlog)
        end = cfg.steps if stop_after is None else min(cfg.steps, run.step + stop_after)
        while run.step < end and not run.drained:  # a resumed run that had used up its data ends here too
            line = _one_step(run, test_sets, sched_cfg, cfg)
            _write(mlog, tb, line)
            if on_step is not None:
                on_step(line)
            if (cfg.checkpoint_every and run.step % cfg.checkpoint_every == 0) or run.step == end or run.drained:
                rlog.sync()
                mlog.sync()
                run.save(run_dir / _CKPT, config)
            if run.drained:
                logger.warning("%s: every dataset is used up at step %d; stopping", run_dir, run.step)
                break


def train(
    run_dir: str | Path,
    datasets: Mapping[str, Any],
    test_sets: Mapping[str, Sequence[Mapping[str, Any]]],
    sched_cfg: SchedulerConfig,
    cfg: TrainConfig,
    model_cfg: ModelConfig,
    base: Mapping[str, torch.Tensor],
    resume: bool = True,
    stop_after: int | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    curriculum: Curriculum | None = None,
) -> RunResult:
    """Train from the ``base`` weights for ``cfg.steps`` steps (resuming from ``run_dir/checkpoint``).

    ``datasets``: name -> records (dicts with ``id``, ``prompt``, ``answer``) or :class:`snooze.Source`.
    ``test_sets``: task name -> held-out records. ``stop_after``: end early after this many steps in
    this call (to test resume). ``on_step`` gets each step's metrics line (for progress bars).
    ``curriculum``: a :class:`~snooze.curriculum.Curriculum` (stateful: one object per run) applied
    before the first step and updated after each; a fresh run starts it at its first stage, a resumed
    run at the checkpoint's stage. Resuming needs the same curriculum (or none) as the run started with.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    config = {"scheduler": sched_cfg.to_dict(), "train": asdict(cfg), "model": model_cfg.to_dict()}
    if curriculum is not None:
        config["curriculum"] = curriculum_key(curriculum)
    config = json.loads(json.dumps(config, default=str))
    with run_lock(run_dir):
        run = _start(run_dir, _Run(datasets, sched_cfg, cfg, model_cfg, base, curriculum), config, datasets, resume)
        tb = _tensorboard(run_dir, run.step)
        try:
            _loop(run, run_dir, test_sets, sched_cfg, cfg, config, stop_after, on_step, tb)
        finally:
            if tb is not None:
                tb.close()
    return read_result(run_dir)
