"""``SnoozeAsyncGRPOTrainer``: TRL's ``AsyncGRPOTrainer`` with the scheduler choosing which prompts its rollout
worker generates and which scored groups reach training.

TRL's asynchronous trainer generates on a vLLM server while it trains: a rollout worker (a child process) walks
the dataset, asks the server for completions, scores them and queues the rows; the trainer batches a fixed number
of rows into each optimizer step and syncs its weights to the server after each. Here (docs/integrations/trl.md,
"The asynchronous trainer"):

- the worker generates the prompts the scheduler issues (``_async_worker``), and pushes each scored group whole;
- the trainer's rollout queue is the scheduler's step loop under delayed feedback (``_async_run``): dynamic
  sampling bounded by ``max_gen_rounds``, snoozing, quotas, the core's ``max_staleness`` in place of TRL's own
  staleness drop; each optimizer step trains on exactly one scheduler batch;
- the scheduler's state goes into every TRL checkpoint (``checkpoint-N/snooze/``, written before TRL's files),
  candidates out included, and is restored by ``resume_from_checkpoint``, where they are issued again.

Everything else is TRL's: generation, scoring and advantages (in the worker), packing, the loss, weight sync.
"""

from __future__ import annotations

import inspect
import logging
import math
import multiprocessing as mp
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from snooze import Batch, IntegrationError, Scheduler, SchedulerConfig
from snooze.integrations._paths import log_path
from snooze.integrations.trl import _build as build
from snooze.integrations.trl import _checks as checks
from snooze.integrations.trl import _data as data

try:
    import trl
    from transformers import TrainerCallback
    from trl.experimental.async_grpo import AsyncGRPOConfig, AsyncGRPOTrainer
    from trl.experimental.async_grpo import async_grpo_trainer as trl_trainer
    from trl.experimental.async_grpo import async_rollout_worker as trl_worker

    from snooze.integrations.trl._async_worker import Inherited, SnoozeRolloutLoop
except ImportError as exc:  # a TRL without trl.experimental.async_grpo, or with another one
    raise IntegrationError(
        f"SnoozeAsyncGRPOTrainer needs TRL's AsyncGRPOTrainer as {checks.ASYNC_RANGE} has it ({exc}): "
        f"pip install '{checks.ASYNC_RANGE}'"
    ) from exc

from snooze.integrations.trl._async_run import AsyncRun, ScheduledQueue  # noqa: E402  (after TRL)
from snooze.integrations.trl._callbacks import STATE_DIR, no_state  # noqa: E402

__all__ = ["SnoozeAsyncGRPOTrainer", "ASYNC_SOURCES"]

log = logging.getLogger(__name__)

ASYNC_SOURCES = {
    "config": "AsyncGRPOConfig",
    "batch_size": "per_device_train_batch_size x gradient_accumulation_steps x processes / num_generations",
    "group_size": "num_generations",
}
REFUSED = {  # AsyncGRPOTrainer arguments the async trainer refuses, and why
    "tools": "a conversation with tool calls can become several training rows, so a step's rows are no fixed count",
    "environment_factory": "data and rewards owned by an environment are not scheduled",
    "rollout_worker": "the trainer runs TRL's own rollout worker, generating the scheduler's prompts",
}


class SnoozeAsyncGRPOTrainer(AsyncGRPOTrainer):  # type: ignore[misc]
    """TRL's ``AsyncGRPOTrainer`` whose rollout worker generates the scheduler's prompts and whose steps train on
    the scheduler's batches (module doc).

    Built exactly as ``AsyncGRPOTrainer`` (``model``, ``reward_funcs``, ``args``, ``train_dataset``, ...), plus
    ``snooze_config``, ``scheduler``, ``reward_log`` and ``on_batch`` as :class:`SnoozeGRPOTrainer` takes them
    (``on_batch`` runs on the main process, where the scheduler lives). The scheduler's ``batch_size`` is TRL's
    rows per step over ``num_generations``; its ``max_staleness`` is ``AsyncGRPOConfig.max_staleness`` unless
    ``snooze_config`` sets it. The default is the recommended setting without the carry (a step closes the moment
    its batch is full, so there is no surplus: ``_data.NO_SURPLUS``). Refused before TRL loads anything: ``tools``,
    ``environment_factory``, a custom ``rollout_worker``, a ``token_budget`` (rows are batched by count: TRL's
    ``token_budget=0``).
    """

    def __init__(
        self,
        *args: Any,
        scheduler: Scheduler | None = None,
        snooze_config: SchedulerConfig | Mapping[str, Any] | None = None,
        reward_log: str | Path | None = None,
        on_batch: Callable[[Batch], None] | None = None,
        **kwargs: Any,
    ) -> None:
        checks.check_trl(trl.__version__, _classes(), checks.ASYNC, checks.ASYNC_OLDEST)  # before TRL loads anything
        build.check_own(scheduler, snooze_config, on_batch)
        self._reward_log_path = log_path(reward_log, "reward_log") if reward_log is not None else None
        bound = build.bind(AsyncGRPOTrainer.__init__, args, kwargs)
        if bound is None:  # arguments TRL does not take: TRL says which
            super().__init__(*args, **kwargs)
            raise IntegrationError("AsyncGRPOTrainer's arguments could not be read")  # pragma: no cover
        sched, rows_per_step = _scheduler_before_loading(bound, scheduler, snooze_config)
        super().__init__(*bound.args[1:], **bound.kwargs)
        self.scheduler = sched
        self.run: AsyncRun | None = None
        if self.accelerator.is_main_process:
            self.run = self._wire(sched, rows_per_step, on_batch)
        self.add_callback(_StepEnd(self))

    def _wire(self, sched: Scheduler, rows_per_step: int, on_batch: Callable[[Batch], None] | None) -> AsyncRun:
        """Make TRL's rollout worker generate the scheduler's prompts, and its rollout queue the scheduler's."""
        worker = self.rollout_worker
        if not hasattr(worker, "_loop_kwargs"):
            raise IntegrationError(
                f"trl {trl.__version__}: AsyncRolloutWorker keeps no _loop_kwargs; the adapter is tested with "
                f"{checks.ASYNC_RANGE}: pip install '{checks.ASYNC_RANGE}'"
            )
        prompts = mp.get_context("spawn").Queue()
        worker._loop_cls = SnoozeRolloutLoop
        worker._loop_kwargs["prompt_queue"] = Inherited(prompts)
        window = int(self.args.max_inflight_tasks) // int(self.args.num_generations)
        run = AsyncRun(
            sched,
            lambda ticket, record: prompts.put((ticket, record)),
            rows_per_step,
            window,
            self._reward_log_path,
            on_batch,
        )
        self.rollout_queue = ScheduledQueue(run, worker.rollout_buffer)
        return run

    # -- TRL hooks ------------------------------------------------------------------------------------------------
    def get_train_dataloader(self) -> Any:
        loader = super().get_train_dataloader()
        if self._rollout_dataset is not None:  # the scheduler's max_staleness decides what is too stale, not TRL's
            self._rollout_dataset.max_staleness = math.inf
        return loader

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        if self.run is not None and self.args.should_save:  # before TRL's files
            folder = Path(self._get_output_dir(trial=trial)) / f"checkpoint-{self.state.global_step}" / STATE_DIR
            self.run.save(folder, self.state.global_step)
        super()._save_checkpoint(model, trial)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None and self.run is not None:
            self.restore_scheduler(checkpoint)

    def restore_scheduler(self, checkpoint: str | Path) -> None:
        """Load the scheduler state of TRL checkpoint ``checkpoint`` (its ``snooze/``), cut the reward log back to
        it, and issue its candidates out again when training starts. A checkpoint without it is a ``StateError``."""
        if self.run is None:
            return
        folder = Path(checkpoint) / STATE_DIR
        if not folder.is_dir():
            from snooze import StateError

            raise StateError(no_state(Path(checkpoint)).replace("SnoozeGRPOTrainer", "SnoozeAsyncGRPOTrainer"))
        steps = _steps_of(Path(checkpoint))
        self.run.restore(folder, steps)
        # TRL's epoch-driven stop counts distinct groups trained; its rollout_state.json counts dataset rows
        self._groups_before_resume = int(self.scheduler.metrics().get("total/train_groups", 0))
        log.info("restored the scheduler at step %d from %s", steps, folder)

    def train(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().train(*args, **kwargs)
        finally:
            if self.run is not None:
                self.run.close_log()


class _StepEnd(TrainerCallback):  # type: ignore[misc]
    """At each optimizer step's end: the metrics of the scheduler step it trained on into TRL's logs, and the stop
    once the data is used up."""

    def __init__(self, trainer: SnoozeAsyncGRPOTrainer) -> None:
        self.trainer = trainer

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        run = self.trainer.run
        if run is None:
            return
        for key, value in run.metrics.pop(state.global_step - 1, {}).items():
            self.trainer._metrics["train"][key].append(value)
        if run.exhausted_after is not None and state.global_step > run.exhausted_after:
            control.should_training_stop = True


def _classes() -> dict[str, Any]:
    return {
        "AsyncGRPOTrainer": AsyncGRPOTrainer,
        "AsyncRolloutWorker": trl_worker.AsyncRolloutWorker,
        "_AsyncRolloutLoop": trl_worker._AsyncRolloutLoop,
        "RolloutQueueDataset": trl_trainer.RolloutQueueDataset,
    }


def _steps_of(checkpoint: Path) -> int:
    name = checkpoint.name
    if not name.startswith("checkpoint-") or not name.removeprefix("checkpoint-").isdigit():
        raise IntegrationError(f"{checkpoint}: pass a TRL checkpoint-N folder (written by SnoozeAsyncGRPOTrainer)")
    return int(name.removeprefix("checkpoint-"))


def _batch_by_count(args: Any) -> None:
    """TRL's ``token_budget``, set to 0 when unset: rows are batched by count, so one scheduler batch is one step."""
    if args.token_budget is None:
        args.token_budget = 0
    if args.token_budget != 0:
        raise IntegrationError(
            f"AsyncGRPOConfig.token_budget={args.token_budget}: SnoozeAsyncGRPOTrainer batches rows by count (one "
            "scheduler batch is one optimizer step); leave token_budget unset or 0 and size steps with "
            "per_device_train_batch_size x gradient_accumulation_steps"
        )


def _scheduler_before_loading(
    bound: inspect.BoundArguments, scheduler: Scheduler | None, snooze_config: Any
) -> tuple[Scheduler, int]:
    """The scheduler and TRL's rows per step, from AsyncGRPOTrainer's bound arguments, before TRL loads anything."""
    given = bound.arguments
    refused = [name for name in REFUSED if given.get(name) is not None]
    if refused:
        raise IntegrationError(f"SnoozeAsyncGRPOTrainer does not take {refused[0]}=: {REFUSED[refused[0]]}")
    if not given.get("reward_funcs"):
        raise IntegrationError(
            "SnoozeAsyncGRPOTrainer needs reward_funcs (rewards owned by an environment are refused)"
        )
    args = build.fill_args(bound, AsyncGRPOConfig, "AsyncGRPO")
    _batch_by_count(args)
    G = int(args.num_generations)
    rows = int(args.per_device_train_batch_size) * int(args.gradient_accumulation_steps) * int(args.world_size)
    if rows % G:
        raise IntegrationError(
            f"TRL trains on {rows} rows a step (per_device_train_batch_size x gradient_accumulation_steps x "
            f"processes), not a multiple of num_generations={G}: a step must hold whole groups"
        )
    weights = build.reward_weights(bound, args)
    defaults = {**data.NO_SURPLUS, "max_staleness": int(args.max_staleness)}
    sched = build.build_scheduler(
        bound,
        scheduler,
        snooze_config,
        {"batch_size": rows // G, "group_size": G},
        weights,
        args.seed,
        ASYNC_SOURCES,
        defaults,
    )
    if scheduler is not None and (sched.config.group_size != G or sched.config.batch_size * G != rows):
        raise IntegrationError(
            f"scheduler: batch_size={sched.config.batch_size}, group_size={sched.config.group_size}, but TRL trains "
            f"on {rows} rows a step with num_generations={G}: set group_size={G}, batch_size={rows // G}"
        )
    return sched, rows
