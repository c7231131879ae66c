"""``trainer.v1.snooze``: the snooze trainer's options, read from verl's Hydra config and checked once.

verl keeps each trainer mode's settings under ``trainer.v1.<mode>`` (``trainer.v1.sync``,
``trainer.v1.colocate_async``, ...), so the snooze trainer's live under ``trainer.v1.snooze``: any
:class:`~snooze.SchedulerConfig` field, plus the few options below that are not scheduler fields.
Sizes verl already has are read from verl and may not be set twice (one source of truth).
Everything is checked when verl builds the trainer, before any GPU worker starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snooze import IntegrationError, SchedulerConfig, SnoozeError
from snooze._kit.checks import INT64_MAX, finite_float, is_int, shown
from snooze.integrations._paths import log_path
from snooze.logs import check_metrics_mode

__all__ = [
    "VerlOptions",
    "read_options",
    "conflicts",
    "async_refusals",
    "ASYNC_REFUSED",
    "NO_SURPLUS",
    "snooze_options",
    "options_from",
    "OPTIONS_KEY",
]

OPTIONS_KEY = "trainer.v1.snooze"
REWARD_LOG_NAME = "snooze_rewards.jsonl"  # default reward log, in trainer.default_local_dir
MAX_POLL_INTERVAL = 3600.0
"""Longest ``poll_interval`` taken, in seconds: a finished group may wait that long for the next look."""
_FROM_VERL = {  # scheduler field -> the verl key it is read from, and the least value it may have
    "batch_size": ("data.train_batch_size", 1),
    "gen_batch_size": ("data.gen_batch_size", 1),
    "group_size": ("actor_rollout_ref.rollout.n", 2),  # a group of one has no spread
}


@dataclass(frozen=True)
class VerlOptions:
    """The snooze trainer's options in verl (``trainer.v1.snooze``): the scheduler's config, and what the
    trainer needs beyond verl's own config."""

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

    metrics: str = "full"
    """The scheduler metrics logged to verl's logger: ``full`` (every one) or ``compact`` (the five of
    :data:`snooze.logs.DASHBOARD`; docs/sizing.md)."""

    curriculum: Path | None = None
    """A curriculum file (``snooze stratify``'s ``curriculum.json``, its ids ``(data_source, extra_info.index)``
    as ``snooze baseline --dataset`` writes them): applied to the scheduler, updated after each step, its state
    saved with each checkpoint. The sync trainer only."""


_OWN = tuple(f.name for f in dataclasses.fields(VerlOptions) if f.name != "scheduler")


def _one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _select(config: Any, key: str) -> Any:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return OmegaConf.select(config, key, default=None)
    except OmegaConfBaseException as exc:  # an interpolation that does not resolve (${nope})
        raise IntegrationError(f"{key}: cannot be read from verl's config ({_one_line(exc)})") from None


def _plain(node: Any) -> dict[str, Any]:
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if node is None:
        return {}
    if isinstance(node, DictConfig):
        try:
            return OmegaConf.to_container(node, resolve=True)  # type: ignore[return-value]
        except OmegaConfBaseException as exc:
            raise IntegrationError(f"{OPTIONS_KEY}: cannot be read ({_one_line(exc)})") from None
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


def _filter_groups(config: Any, verl_mode: str) -> str | None:
    if _select(config, "algorithm.filter_groups.enable"):
        return (
            "algorithm.filter_groups.enable=True turns on verl's own DAPO loop, which the snooze trainer replaces "
            f"with the scheduler's step loop. Set algorithm.filter_groups.enable=False and choose {OPTIONS_KEY}.policy "
            f"(dynamic_sampling is DAPO, snooze adds snoozing); {OPTIONS_KEY}.reward_metric takes the place of "
            "algorithm.filter_groups.metric and max_gen_rounds bounds generation."
        )
    return None


def _custom_sampler(config: Any, verl_mode: str) -> str | None:
    custom = _select(config, "trainer.v1.sampler.custom_sampler")
    if custom is not None and (not _is_mapping(custom) or custom.get("path") or custom.get("name")):
        return (
            "trainer.v1.sampler.custom_sampler is set, but the snooze trainer brings its own replay buffer; "
            "unset trainer.v1.sampler.custom_sampler.path and .name"
        )
    return None


def _sync_refill(config: Any, verl_mode: str) -> str | None:
    if _select(config, "trainer.v1.sampler.sync_refill_failed_groups"):
        return (
            "trainer.v1.sampler.sync_refill_failed_groups has no effect under the snooze trainer: a failed group "
            "is withdrawn from the scheduler (counted in snooze/gen/cancelled) and the round loop goes on. Unset it."
        )
    return None


def _rollout_skip(config: Any, verl_mode: str) -> str | None:
    if _select(config, "skip.rollout_tq.enable") or _select(config, "skip.rollout.enable"):
        return (
            "rollout skip (skip.rollout_tq / skip.rollout) records and replays verl's own sampling; the snooze trainer "
            "draws each step's prompts from the scheduler, so replayed rollouts would not be the prompts it issued. "
            "Turn rollout skip off."
        )
    return None


def _sync_step(config: Any, verl_mode: str) -> str | None:
    sync_step = _select(config, f"trainer.v1.{verl_mode}.parameter_sync_step")
    if sync_step is not None and sync_step != 1:  # verl's sync and colocate_async modes sample once a step
        return (
            f"trainer.v1.{verl_mode}.parameter_sync_step={sync_step!r}: the snooze trainer builds one batch of "
            "data.train_batch_size groups per step (the scheduler's step), so verl's split of a step into "
            "parameter_sync_step samples cannot be honoured. Set it to 1 (verl's default is 4 under separate_async); "
            "for several optimizer updates "
            "per step lower actor_rollout_ref.actor.ppo_mini_batch_size (verl splits each batch into mini-batches)."
        )
    return None


def _resume_mode(config: Any, verl_mode: str) -> str | None:
    mode = _select(config, "trainer.resume_mode")
    if mode not in (None, "auto", "disable", "resume_path"):  # verl logs it, then fails on an unbound name
        return f"trainer.resume_mode={mode!r}: must be auto, disable or resume_path"
    return None


def _colocated_reward_model(config: Any, verl_mode: str) -> str | None:
    rm = _mapping(config, "reward.reward_model")
    if rm.get("enable") and not rm.get("enable_resource_pool"):
        return (
            "a colocated reward model (reward.reward_model.enable=True without enable_resource_pool) scores groups "
            "only after the replay buffer has sampled them; the scheduler needs each group's reward when it "
            "finishes. Use a rule-based reward or set reward.reward_model.enable_resource_pool=True."
        )
    return None


_CONFLICTS = (
    _filter_groups,
    _custom_sampler,
    _sync_refill,
    _rollout_skip,
    _sync_step,
    _resume_mode,
    _colocated_reward_model,
)
"""Settings that would run verl's own loop beside the scheduler's, or silently do nothing: each returns what is
wrong and what to do, or ``None``."""


def conflicts(config: Any, verl_mode: str = "sync") -> list[IntegrationError]:
    """Every verl setting the snooze trainer of ``verl_mode`` refuses, each an error that says what to change
    (all of them, where :func:`read_options` raises the first)."""
    return [IntegrationError(text) for check in _CONFLICTS if (text := check(config, verl_mode)) is not None]


def _refuse_conflicts(config: Any, verl_mode: str) -> None:
    found = conflicts(config, verl_mode)
    if found:
        raise found[0]


def _scheduler_fields(opts: dict[str, Any], config: Any, errors: list[SnoozeError]) -> dict[str, Any]:
    """The scheduler's fields: the options and the sizes read from verl. Each refused one is appended to
    ``errors`` and left out (a refused size: its least value in its place), so the rest is still checked."""
    fields = {k: v for k, v in opts.items() if k not in _OWN}
    for name, (verl_key, least) in _FROM_VERL.items():
        if name in fields:
            errors.append(
                IntegrationError(
                    f"{OPTIONS_KEY}.{name} is read from verl's {verl_key}; set it there (one value for both)"
                )
            )
            del fields[name]
        value = _select(config, verl_key)
        if value is not None:
            if not is_int(value) or not least <= value <= INT64_MAX:  # 2.5 was truncated to 2, 'abc' a ValueError
                errors.append(
                    IntegrationError(
                        f"{verl_key}={shown(value)}: must be an integer in [{least}, 2**63 - 1] (the snooze trainer "
                        f"reads {name} from it)"
                    )
                )
                value = least  # (a stand-in, so that the other fields are checked too; never used)
            fields[name] = value
    if "batch_size" not in fields or "group_size" not in fields:
        errors.append(IntegrationError("data.train_batch_size and actor_rollout_ref.rollout.n must be set"))
        fields.setdefault("batch_size", 1)
        fields.setdefault("group_size", 2)
    weights = fields.get("weights")
    if weights is not None:
        if not isinstance(weights, Mapping):
            errors.append(
                IntegrationError(
                    f"{OPTIONS_KEY}.weights={weights!r}: must map each data_source to its weight, e.g. "
                    f"'+{OPTIONS_KEY}.weights={{gsm8k:2,math:1}}' (unset: each data_source's row count)"
                )
            )
            del fields["weights"]
        else:
            fields["weights"] = dict(weights)
    return fields


def _scheduler_config(fields: dict[Any, Any]) -> SchedulerConfig:
    """``SchedulerConfig(**fields)``: its defaults, not ``from_dict``'s (which gives a field a saved config lacks
    the value of the release before it: ``audit=0``); a misspelt field is its ``ConfigError``."""
    keys = [k for k in fields if not isinstance(k, str)]
    if keys:  # (a Hydra key may be an integer: SchedulerConfig(**{1: 2}) was a TypeError)
        raise IntegrationError(f"{OPTIONS_KEY}: option names are strings, got {keys}")
    for key in ("reward_range", "reward_band"):
        if isinstance(fields.get(key), list):  # Hydra has no tuples
            fields[key] = tuple(fields[key])
    return SchedulerConfig(**fields)


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


NO_SURPLUS = {"carry_surplus": False}
"""What the async modes set beside the user's options: a finished group the batch has no room for waits in
TransferQueue for a later step, so there is no surplus to carry, and the default (``snooze.RECOMMENDED``) runs
there without its carry, with nothing for the user to set."""
ASYNC_REFUSED = {  # scheduler settings that decide a step's batch synchronously: what to do instead
    "carry_surplus": "a finished group the batch has no room for stays in TransferQueue and is reported in a later "
    "step, so there is no surplus to carry",
}
_ASYNC_PAD = (
    "on_short=pad cannot work in verl's async modes: the replay buffer clears each group that cannot train as soon "
    "as it is reported (and verl replaces it), so no zero-signal group is left to pad a short step with. Use "
    "on_short=partial (a step max_gen_rounds cuts short trains on the groups it has) or raise, or "
    "trainer.v1.trainer_mode=snooze (verl's sync mode with the scheduler's step loop)."
)


def async_refusals(opts: Mapping[str, Any]) -> list[IntegrationError]:
    """The snooze options (``opts``: ``trainer.v1.snooze`` as a mapping) that cannot work in verl's async modes."""
    return [
        IntegrationError(
            f"{OPTIONS_KEY}.{name} cannot work in verl's async modes: {why}. Unset it, or use "
            "trainer.v1.trainer_mode=snooze (verl's sync mode with the scheduler's step loop)."
        )
        for name, why in ASYNC_REFUSED.items()
        if name in opts
    ] + ([IntegrationError(f"{OPTIONS_KEY}.{_ASYNC_PAD}")] if opts.get("on_short") == "pad" else [])


def _refuse_async(opts: dict[str, Any]) -> None:
    found = async_refusals(opts)
    if found:
        raise found[0]


def snooze_options(config: Any) -> dict[str, Any]:
    """``trainer.v1.snooze`` as a plain mapping (``{}`` when unset)."""
    return _plain(_select(config, OPTIONS_KEY))


def read_options(config: Any, verl_mode: str = "sync") -> VerlOptions:
    """Check verl's config for the snooze trainer of verl's ``verl_mode`` (``sync`` or ``colocate_async``) and
    return its options (``IntegrationError`` or ``ConfigError`` naming the key on anything that cannot work)."""
    _refuse_conflicts(config, verl_mode)
    opts = snooze_options(config)
    if verl_mode != "sync":
        _refuse_async(opts)
    errors: list[SnoozeError] = []
    options = options_from(opts, config, verl_mode, errors)
    if options is None:
        raise errors[0]
    return options


def _scheduler(opts: dict[str, Any], config: Any, verl_mode: str, errors: list[SnoozeError]) -> SchedulerConfig | None:
    """The scheduler's config, or ``None`` with each of its errors appended to ``errors``: the verl keys it is
    read from, and then the config's own first error (a bad ``rollout.n`` hides no bad ``policy``)."""
    before = len(errors)
    fields = _scheduler_fields(opts, config, errors)
    if verl_mode != "sync":
        fields.pop("gen_batch_size", None)  # verl fetches one prompt at a time there (data.gen_batch_size=1)
        fields.update(NO_SURPLUS)  # the default setting without the carry (the option itself is refused there)
    try:
        scheduler = _scheduler_config(fields)
    except SnoozeError as exc:
        errors.append(exc)
        return None
    if scheduler.screen_size is not None and verl_mode != "sync":
        errors.append(
            IntegrationError(
                f"{OPTIONS_KEY}.screen_size={scheduler.screen_size}: partial groups (a screen of k rollouts, then the "
                f"rest) are not supported by verl's async modes ({verl_mode}): a screen's rest must be asked after its "
                "rewards are in and trained with it in the same step, which their overlapping steps do not do. Leave "
                "screen_size unset, or use trainer.v1.trainer_mode=snooze (verl's sync mode, which supports it; "
                "docs/integrations/verl.md)"
            )
        )
        return None
    return None if len(errors) > before else scheduler


def _seed(opts: dict[str, Any], config: Any) -> int:
    seed = opts.get("seed")
    seed = _select(config, "data.seed") if seed is None else seed  # null is the default, as unset
    seed = 0 if seed is None else seed
    if not is_int(seed) or seed < 0:
        raise IntegrationError(f"{OPTIONS_KEY}.seed={shown(seed)}: must be an integer >= 0")
    return seed


def _reward_metric(opts: dict[str, Any]) -> str:
    metric = opts.get("reward_metric", "reward")
    if not isinstance(metric, str) or not metric:
        raise IntegrationError(
            f"{OPTIONS_KEY}.reward_metric={metric!r}: name a reward ('reward' or a reward_extra_info key)"
        )
    return metric


def _poll_interval(opts: dict[str, Any]) -> float:
    poll = opts.get("poll_interval", 2.0)
    seconds = finite_float(poll)  # (10**400 was an OverflowError, inf a replay buffer that never polls)
    if seconds is None or not 0 < seconds <= MAX_POLL_INTERVAL:
        raise IntegrationError(
            f"{OPTIONS_KEY}.poll_interval={shown(poll)}: must be a finite number of seconds above 0 and at most "
            f"{MAX_POLL_INTERVAL:g} (an hour: finished groups wait that long for the next look)"
        )
    return seconds


def options_from(opts: dict[str, Any], config: Any, verl_mode: str, errors: list[SnoozeError]) -> VerlOptions | None:
    """The options ``opts`` (``trainer.v1.snooze``) give, each field checked on its own: every field's error is
    appended to ``errors``, and ``None`` is returned if there was one."""
    before = len(errors)
    scheduler = _scheduler(opts, config, verl_mode, errors)  # each of its errors (verl's sizes, the config's)
    readers = {
        "seed": lambda: _seed(opts, config),
        "reward_log": lambda: _reward_log(opts, config),
        "reward_metric": lambda: _reward_metric(opts),
        "poll_interval": lambda: _poll_interval(opts),
        "metrics": lambda: check_metrics_mode(opts.get("metrics", "full"), f"{OPTIONS_KEY}.metrics"),
        "curriculum": lambda: _curriculum(opts.get("curriculum"), verl_mode),
    }
    values: dict[str, Any] = {"scheduler": scheduler}
    for name, read in readers.items():
        try:
            values[name] = read()
        except SnoozeError as exc:
            errors.append(exc)
    return None if len(errors) > before else VerlOptions(**values)


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
    from snooze.curriculum import Curriculum

    Curriculum.from_file(value)  # a ConfigError naming the file and field, now rather than at the first step
    return Path(value)
