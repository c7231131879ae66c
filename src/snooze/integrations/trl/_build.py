"""What the TRL trainers do before TRL loads anything: check their own arguments, bind TRL's, and build the
scheduler, so that a bad ``snooze_config``, ``scheduler=`` or dataset fails in milliseconds, before the model is
loaded (``from_pretrained``) rather than after.

TRL's own arguments are bound by name as its ``__init__`` would bind them; a missing ``args`` is filled with the
config TRL itself would make (``<model name>-GRPO``), so the sizes the scheduler is built from are exactly the
ones TRL then uses. Arguments TRL does not take are left to TRL to refuse.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from snooze import IntegrationError, Scheduler, SchedulerConfig
from snooze._kit.checks import is_int
from snooze.integrations.trl import _checks as checks
from snooze.integrations.trl import _data as data

__all__ = ["check_own", "bind", "fill_args", "reward_weights", "build_scheduler"]


def check_own(scheduler: Any, snooze_config: Any, on_batch: Any) -> None:
    """The arguments snooze adds to TRL's trainers, checked first."""
    if scheduler is not None and not isinstance(scheduler, Scheduler):
        raise IntegrationError(
            f"scheduler must be a snooze.Scheduler (or None: built from train_dataset), got {type(scheduler).__name__}"
        )
    if scheduler is not None and snooze_config is not None:
        raise IntegrationError(
            "pass either scheduler= (built by hand) or snooze_config= (the trainer builds it), not both"
        )
    if on_batch is not None and not callable(on_batch):
        raise IntegrationError(
            f"on_batch must be a function of a snooze.Batch (or None), got {type(on_batch).__name__}"
        )


def bind(init: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> inspect.BoundArguments | None:
    """TRL's ``__init__`` arguments by name (``None`` when TRL would refuse them: it then says which)."""
    try:
        return inspect.signature(init).bind(None, *args, **kwargs)
    except TypeError:
        return None


def fill_args(bound: inspect.BoundArguments, config_cls: type, suffix: str) -> Any:
    """``bound``'s ``args``, set to the config TRL makes when none is given (``<model name>-<suffix>``)."""
    given = bound.arguments
    if given.get("args") is None:
        model = given.get("model")
        if isinstance(model, str):
            name = model
        else:
            from trl.trainer.utils import get_config_model_id

            name = get_config_model_id(model.config)
        given["args"] = config_cls(f"{name.split('/')[-1]}-{suffix}")
    return given["args"]


def reward_weights(bound: inspect.BoundArguments, args: Any) -> list[float]:
    """The weight of each reward function, as TRL sets them (``args.reward_weights``, else 1 each)."""
    funcs = bound.arguments.get("reward_funcs")
    n = len(funcs) if isinstance(funcs, list) else int(funcs is not None)
    weights = getattr(args, "reward_weights", None)
    return [float(w) for w in weights] if weights is not None else [1.0] * n


def build_scheduler(
    bound: inspect.BoundArguments,
    scheduler: Scheduler | None,
    snooze_config: SchedulerConfig | Mapping[str, Any] | None,
    trl_fields: Mapping[str, Any],
    weights: list[float],
    seed: int,
    sources: Mapping[str, str] = data.SYNC_SOURCES,
    defaults: Mapping[str, Any] | None = None,
    screening: bool = False,
) -> Scheduler:
    """The trainer's scheduler, checked against ``train_dataset``: ``scheduler`` itself when given (its prompts
    must be the dataset's), else one built over the dataset's rows with ``snooze_config`` laid over the sizes
    ``trl_fields`` TRL sets (``sources``: where each comes from) and the range of the weighted reward sum, over
    ``defaults``. ``screening``: whether the trainer takes partial groups (``screen_size``; else refused here; the
    sync trainer's conditions are :func:`~snooze.integrations.trl._checks.check_screening`'s)."""
    train_dataset = bound.arguments.get("train_dataset")
    data.refuse_dataset(train_dataset)
    from datasets import Dataset

    if not isinstance(train_dataset, Dataset):
        raise IntegrationError(
            f"train_dataset must be a datasets.Dataset (its rows are the prompts), got {type(train_dataset).__name__}"
        )
    if scheduler is not None:
        if not screening:
            checks.refuse_partial_groups(scheduler.config)
        data.check_same_prompts(scheduler, train_dataset)
        return scheduler
    if not is_int(seed) or seed < 0:  # (int() read True as 1 and 0.9 as 0)
        raise IntegrationError(f"GRPOConfig.seed={seed!r}: must be an integer >= 0 (it seeds the scheduler)")
    config = data.scheduler_config(snooze_config, trl_fields, data.reward_range_of(weights), sources, defaults)
    if not screening:
        checks.refuse_partial_groups(config)
    return Scheduler({data.DATASET: data.source_of(train_dataset)}, config, seed=seed)
