"""`SchedulerConfig`: every knob of batch construction, validated once, frozen.

Each field's docstring is its only help text; the CLI builds its options from the fields (name,
type, default, docstring, choices: :mod:`snooze.cli._options`). The choices of a field are its
``Literal`` values, or, for ``policy`` and ``skip``, the names registered in
:mod:`snooze.core.policies` (:func:`field_choices` reads either). Thresholds and the reward band are
fractions of the reward range, so the same config works for rewards in ``[0, 1]`` and in ``[-1, 1]``;
whether a group carries signal does not depend on the range.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from snooze.core._checks import as_int, as_real, check_band, check_reward_range, check_thresholds, check_weights, shown
from snooze.core.errors import ConfigError
from snooze.core.policies import POLICIES, SKIP_RULES

__all__ = ["SchedulerConfig", "Choices", "field_choices", "config_changes", "PolicyName", "SkipName", "OnShort", "OutOfRange", "Mix", "AdvantageScale"]


@dataclass(frozen=True)
class Choices:
    """``Annotated`` metadata: a ``str`` field whose allowed values are a registry's names, read when used."""

    names: Callable[[], tuple[str, ...]]


PolicyName = Annotated[str, Choices(lambda: tuple(POLICIES))]
SkipName = Annotated[str, Choices(lambda: tuple(SKIP_RULES))]
OnShort = Literal["partial", "pad", "raise"]
OutOfRange = Literal["raise", "accept"]
Mix = Literal["stream", "quota"]
AdvantageScale = Literal["group", "batch", "none"]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def field_choices(cls: type, name: str) -> tuple[Any, ...] | None:
    """The values field ``name`` of dataclass ``cls`` may take: its ``Literal`` values, or the names of
    the registry in its ``Choices`` annotation; ``None`` when it is not a choice. The one source of a
    field's choices (config validation and the CLI read it).

    >>> field_choices(SchedulerConfig, "on_short"), field_choices(SchedulerConfig, "policy")
    (('partial', 'pad', 'raise'), ('grpo', 'dynamic_sampling', 'filter', 'snooze', 'predictive'))
    >>> field_choices(SchedulerConfig, "batch_size") is None
    True
    """
    return _choices_of(_hints(cls)[name])


def _choices_of(tp: Any) -> tuple[Any, ...] | None:
    origin = typing.get_origin(tp)
    if origin is Annotated:
        base, *extras = typing.get_args(tp)
        found = [m.names() for m in extras if isinstance(m, Choices)]
        return found[0] if found else _choices_of(base)
    if origin is Literal:
        return typing.get_args(tp)
    return None


@dataclass(frozen=True)
class SchedulerConfig:
    """How training batches are built from groups of rollouts (docs/concepts.md)."""

    batch_size: int = 16
    """Signal groups (prompts) per training step."""

    gen_batch_size: int | None = None
    """Prompts asked for in one generation round; ``None`` means ``batch_size``, as in DAPO."""

    group_size: int = 8
    """Rollouts per prompt (G). At least 2: a group of one has no spread."""

    policy: PolicyName = "snooze"
    """What happens to zero-signal groups: ``grpo`` (train on them), ``dynamic_sampling`` (drop and
    refill, DAPO), ``filter`` (drop; retire too-easy prompts for good), ``snooze`` (drop; skip
    too-easy prompts for their next ``snooze_factor`` encounters), ``predictive`` (drop; skip an
    encounter when the prompt's predicted chance of a signal group is below the stream's signal rate)."""

    snooze_factor: int = 5
    """Encounters a too-easy prompt is skipped for; added to its counter at each too-easy outcome.
    0 behaves as ``dynamic_sampling``; the seed's experiments use 5. At most 2**31 - 1 (what a counter holds)."""

    easy_threshold: float = 0.99
    """A no-signal group whose mean is at least this fraction of the reward range is too easy."""

    hard_threshold: float = 0.01
    """A no-signal group whose mean is at most this fraction of the reward range is too hard."""

    snooze_hard: bool = False
    """Also snooze too-hard prompts (off by default: the seed snoozes only the easy side)."""

    hard_snooze_factor: int | None = None
    """Encounters a too-hard prompt is skipped for when ``snooze_hard``; ``None``: ``snooze_factor``."""

    backoff: float = 1.0
    """Growth of the snooze period for prompts that stay easy after waking: the k-th consecutive
    too-easy outcome adds ``round(snooze_factor * backoff**(k-1))``. 1.0 is the seed's behaviour."""

    max_snooze: int = 1_000_000
    """Cap on a single snooze period under ``backoff`` (encounters)."""

    skip: SkipName = "counter"
    """How ``snooze`` decides to skip a too-easy prompt: ``counter`` (the seed's rule: a too-easy
    outcome adds ``snooze_factor`` encounters to skip) or ``history`` (beyond the seed, docs/concepts.md:
    each encounter is skipped with probability ``min(p**G, k / (k + 1))``: ``p**G`` is the chance its
    group would be all-correct, ``p`` the prompt's pass rate averaged over its past groups, and
    ``k = snooze_factor`` caps it so a prompt that stays solved is skipped for ``k`` encounters on
    average, as under ``counter``; a prompt whose groups start failing comes back at once)."""

    history_weight: float = 0.5
    """``skip="history"``: weight of the newest group in the pass-rate average (1.0: the last group only)."""

    predict_margin: float = 0.5
    """``policy="predictive"``: skip an encounter when the prompt's predicted chance of a signal group
    is below this times the signal rate of the stream's recent draws (1.0: exactly when a replacement
    draw is expected to give more signal; smaller skips less; 0.5 was chosen on dev seeds,
    docs/reference-experiment.md)."""

    predict_hard_margin: float | None = None
    """``policy="predictive"``: the margin of prompts whose last groups were too hard (all wrong);
    ``None``: ``predict_margin``; 0: never skip a prompt for being too hard."""

    predict_recheck: float = 2.0
    """``policy="predictive"``: passes after which a skipped prompt is looked at again (drawn in
    [1/2, 3/2) of it at each group), so forgetting is seen and predictions stay measured. A pass is as
    many groups of the prompt's dataset as it has prompts (what DAPO generates to look at each once)."""

    predict_backoff: float = 2.0
    """``policy="predictive"``: the re-look period grows by this factor per too-easy group in a row
    after the first (1.0: a fixed period)."""

    signal_tol: float = 1e-6
    """A group carries signal when the population std of its rewards exceeds this times
    ``max(1, the group's largest |reward|)``: DAPO's rule (any spread) with a tolerance against float
    noise that follows the rewards' own size, never ``reward_range``. 1e-6 sits far above float32
    rounding (~6e-8 relative) and far below any real reward difference; 0 counts any spread."""

    max_gen_rounds: int = 8
    """Generation rounds per step before giving up on filling the batch. Never generate forever."""

    on_short: OnShort = "partial"
    """When the batch is not full after ``max_gen_rounds`` (or the data ran out): ``partial`` trains
    on what there is, ``pad`` fills with zero-signal groups of the step, ``raise`` raises
    :class:`~snooze.BatchShortError`."""

    carry_surplus: bool = False
    """Keep surplus signal groups of a step's last round for the next step (DAPO discards them)."""

    mix: Mix = "stream"
    """Multi-dataset mixing: ``stream`` interleaves candidates by weight; ``quota`` holds each
    dataset's share of the *training batch* at its weight."""

    weights: Mapping[str, float] | None = None
    """Dataset weights by name; ``None`` gives every dataset the same weight."""

    reward_range: tuple[float, float] = (0.0, 1.0)
    """``(low, high)``: where rewards lie. The thresholds and the band are fractions of it; a reward
    outside it is an error unless ``out_of_range="accept"``; NaN and infinities always are."""

    epochs: int | None = None
    """Passes over each dataset before it is exhausted; ``None`` is endless."""

    advantage: AdvantageScale = "group"
    """GRPO advantage scaling: by the group std (GRPO), the batch std, or none (Dr. GRPO)."""

    reward_band: tuple[float, float] | None = None
    """``(lo, hi)``, fractions of the reward range: a group whose mean reward lies above ``hi`` counts
    as too easy and one below ``lo`` as too hard, whatever its spread (kept out of the batch like any
    no-signal group, and snoozed, retired or counted as such). ``None`` (off): only spread decides."""

    out_of_range: OutOfRange = "raise"
    """A finite reward outside ``reward_range``: ``raise`` (a ``RewardError``; the report is not
    recorded) or ``accept`` (recorded as it is; a zero-spread group above the range is too easy, one
    below it too hard)."""

    shuffle: bool = True
    """Each epoch of a dataset is a fresh seeded permutation; ``False``: the dataset's own order, every epoch."""

    def __post_init__(self) -> None:
        for name, minimum in _INTS.items():
            if name not in _OPTIONAL or getattr(self, name) is not None:
                _set(self, name, as_int(getattr(self, name), name, minimum))
        for name in _PERIODS:  # each is added to a prompt's int32 snooze counter
            value = getattr(self, name)
            if value is not None and value > MAX_PERIOD:
                raise ConfigError(f"{name}={shown(value)}: a snooze counter holds at most {MAX_PERIOD} encounters (2**31 - 1); "
                                  "give a smaller period, or policy='filter' to retire too-easy prompts for good")
        for name in ("policy", "skip", "on_short", "mix", "advantage", "out_of_range"):
            _check_choice(self, name)
        for name in ("snooze_hard", "carry_surplus", "shuffle"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ConfigError(f"{name}={getattr(self, name)!r}: must be True or False")
            _set(self, name, bool(getattr(self, name)))
        _set(self, "history_weight", as_real(self.history_weight, "history_weight", allowed="in (0, 1]"))
        if not 0.0 < self.history_weight <= 1.0:
            raise ConfigError(f"history_weight={self.history_weight!r}: must be in (0, 1]")
        easy, hard, tol = check_thresholds(self.easy_threshold, self.hard_threshold, self.signal_tol)
        _set(self, "easy_threshold", easy)
        _set(self, "hard_threshold", hard)
        _set(self, "signal_tol", tol)
        _set(self, "backoff", as_real(self.backoff, "backoff", 1.0, allowed="a finite number >= 1.0 (1.0 disables it)"))
        _set(self, "reward_range", check_reward_range(self.reward_range))
        _set(self, "reward_band", check_band(self.reward_band))
        if self.weights is not None:
            _set(self, "weights", check_weights(self.weights))
        self._check_predictive()

    def _check_predictive(self) -> None:
        """The ``predictive`` policy's fields."""
        _set(self, "predict_backoff", as_real(self.predict_backoff, "predict_backoff", 1.0,
                                              allowed="a finite number >= 1.0 (1.0 disables it)"))
        m = as_real(self.predict_margin, "predict_margin", 0.0,
                    allowed="a finite number > 0 (1.0: skip when a replacement draw is worth more)")
        if m <= 0:
            raise ConfigError(f"predict_margin={self.predict_margin!r}: must be a finite number > 0 (1.0: skip when a replacement draw is worth more)")
        _set(self, "predict_margin", m)
        if self.predict_hard_margin is not None:
            _set(self, "predict_hard_margin", as_real(self.predict_hard_margin, "predict_hard_margin", 0.0,
                 allowed="a finite number >= 0 (0: never skip too-hard prompts), or None"))
        r = as_real(self.predict_recheck, "predict_recheck", 0.0, allowed="a finite number of passes > 0")
        if r <= 0:
            raise ConfigError(f"predict_recheck={self.predict_recheck!r}: must be a finite number of passes > 0")
        _set(self, "predict_recheck", r)
        if not _finite_product(self.predict_backoff, PREDICT_DOUBLINGS, r):
            raise ConfigError(f"predict_backoff={self.predict_backoff!r}, predict_recheck={r!r}: the longest re-look period, "
                              f"predict_recheck x predict_backoff**{PREDICT_DOUBLINGS}, must be a finite number; give smaller values")

    # -- derived values -----------------------------------------------------------------------
    @property
    def gen_size(self) -> int:
        """Prompts per generation round."""
        return self.gen_batch_size if self.gen_batch_size is not None else self.batch_size

    @property
    def reward_bounds(self) -> tuple[float, float]:
        """Where a recorded reward may lie: ``reward_range``, or anything finite under ``out_of_range="accept"``."""
        return (-np.inf, np.inf) if self.out_of_range == "accept" else self.reward_range

    @property
    def drops_zero_signal(self) -> bool:
        """Whether zero-signal groups are kept out of the batch (every built-in policy but ``grpo``)."""
        return not POLICIES[self.policy].trains_on_zero_signal

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (used in saved state and run metadata)."""
        out = dataclasses.asdict(self)
        out["reward_range"] = list(self.reward_range)
        out["reward_band"] = None if self.reward_band is None else list(self.reward_band)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SchedulerConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error that names them."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"SchedulerConfig.from_dict takes a mapping of field name to value, got {type(data).__name__}")
        _check_fields(cls, data)
        kwargs = dict(data)
        for key in ("reward_range", "reward_band"):
            if isinstance(kwargs.get(key), list):  # JSON has no tuples
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)

    def replace(self, **changes: Any) -> SchedulerConfig:
        """A copy with some fields changed (validated again); an unknown field is a :class:`ConfigError`."""
        _check_fields(type(self), changes)
        return dataclasses.replace(self, **changes)


def config_changes(saved: Mapping[str, Any], now: SchedulerConfig) -> list[str]:
    """``"snooze_factor: saved 5, now 2"`` for each field of ``now`` that differs from ``saved`` (a state's
    ``meta.config``; a field it lacks, from an older snooze, counts as its default).

    >>> config_changes(SchedulerConfig(snooze_factor=5).to_dict(), SchedulerConfig(snooze_factor=2))
    ['snooze_factor: saved 5, now 2']
    """
    default, current = SchedulerConfig().to_dict(), now.to_dict()
    return [f"{k}: saved {saved.get(k, default[k])!r}, now {v!r}" for k, v in current.items() if _differs(saved.get(k, default[k]), v)]


def _differs(saved: Any, now: Any) -> bool:
    try:
        return bool(saved != now)
    except (TypeError, ValueError):  # a damaged saved field (an array, ...) that cannot be compared: not the same
        return True


_INTS = {"batch_size": 1, "gen_batch_size": 1, "group_size": 2, "snooze_factor": 0, "hard_snooze_factor": 0,
         "max_snooze": 1, "max_gen_rounds": 1, "epochs": 1}  # fmt: skip
"""Integer fields and their minimum."""
_OPTIONAL = ("gen_batch_size", "hard_snooze_factor", "epochs")
"""Integer fields that may be ``None``."""
MAX_PERIOD = 2**31 - 1
"""The most encounters a snooze counter (int32) holds: the largest ``snooze_factor``, ``hard_snooze_factor``, ``max_snooze``."""
_PERIODS = ("snooze_factor", "hard_snooze_factor", "max_snooze")
PREDICT_DOUBLINGS = 16
"""``policy="predictive"``: the re-look period grows by ``predict_backoff`` at most this many times."""


def _finite_product(base: float, power: int, times: float) -> bool:
    """Whether ``times * base**power`` is a finite float (``base**power`` alone raises ``OverflowError`` past 1.8e308)."""
    try:
        return math.isfinite(float(times) * base**power)
    except OverflowError:
        return False


def _set(cfg: SchedulerConfig, name: str, value: Any) -> None:
    object.__setattr__(cfg, name, value)  # frozen: the checked value (a numpy number as a Python one) replaces the given one


def _check_fields(cls: type, data: Mapping[Any, Any]) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known, key=repr)
    if unknown:
        near = [m for k in unknown if isinstance(k, str) for m in difflib.get_close_matches(k, known, n=1)]
        hint = f"did you mean {', '.join(map(repr, near))}? " if near else ""
        raise ConfigError(f"unknown {cls.__name__} field(s) {', '.join(map(repr, unknown))}; {hint}known fields: {sorted(known)}")


def _fields_checked(init: Callable[..., None]) -> Callable[..., None]:
    """The dataclass ``__init__`` with an unknown keyword (a misspelt field) or too many positional
    arguments as a :class:`ConfigError`, as ``from_dict`` and ``replace`` report them, not a ``TypeError``."""

    @functools.wraps(init)
    def checked(self: Any, *args: Any, **kwargs: Any) -> None:
        _check_fields(type(self), kwargs)
        fields = [f.name for f in dataclasses.fields(self)]
        if len(args) > len(fields):
            raise ConfigError(f"{type(self).__name__} takes at most {len(fields)} positional arguments, got {len(args)}; "
                              "pass fields by name")
        twice = sorted(set(fields[: len(args)]) & set(kwargs))
        if twice:
            raise ConfigError(f"{type(self).__name__}: field(s) {twice} given both by position and by name")
        init(self, *args, **kwargs)

    return checked


SchedulerConfig.__init__ = _fields_checked(SchedulerConfig.__init__)  # type: ignore[method-assign]


def _check_choice(cfg: SchedulerConfig, name: str) -> None:
    value, allowed = getattr(cfg, name), field_choices(type(cfg), name) or ()
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"{name}={value!r}: must be one of {', '.join(map(repr, allowed))}")


