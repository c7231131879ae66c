"""What the TRL adapter refuses before training: a TRL it was not built for, a scheduler TRL's sizes do
not fit, tensor parallelism; and when a checkpoint can fall between two generations.

Pure functions of TRL's classes and ``GRPOConfig`` values; :mod:`snooze.integrations.trl` calls them
at import and in ``SnoozeGRPOTrainer.__init__``.
"""

from __future__ import annotations

import inspect
from typing import Any

from snooze import IntegrationError, SchedulerConfig

SUPPORTED = "1.16"  # the TRL minor version whose private GRPOTrainer methods this integration overrides
TESTED = "1.16.0"
OVERRIDDEN = {  # GRPOTrainer's private methods the adapter overrides and calls, with their parameters
    "_generate_and_score_completions": ("self", "inputs"),
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
    "_load_optimizer_and_scheduler": ("self", "checkpoint"),
}


def check_trl(version: str, trainer: type) -> None:
    """Refuse a TRL whose private methods the adapter cannot rely on: another minor version, or a
    ``GRPOTrainer`` lacking one of :data:`OVERRIDDEN` with its parameters. Run at import."""
    fix = f"install trl=={TESTED} transformers==5.24.0 (snooze's [trl] extra; docs/integrations/trl.md)"
    if not str(version).startswith(SUPPORTED + "."):
        raise IntegrationError(
            f"snooze.integrations.trl supports trl {SUPPORTED}.x (tested with {TESTED}); trl {version} is installed. "
            f"Its GRPOTrainer internals, which the adapter overrides, change between minor versions: {fix}"
        )
    for name, params in OVERRIDDEN.items():
        method = getattr(trainer, name, None)
        found = None if method is None else tuple(inspect.signature(method).parameters)
        if found != params:
            have = "is missing" if found is None else f"takes {found}, not {params}"
            raise IntegrationError(
                f"trl {version}: GRPOTrainer.{name} {have}; the adapter is tested with trl {TESTED}: {fix}"
            )


def check_compatible(cfg: SchedulerConfig, args: Any, group_size: int, world: int, parallelism: Any) -> None:
    """Refuse a scheduler whose sizes or order are not TRL's (``args``: the ``GRPOConfig``; ``group_size``:
    its ``num_generations``; ``world``: the processes), or tensor parallelism (``parallelism``: accelerate's
    ``parallelism_config``, or ``None``)."""
    G = group_size
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
