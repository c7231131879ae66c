"""What the TRL adapter refuses before training: a TRL release outside the tested range or whose internals
changed, a scheduler TRL's sizes do not fit, partial groups where a trainer cannot train them, tensor
parallelism; and when a checkpoint can fall between two generations.

Pure functions of TRL's classes and config values; the trainers call them in ``__init__``, before TRL loads
anything (a model included).

**The TRL range.** The adapter overrides or calls a few private methods of TRL's trainers (:data:`SYNC`,
:data:`ASYNC`: names and parameters, from ``inspect.signature``). Every release from :data:`OLDEST` to
:data:`NEWEST` is tested (CI runs the TRL test files on both ends). A release below the range is refused; a
release above it is accepted, with a warning, as long as the internals below are unchanged; internals that
differ are refused on any release, naming the range, rather than met as a ``TypeError`` (or a silently wrong
batch) in the middle of a run.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Mapping
from typing import Any

from snooze import IntegrationError, SchedulerConfig

__all__ = [
    "OLDEST",
    "NEWEST",
    "RANGE",
    "SYNC",
    "ASYNC",
    "ASYNC_OLDEST",
    "ASYNC_RANGE",
    "check_trl",
    "internals_of",
    "check_compatible",
    "refuse_partial_groups",
    "check_screening",
    "off_boundary_saves",
]

log = logging.getLogger(__name__)

OLDEST = "1.0.0"  # the oldest TRL release the adapter is tested with (CI's second TRL job: scripts/test_trl_oldest.sh)
NEWEST = "1.16.0"  # the newest TRL release the adapter is tested with (the [trl] extra's upper bound)
RANGE = f"trl>={OLDEST},<={NEWEST}"
INSTALL = f"pip install '{RANGE}' (snooze's [trl] extra; docs/integrations/trl.md)"

SYNC: dict[str, dict[str, tuple[str, ...] | None]] = {  # GRPOTrainer's methods SnoozeGRPOTrainer overrides and calls
    "GRPOTrainer": {
        "_generate_and_score_completions": ("self", "inputs"),
        "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
        "_load_optimizer_and_scheduler": ("self", "checkpoint"),
    },
}
ASYNC_OLDEST = "1.16.0"  # the async trainer's: TRL's AsyncGRPOTrainer is experimental and changes every release
ASYNC_RANGE = f"trl>={ASYNC_OLDEST},<={NEWEST}"
ASYNC: dict[str, dict[str, tuple[str, ...] | None]] = {  # trl.experimental.async_grpo's, for SnoozeAsyncGRPOTrainer
    "AsyncGRPOTrainer": {
        "get_train_dataloader": ("self",),
        "_save_checkpoint": ("self", "model", "trial"),
        "_load_optimizer_and_scheduler": ("self", "checkpoint"),
    },
    "AsyncRolloutWorker": {
        "__init__": ("self", "queue_maxsize", "child_ready_timeout", "loop_kwargs"),
        "_loop_cls": None,  # (an attribute: the loop class the worker spawns)
    },
    "_AsyncRolloutLoop": {
        "_repeat_iterator": ("self",),
        "_generate_one": ("self", "prompt", "tool_dict", "tools", "group_id"),
        "_score_group": ("self", "group"),
        "_push_metrics": ("self", "values"),
    },
    "RolloutQueueDataset": {
        "__init__": (
            "self",
            "rollout_queue",
            "model_version_fn",
            "check_health_fn",
            "stale_after_s",
            "metrics",
            "max_staleness",
            "poll_interval_s",
            "report_to",
        ),
    },
}


def _release(version: str) -> tuple[int, ...] | None:
    """``"1.16.0"`` -> ``(1, 16, 0)``; pre-releases and local builds compare by their release numbers."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - TRL depends on packaging
        return None
    try:
        return Version(str(version)).release
    except InvalidVersion:
        return None


Wanted = Mapping[str, Mapping[str, "tuple[str, ...] | None"]]


def internals_of(classes: Mapping[str, Any], wanted: Wanted) -> list[str]:
    """What differs between ``classes`` (name -> class) and the methods and parameters ``wanted`` (``None``: an
    attribute that must exist); empty when nothing does."""
    differ = []
    for owner, methods in wanted.items():
        cls = classes.get(owner)
        for name, params in methods.items():
            method = getattr(cls, name, None) if cls is not None else None
            if params is None:
                if method is None:
                    differ.append(f"{owner}.{name} is missing")
                continue
            found = None if method is None else tuple(inspect.signature(method).parameters)
            if found != params:
                have = "is missing" if found is None else f"takes {found}, not {params}"
                differ.append(f"{owner}.{name} {have}")
    return differ


def check_trl(version: str, classes: Mapping[str, Any], wanted: Wanted, oldest_tested: str = OLDEST) -> None:
    """Refuse a TRL below ``trl>=oldest_tested,<=NEWEST`` (:data:`RANGE`; the async trainer's: :data:`ASYNC_RANGE`),
    or one whose ``classes`` differ from the methods ``wanted`` (:data:`SYNC`, :data:`ASYNC`); warn of a release
    above the range whose internals match. Run when a trainer is built, before TRL loads anything."""
    supported = f"trl>={oldest_tested},<={NEWEST}"
    install = f"pip install '{supported}' (snooze's [trl] extra; docs/integrations/trl.md)"
    release, oldest, newest = _release(version), _release(oldest_tested), _release(NEWEST)
    if release is not None and oldest is not None and release < oldest:
        raise IntegrationError(
            f"snooze.integrations.trl supports {supported}; trl {version} is installed, older than the oldest release "
            f"tested, whose trainer internals the adapter relies on: {install}"
        )
    differ = internals_of(classes, wanted)
    if differ:
        raise IntegrationError(
            f"trl {version}: {'; '.join(differ)}. The adapter overrides these TRL internals and is tested with "
            f"{supported}: {install}"
        )
    if release is None:
        log.warning(
            "trl %r: not a version snooze can read (a git build?), so its release is unchecked; the internals the "
            "adapter relies on match. Tested with %s",
            version,
            supported,
        )
    if release is not None and newest is not None and release > newest:
        log.warning(
            "trl %s is newer than the newest release snooze is tested with (%s); the internals it relies on are "
            "unchanged, so it runs, untested. Report what breaks, or install %s",
            version,
            NEWEST,
            RANGE,
        )


def refuse_partial_groups(cfg: SchedulerConfig) -> None:
    """Partial groups (``screen_size``) are refused by ``SnoozeAsyncGRPOTrainer``, by name."""
    if cfg.screen_size is not None:
        raise IntegrationError(
            f"SchedulerConfig.screen_size={cfg.screen_size}: partial groups (a screen of k rollouts, then the rest) "
            "are not supported by SnoozeAsyncGRPOTrainer: its rollout worker generates num_generations completions "
            "of every prompt it is given. Build the scheduler with screen_size=None, or use SnoozeGRPOTrainer (on "
            "one process) or the reference trainer (snooze.trainer.train), which support it "
            "(docs/integrations/trl.md)"
        )


def check_screening(cfg: SchedulerConfig, args: Any, world: int) -> None:
    """Partial groups (``screen_size``) in ``SnoozeGRPOTrainer``: refused on several processes, and with the
    settings under which TRL scales advantages by a whole generation round (``scale_rewards="batch"``,
    ``multi_objective_aggregation="normalize_then_sum"``), which a group joined from two rounds does not have."""
    k = cfg.screen_size
    if k is None:
        return
    also = "or build the scheduler with screen_size=None (docs/integrations/trl.md)"
    if world > 1:
        raise IntegrationError(
            f"SchedulerConfig.screen_size={k} on {world} processes: SnoozeGRPOTrainer supports partial groups (a "
            "screen of k rollouts, then the rest) on one process only (a round of screens and rests is not spread "
            f"over ranks). Train on one process, use the reference trainer (snooze.trainer.train), {also}"
        )
    scale = getattr(args, "scale_rewards", "group")
    scale = {True: "group", False: "none"}.get(scale, scale)  # as GRPOConfig reads a bool
    if scale == "batch":
        raise IntegrationError(
            f"GRPOConfig.scale_rewards='batch' with SchedulerConfig.screen_size={k}: TRL scales advantages by the "
            "standard deviation of a whole generation round, and a screened group's rollouts come from two rounds, "
            f"so its advantages cannot be TRL's. Use scale_rewards='group' (TRL's default) or 'none', {also}"
        )
    aggregation = getattr(args, "multi_objective_aggregation", "sum_then_normalize")
    if aggregation != "sum_then_normalize":
        raise IntegrationError(
            f"GRPOConfig.multi_objective_aggregation={aggregation!r} with SchedulerConfig.screen_size={k}: TRL "
            "normalizes those advantages over a whole generation round, and a screened group's rollouts come from "
            f"two rounds, so its advantages cannot be TRL's. Use 'sum_then_normalize' (TRL's default), {also}"
        )


def check_compatible(cfg: SchedulerConfig, args: Any, group_size: int, world: int, parallelism: Any) -> None:
    """Refuse a scheduler whose sizes or order are not TRL's (``args``: the ``GRPOConfig``; ``group_size``:
    its ``num_generations``; ``world``: the processes), partial groups where :func:`check_screening` does, or
    tensor parallelism (``parallelism``: accelerate's ``parallelism_config``, or ``None``)."""
    G = group_size
    check_screening(cfg, args, world)
    if parallelism is not None and getattr(parallelism, "tp_size", 1) > 1:
        raise IntegrationError(
            f"parallelism_config.tp_size={parallelism.tp_size}: SnoozeGRPOTrainer, like TRL's GRPOTrainer, gives "
            "every process its own rows, which tensor-parallel ranks cannot take. Train data-parallel only (DDP, "
            "DeepSpeed ZeRO or FSDP, tp_size=1) and shard generation with vllm_tensor_parallel_size"
        )
    if cfg.group_size != G:
        raise IntegrationError(
            f"SchedulerConfig.group_size={cfg.group_size} but GRPOConfig.num_generations={G}; set them equal"
        )
    if cfg.shuffle != bool(args.shuffle_dataset):
        raise IntegrationError(
            f"GRPOConfig.shuffle_dataset={args.shuffle_dataset} but SchedulerConfig.shuffle={cfg.shuffle}: "
            "the prompts generated come in the scheduler's order, so build it with "
            f"SchedulerConfig(shuffle={bool(args.shuffle_dataset)}) (or leave scheduler= out)"
        )
    if cfg.batch_size * G != args.generation_batch_size:
        raise IntegrationError(
            f"SchedulerConfig.batch_size={cfg.batch_size} groups x {G} completions = {cfg.batch_size * G}, but "
            f"TRL's generation_batch_size={args.generation_batch_size} (all {world} process(es) "
            f"together); set batch_size = generation_batch_size / num_generations = "
            f"{args.generation_batch_size // G}"
        )


def off_boundary_saves(args: Any, num_iterations: int) -> int | None:
    """The optimizer steps of one generation when ``args.save_steps`` is not a multiple of them (a
    checkpoint can then fall between two generations); ``None`` when every save is on a boundary, or
    when there is no boundary to align to (a ``save_steps`` below 1, a fractional cycle, no step saves)."""
    strategy = getattr(args.save_strategy, "value", args.save_strategy)
    per_generation = args.steps_per_generation * num_iterations / args.gradient_accumulation_steps
    if strategy != "steps" or not float(args.save_steps).is_integer() or not per_generation.is_integer():
        return None
    return int(per_generation) if int(args.save_steps) % int(per_generation) else None
