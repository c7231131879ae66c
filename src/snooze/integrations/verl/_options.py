"""``trainer.v1.snooze``: the snooze trainer's options, read from verl's Hydra config and checked once.

verl keeps each trainer mode's settings under ``trainer.v1.<mode>`` (``trainer.v1.sync``,
``trainer.v1.colocate_async``, ...), so the snooze trainer's live under ``trainer.v1.snooze``: any
:class:`~snooze.SchedulerConfig` field, plus the few options below that are not scheduler fields.
Sizes verl already has are read from verl and may not be set twice (one source of truth).
Everything is checked when verl builds the trainer, before any GPU worker starts.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snooze import IntegrationError, SchedulerConfig
from snooze.core._checks import is_int
from snooze.integrations._paths import log_path

__all__ = ["SnoozeOptions", "read_options", "OPTIONS_KEY"]

OPTIONS_KEY = "trainer.v1.snooze"
REWARD_LOG_NAME = "snooze_rewards.jsonl"  # default reward log, in trainer.default_local_dir
_FROM_VERL = {  # scheduler field -> the verl key it is read from
    "batch_size": "data.train_batch_size",
    "gen_batch_size": "data.gen_batch_size",
    "group_size": "actor_rollout_ref.rollout.n",
}


@dataclass(frozen=True)
class SnoozeOptions:
    """What the snooze trainer needs beyond verl's own config."""

    scheduler: SchedulerConfig
    """Batch construction. ``weights`` is ``None`` here and defaults, once the data is read, to each
    ``data_source``'s row count (verl's own sampling is uniform over rows)."""

    seed: int = 0
    """Seeds the scheduler's per-dataset streams. Default: ``data.seed`` when set, else 0."""

    reward_log: Path | None = None
    """Per-group JSONL reward log that ``snooze replay`` reads. Default:
    ``${trainer.default_local_dir}/snooze_rewards.jsonl``; ``false`` turns it off."""

    reward_metric: str = "reward"
    """Which reward the scheduler classifies groups by: ``reward`` is verl's canonical pre-KL reward
    (the sum of each trajectory's ``rm_scores``, as ``algorithm.filter_groups.metric=reward``); any
    other name reads that field of the reward function's ``reward_extra_info`` (e.g. ``acc``)."""

    poll_interval: float = 2.0
    """Seconds between looks at TransferQueue while groups are still being generated (verl's default)."""

    curriculum: Path | None = None
    """A curriculum file (``snooze stratify``'s ``curriculum.json``, its ids ``(data_source, extra_info.index)``
    as ``snooze baseline --dataset`` writes them): applied to the scheduler, updated after each step, its state
    saved with each checkpoint. The sync trainer only."""


_OWN = tuple(f.name for f in dataclasses.fields(SnoozeOptions) if f.name != "scheduler")


def _select(config: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(config, key, default=None)


def _plain(node: Any) -> dict[str, Any]:
    from omegaconf import DictConfig, OmegaConf

    if node is None:
        return {}
    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]
    if isinstance(node, Mapping):
        return dict(node)
    raise IntegrationError(f"{OPTIONS_KEY} must be a mapping of options, got {type(node).__name__}")


def _is_mapping(node: Any) -> bool:
    from omegaconf import DictConfig

    return isinstance(node, (DictConfig, Mapping))


def _mapping(config: Any, key: str) -> Any:
    """The node at ``key`` when it is a mapping (a scalar set there has none of the sub-keys read here)."""
    node = _select(config, key)
    return node if _is_mapping(node) else {}


def _refuse_conflicts(config: Any, verl_mode: str) -> None:
    """Settings that would run verl's own loop beside the scheduler's, or silently do nothing."""
    if _select(config, "algorithm.filter_groups.enable"):
        raise IntegrationError(
            "algorithm.filter_groups.enable=True turns on verl's own DAPO loop, which the snooze trainer replaces "
            f"with the scheduler's step loop. Set algorithm.filter_groups.enable=False and choose {OPTIONS_KEY}.policy "
            f"(dynamic_sampling is DAPO, snooze adds snoozing); {OPTIONS_KEY}.reward_metric takes the place of "
            "algorithm.filter_groups.metric and max_gen_rounds bounds generation."
        )
    custom = _select(config, "trainer.v1.sampler.custom_sampler")
    if custom is not None and (not _is_mapping(custom) or custom.get("path") or custom.get("name")):
        raise IntegrationError(
            "trainer.v1.sampler.custom_sampler is set, but the snooze trainer brings its own replay buffer; "
            "unset trainer.v1.sampler.custom_sampler.path and .name"
        )
    if _select(config, "trainer.v1.sampler.sync_refill_failed_groups"):
        raise IntegrationError(
            "trainer.v1.sampler.sync_refill_failed_groups has no effect under the snooze trainer: a failed group "
            "is withdrawn from the scheduler (counted in snooze/gen/cancelled) and the round loop goes on. Unset it."
        )
    if _select(config, "skip.rollout_tq.enable") or _select(config, "skip.rollout.enable"):
        raise IntegrationError(
            "rollout skip (skip.rollout_tq / skip.rollout) records and replays verl's own sampling; the snooze trainer "
            "draws each step's prompts from the scheduler, so replayed rollouts would not be the prompts it issued. "
            "Turn rollout skip off."
        )
    sync_step = _select(config, f"trainer.v1.{verl_mode}.parameter_sync_step")
    if sync_step is not None and sync_step != 1:  # verl's sync and colocate_async modes sample once a step
        raise IntegrationError(
            f"trainer.v1.{verl_mode}.parameter_sync_step={sync_step!r}: the snooze trainer builds one batch of "
            "data.train_batch_size groups per step (the scheduler's step), so verl's split of a step into "
            "parameter_sync_step samples cannot be honoured. Set it to 1 (verl's default is 4 under separate_async); "
            "for several optimizer updates "
            "per step lower actor_rollout_ref.actor.ppo_mini_batch_size (verl splits each batch into mini-batches)."
        )
    mode = _select(config, "trainer.resume_mode")
    if mode not in (None, "auto", "disable", "resume_path"):  # verl logs it, then fails on an unbound name
        raise IntegrationError(f"trainer.resume_mode={mode!r}: must be auto, disable or resume_path")
    rm = _mapping(config, "reward.reward_model")
    if rm.get("enable") and not rm.get("enable_resource_pool"):
        raise IntegrationError(
            "a colocated reward model (reward.reward_model.enable=True without enable_resource_pool) scores groups "
            "only after the replay buffer has sampled them; the scheduler needs each group's reward when it "
            "finishes. Use a rule-based reward or set reward.reward_model.enable_resource_pool=True."
        )


def _scheduler_fields(opts: dict[str, Any], config: Any) -> dict[str, Any]:
    fields = {k: v for k, v in opts.items() if k not in _OWN}
    for name, verl_key in _FROM_VERL.items():
        if name in fields:
            raise IntegrationError(
                f"{OPTIONS_KEY}.{name} is read from verl's {verl_key}; set it there (one value for both)"
            )
        value = _select(config, verl_key)
        if value is not None:
            if not is_int(value):  # 2.5 was truncated to 2, 'abc' a ValueError
                raise IntegrationError(
                    f"{verl_key}={value!r}: must be an integer (the snooze trainer reads {name} from it)"
                )
            fields[name] = value
    if "batch_size" not in fields or "group_size" not in fields:
        raise IntegrationError("data.train_batch_size and actor_rollout_ref.rollout.n must be set")
    weights = fields.get("weights")
    if weights is not None:
        if not isinstance(weights, Mapping):
            raise IntegrationError(
                f"{OPTIONS_KEY}.weights={weights!r}: must map each data_source to its weight, e.g. "
                f"'+{OPTIONS_KEY}.weights={{gsm8k:2,math:1}}' (unset: each data_source's row count)"
            )
        fields["weights"] = dict(weights)
    if fields.get("carry_surplus") is True:  # another value is SchedulerConfig's to refuse ("must be True or False")
        raise IntegrationError(
            "carry_surplus=True is not supported in verl: the sync trainer keeps no trajectories across steps "
            "(nor in its checkpoints), so carried groups would be lost on resume. Leave carry_surplus off."
        )
    return fields


def _reward_log(opts: dict[str, Any], config: Any) -> Path | None:
    """The reward log's path: the option, else beside verl's checkpoints; ``false`` turns it off."""
    value = opts.get("reward_log")
    if value is False:
        return None
    if value is None:
        base = _select(config, "trainer.default_local_dir")
        if not base:
            return None
        value = str(Path(base) / REWARD_LOG_NAME)
    return log_path(value, f"{OPTIONS_KEY}.reward_log")  # checked on the driver, before any worker starts


_ASYNC_REFUSED = {  # scheduler fields that decide a step's batch synchronously: what to do instead
    "max_gen_rounds": "generation is bounded by verl's own rule there: each group that cannot train is replaced "
    "by one new prompt (and trainer.v1.colocate_async.num_warmup_batches sets how far ahead it runs)",
    "on_short": "the step waits until the scheduler's batch is full, as verl's async sampling waits for a full "
    "batch, so a step is never short",
    "carry_surplus": "a finished group the batch has no room for stays in TransferQueue and is reported in a later "
    "step, so there is no surplus to carry",
}


def _refuse_async(opts: dict[str, Any]) -> None:
    for name, why in _ASYNC_REFUSED.items():
        if name in opts:
            raise IntegrationError(
                f"{OPTIONS_KEY}.{name} cannot work in verl's async modes: {why}. Unset it, or use "
                "trainer.v1.trainer_mode=snooze (verl's sync mode with the scheduler's step loop)."
            )


def read_options(config: Any, verl_mode: str = "sync") -> SnoozeOptions:
    """Check verl's config for the snooze trainer of verl's ``verl_mode`` (``sync`` or ``colocate_async``) and
    return its options (``IntegrationError`` or ``ConfigError`` naming the key on anything that cannot work)."""
    _refuse_conflicts(config, verl_mode)
    opts = _plain(_select(config, OPTIONS_KEY))
    if verl_mode != "sync":
        _refuse_async(opts)
    fields = _scheduler_fields(opts, config)
    if verl_mode != "sync":
        fields.pop("gen_batch_size", None)  # verl fetches one prompt at a time there (data.gen_batch_size=1)
    scheduler = SchedulerConfig.from_dict(fields)  # ConfigError names unknown fields
    seed = opts.get("seed")
    seed = _select(config, "data.seed") if seed is None else seed  # null is the default, as unset
    metric = opts.get("reward_metric", "reward")
    if not isinstance(metric, str) or not metric:
        raise IntegrationError(
            f"{OPTIONS_KEY}.reward_metric={metric!r}: name a reward ('reward' or a reward_extra_info key)"
        )
    poll = opts.get("poll_interval", 2.0)
    if isinstance(poll, bool) or not isinstance(poll, (int, float)) or not 0 < poll < math.inf:  # inf: polls never
        raise IntegrationError(f"{OPTIONS_KEY}.poll_interval={poll!r}: must be a finite number of seconds above 0")
    seed = 0 if seed is None else seed
    if not is_int(seed) or seed < 0:
        raise IntegrationError(f"{OPTIONS_KEY}.seed={seed!r}: must be an integer >= 0")
    curriculum = _curriculum(opts.get("curriculum"), verl_mode)
    return SnoozeOptions(
        scheduler=scheduler,
        seed=seed,
        reward_log=_reward_log(opts, config),
        reward_metric=metric,
        poll_interval=float(poll),
        curriculum=curriculum,
    )


def _curriculum(value: Any, verl_mode: str) -> Path | None:
    """The curriculum file's path, read and checked now (on the driver, before any worker starts)."""
    if value is None:
        return None
    if verl_mode != "sync":
        raise IntegrationError(
            f"{OPTIONS_KEY}.curriculum: the async modes do not take a curriculum (a stage change while groups of the "
            "last stage are in flight is not handled); use trainer.v1.trainer_mode=snooze"
        )
    if not isinstance(value, str) or not value:
        raise IntegrationError(f"{OPTIONS_KEY}.curriculum={value!r}: pass the path of a curriculum file")
    from snooze.core.curriculum import Curriculum

    Curriculum.from_file(value)  # a ConfigError naming the file and field, now rather than at the first step
    return Path(value)
