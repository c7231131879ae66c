"""`SchedulerConfig`: every knob of batch construction, validated once, frozen; the policy's own
knobs are its options (``options``: :mod:`snooze.core.options`).

Each field's docstring is its only help text; the CLI builds its options from the fields (name,
type, default, docstring, choices: :mod:`snooze.cli._options`). The choices of a field are its
``Literal`` values, or, for ``policy``, the names registered in :mod:`snooze.core.policies`
(:func:`field_choices` reads either). This module imports nothing from the policies: it reads their
registry (:mod:`snooze.core.options`) when a config is made. Thresholds and the reward band are
fractions of the reward range, so the same config works for rewards in ``[0, 1]`` and in ``[-1, 1]``;
whether a group carries signal does not depend on the range.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import numpy as np

from snooze._kit.checks import (
    INT64_MAX,
    as_bool,
    as_int,
    as_real,
    check_band,
    check_reward_range,
    check_thresholds,
    check_weights,
    is_int,
)
from snooze.core.errors import ConfigError
from snooze.core.options import (
    POLICIES,
    RESERVED,
    SKIP_RULES,
    Choices,
    Options,
    check_known,
    field_choices,
    options_class,
    policy_of,
)

__all__ = [
    "SchedulerConfig",
    "RECOMMENDED",
    "Choices",
    "field_choices",
    "config_changes",
    "PolicyName",
    "OnShort",
    "OutOfRange",
    "Mix",
    "AdvantageScale",
]


PolicyName = Annotated[str, Choices(lambda: tuple(POLICIES))]
OnShort = Literal["partial", "pad", "raise"]
OutOfRange = Literal["raise", "accept"]
Mix = Literal["stream", "quota"]
AdvantageScale = Literal["group", "batch", "none"]


class _Setting(Mapping[str, Any]):
    """A read-only mapping of plain values that hands out a fresh plain copy at every read: ``dict(setting)``
    and ``{**setting}`` are plain dicts all the way down (``json.dumps``, ``yaml.safe_dump``, OmegaConf,
    ``copy.deepcopy`` and pickle take them), and changing one never changes the setting."""

    __slots__ = ("_values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_values", copy.deepcopy(dict(values)))

    def __getitem__(self, key: str) -> Any:
        return copy.deepcopy(self._values[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"this setting is read-only; copy it (dict(...)) and change the copy, not {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self._values,)

    def __repr__(self) -> str:
        return repr(self._values)


RECOMMENDED: Mapping[str, Any] = _Setting({"policy": "snooze", "options": {"factor": 1}, "carry_surplus": True})
"""The recommended skipping setting, the one the docs and examples use when they turn skipping on
(``SchedulerConfig(batch_size=..., **snooze.RECOMMENDED)``): snoozing a too-easy prompt for its next
encounter, the surplus signal groups carried into the next step, the audit at its default. It is also the
default: a ``SchedulerConfig`` that names no policy is this setting (with the audit and the guard on);
``policy="dynamic_sampling"`` brings DAPO back, exactly as before. docs/results.md has the family's measurement of
both. Read-only; ``dict(snooze.RECOMMENDED)`` is a plain dict of plain
values (its ``options`` a plain dict too), a fresh copy each time, that a config file takes as it is."""


@dataclass(frozen=True)
class SchedulerConfig:
    """How training batches are built from groups of rollouts (docs/concepts.md)."""

    batch_size: int = 16
    """Signal groups (prompts) per training step."""

    gen_batch_size: int | None = None
    """Prompts asked for in one generation round; ``None`` means ``batch_size``, as in DAPO. With partial groups
    (``screen_size``) ``None`` means rounds that hold DAPO's rollouts: ``batch_size * group_size / screen_size``
    screens (rounded up), so a round of fresh screens costs what a round of ``batch_size`` whole groups does."""

    group_size: int = 8
    """Rollouts per prompt (G). At least 2: a group of one has no spread."""

    policy: PolicyName = "snooze"
    """What happens to zero-signal groups: ``grpo`` (train on them), ``dynamic_sampling`` (drop and
    refill, DAPO; ``dapo`` is another name for it), ``filter`` (drop; retire too-easy prompts for good),
    ``snooze`` (drop; skip too-easy prompts for their next ``SnoozeOptions.factor`` encounters),
    ``predictive`` (drop; skip an encounter when the prompt's predicted chance of a signal group is below
    the stream's signal rate).
    The default is the recommended setting (``snooze.RECOMMENDED``: ``snooze`` at factor 1, the surplus
    carried, with the audit and the guard on); ``policy="dynamic_sampling"`` brings DAPO back, exactly as
    before (``carry_surplus`` stays off for a named policy). Watch ``snooze/audit/*`` and ``snooze/guard/on``."""

    options: Options | None = None
    """The policy's own options, an instance of its options class (``SnoozeOptions``, ``PredictiveOptions``,
    ...; a mapping of option name to value is taken too), ``None``: the policy's defaults (docs/concepts.md,
    "Policy options")."""

    easy_threshold: float = 0.99
    """A no-signal group whose mean is at least this fraction of the reward range is too easy."""

    hard_threshold: float = 0.01
    """A no-signal group whose mean is at most this fraction of the reward range is too hard."""

    signal_tol: float = 1e-6
    """A group carries signal when the population std of its rewards exceeds this times
    ``max(1, the group's largest |reward|)``: DAPO's rule (any spread) with a tolerance against float
    noise that follows the rewards' own size, never ``reward_range``. 1e-6 sits far above float32
    rounding (~6e-8 relative) and far below any real reward difference; 0 counts any spread."""

    audit: float = 0.05
    """Share of the encounters a policy skips before any rollout (snoozed, retired by ``filter``, masked
    by ``predictive`` or ``skip="history"``) that are rolled out anyway, to measure what skipping gives up
    (``snooze/audit/*``, docs/concepts.md "The audit"), and at most this share of each generation round.
    Chosen per encounter by a hash of (seed, dataset, prompt, epoch), so it needs no state; only audit
    groups with signal may be trained on. In [0, 1); 0 turns it off."""

    max_gen_rounds: int = 8
    """Generation rounds per step before giving up on filling the batch. Never generate forever."""

    on_short: OnShort = "partial"
    """When the batch is not full after ``max_gen_rounds`` (or the data ran out): ``partial`` trains
    on what there is, ``pad`` fills with zero-signal groups of the step, ``raise`` raises
    :class:`~snooze.BatchShortError`."""

    carry_surplus: bool | None = None
    """Keep surplus signal groups of a step's last round for the next step (DAPO discards them).

    Unset (``None``): on when the config names no policy (the default, the recommended setting), off when it
    names one (``policy=...``, or an ``options`` instance, which names its policy), so a named policy runs as it
    always has: ``policy="dynamic_sampling"`` is DAPO exactly. A config holds ``True`` or ``False`` once made."""

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

    max_staleness: int | None = None
    """Delayed feedback (asynchronous trainers, docs/concepts.md "Delayed feedback"): a group reported more
    than this many steps after the step its candidate was drawn at still updates the prompt's memory, but is
    left out of the batch (``async/too_stale``). ``None``: any age is trained on; 0: only groups drawn in the
    step they are reported in."""

    screen_size: int | None = None
    """Partial groups (SPEED-RL's screening, Pilot-Commit's pilot; docs/concepts.md "Partial groups"): each
    freshly drawn prompt is first rolled out ``screen_size`` times (k); after their rewards are reported, the
    policy's ``screen()`` decides whether it gets the other ``group_size - k`` rollouts in the step's next round
    (default: when the first k rewards carry signal) or stops there (its k rewards are its group: never trained
    on). ``None`` (off): every candidate is a whole group. An integer with ``2 <= screen_size < group_size``;
    not with ``policy="grpo"``, which trains on every group."""

    guard: bool = True
    """The guard (docs/concepts.md "The guard"): once the skipping alarm fires (``snooze/audit/alarm``: skipping has
    given up much of the signal the run finds, or prompts skipped as mastered often come back not mastered), every
    encounter the policy skips is rolled out from the next step on, so the run generates as DAPO does, keeping the
    carried surplus; ``snooze/guard/on`` says when it acts. Nothing changes for a policy that skips nothing
    (``dynamic_sampling``, ``grpo``). Its given-up half needs the audit (``audit`` above 0). ``False``: the alarm is
    a metric only and skipping goes on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Fields by name (or, in their order, by position). An unknown keyword is a :class:`ConfigError`
        naming the nearest field, and for a policy's option (``snooze_factor=5``) the options class that
        holds it, as ``from_dict`` and ``replace`` report it."""
        names = [f.name for f in dataclasses.fields(self)]
        if len(args) > len(names):
            raise ConfigError(
                f"SchedulerConfig takes at most {len(names)} positional arguments, got {len(args)}; pass fields by name"
            )
        twice = sorted(set(names[: len(args)]) & set(kwargs))
        if twice:
            raise ConfigError(f"SchedulerConfig: field(s) {twice} given both by position and by name")
        given = {**dict(zip(names, args)), **kwargs}
        _check_keywords(given)
        if isinstance(given.get("options"), Options) and "policy" not in given:
            given["policy"] = policy_of(given["options"])
        if given.get("carry_surplus") is None:  # unset: the recommended setting carries, a named policy does not
            given["carry_surplus"] = "policy" not in given
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, given.get(f.name, f.default))
        self._check()

    def _check(self) -> None:
        for name, minimum in _INTS.items():  # at most int64: counts and sizes are held as int64
            if name not in _OPTIONAL or getattr(self, name) is not None:
                _set(self, name, as_int(getattr(self, name), name, minimum, INT64_MAX))
        # "dapo": DAPO's dynamic sampling, by the name of the paper that made it (a non-string: refused below)
        if isinstance(self.policy, str) and self.policy in POLICIES.aliases:
            _set(self, "policy", POLICIES.aliases[self.policy])
        for name in ("policy", "on_short", "mix", "advantage", "out_of_range"):
            _check_choice(self, name)
        for name in ("carry_surplus", "shuffle", "guard"):
            _set(self, name, as_bool(getattr(self, name), name))
        easy, hard, tol = check_thresholds(self.easy_threshold, self.hard_threshold, self.signal_tol)
        _set(self, "easy_threshold", easy)
        _set(self, "hard_threshold", hard)
        _set(self, "signal_tol", tol)
        _set(self, "reward_range", check_reward_range(self.reward_range))
        _set(self, "reward_band", check_band(self.reward_band))
        if self.weights is not None:
            _set(self, "weights", Weights(check_weights(self.weights)))
        _set(self, "options", _policy_options(self.policy, self.options))
        _set(self, "audit", as_real(self.audit, "audit", 0.0, allowed=_AUDIT_ALLOWED))
        if self.audit >= 1.0:
            raise ConfigError(f"audit={self.audit!r}: must be {_AUDIT_ALLOWED}")
        if self.screen_size is not None:
            _set(self, "screen_size", _check_screen(self.screen_size, self.group_size, self.policy))

    # -- derived values -----------------------------------------------------------------------
    @property
    def gen_size(self) -> int:
        """Prompts per generation round (``gen_batch_size``, or its default: see there)."""
        if self.gen_batch_size is not None or self.screen_size is None:
            return self.whole_gen_size
        return -(-self.batch_size * self.group_size // self.screen_size)

    @property
    def whole_gen_size(self) -> int:
        """Prompts in a round of whole groups at this config: DAPO's round, which ``snooze/saved/*`` estimates."""
        return self.gen_batch_size if self.gen_batch_size is not None else self.batch_size

    @property
    def reward_bounds(self) -> tuple[float, float]:
        """Where a recorded reward may lie: ``reward_range``, or anything finite under ``out_of_range="accept"``."""
        return (-np.inf, np.inf) if self.out_of_range == "accept" else self.reward_range

    def __hash__(self) -> int:
        """Over the fields' canonical form, as ``==`` compares them: ``weights`` (a dict) as its items in
        name order, ``options`` as its class and :meth:`~snooze.core.options.Options.to_dict` (a plug-in's
        options may hold lists). Equal configs hash equal; every config hashes (``weights`` made the
        dataclass's own hash raise ``TypeError``)."""
        return hash(tuple(_canonical(getattr(self, f.name)) for f in dataclasses.fields(self)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (used in saved state and run metadata)."""
        out = dataclasses.asdict(self)
        out["weights"] = None if self.weights is None else dict(self.weights)
        out["reward_range"] = list(self.reward_range)
        out["reward_band"] = None if self.reward_band is None else list(self.reward_band)
        out["options"] = self.options.to_dict() if self.options is not None else None
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SchedulerConfig:
        """Inverse of :meth:`to_dict`; unknown keys are an error that names them (a field it lacks takes its
        default)."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                f"SchedulerConfig.from_dict takes a mapping of field name to value, got {type(data).__name__}"
            )
        _check_keywords(data)  # before cls(**data): a key that is not a string must be a ConfigError too
        kwargs = dict(data)
        for key in ("reward_range", "reward_band"):
            if isinstance(kwargs.get(key), list):  # JSON has no tuples
                kwargs[key] = tuple(kwargs[key])
        return cls(**kwargs)

    def replace(self, **changes: Any) -> SchedulerConfig:
        """A copy with some fields changed (validated again); an unknown field is a :class:`ConfigError`.
        A new ``policy`` without ``options`` (or ``carry_surplus``) starts from that policy's defaults, as a named
        policy has them (``carry_surplus`` off): ``SchedulerConfig().replace(policy="dynamic_sampling")`` is DAPO."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        new_policy = changes.get("policy", self.policy)
        if not (isinstance(new_policy, str) and new_policy == self.policy):
            for name in ("options", "carry_surplus"):
                if name not in changes:
                    fields[name] = None
        return type(self)(**{**fields, **changes})


class Weights(dict):  # type: ignore[type-arg]
    """``SchedulerConfig.weights``: a plain ``dict`` of dataset name to weight (it compares equal to one, and
    ``json`` writes it as one) that cannot be changed: a frozen config holds no mutable part. ``copy`` and
    ``deepcopy`` give a ``Weights`` again. Change weights with ``config.replace(weights=...)``."""

    def _refuse(self, *args: Any, **kwargs: Any) -> None:
        raise ConfigError(
            "SchedulerConfig.weights cannot be changed in place (the config is frozen); "
            "use config.replace(weights={...}), or Scheduler.set_weights during a run"
        )

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _refuse  # type: ignore[assignment]

    def __copy__(self) -> Weights:
        return self

    def __deepcopy__(self, memo: Any) -> Weights:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (dict(self),))


def config_changes(saved: Mapping[str, Any], now: SchedulerConfig) -> list[str]:
    """``"options.factor: saved 5, now 2"`` for each field (and option) of ``now`` that differs from
    ``saved`` (a state's ``meta.config``; a field it lacks counts as its default).

    >>> snooze = SchedulerConfig(policy="snooze", options={"factor": 5})
    >>> config_changes(snooze.to_dict(), snooze.replace(options={"factor": 2}))
    ['options.factor: saved 5, now 2']
    """
    try:
        saved = SchedulerConfig.from_dict(saved).to_dict()
    except ConfigError:  # a damaged saved config: compared as it is (each damaged field counts as changed)
        pass
    default = _flat_items(SchedulerConfig(policy=now.policy).to_dict())
    current, before = _flat_items(now.to_dict()), _flat_items(saved)
    return [
        f"{k}: saved {before.get(k, default.get(k))!r}, now {v!r}"
        for k, v in current.items()
        if _differs(before.get(k, default.get(k)), v)
    ]


def _flat_items(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"options": {"factor": 5}}`` -> ``{"options.factor": 5}``."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k in ("options", "rule") and isinstance(v, Mapping):
            out.update(_flat_items(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _differs(saved: Any, now: Any) -> bool:
    try:
        return bool(saved != now)
    except (TypeError, ValueError):  # a damaged saved field (an array, ...) that cannot be compared: not the same
        return True


_AUDIT_ALLOWED = "a finite number in [0, 1) (0.05: one in twenty skipped encounters is rolled out; 0: no audit)"


def _check_screen(k: Any, group_size: int, policy: str) -> int:
    """``screen_size`` as an int in ``[2, group_size)``, with a policy that can drop a stopped screen."""
    allowed = f"None (whole groups) or an integer with 2 <= screen_size < group_size={group_size}"
    if not is_int(k) or not 2 <= int(k) < group_size:
        raise ConfigError(f"screen_size={k!r}: must be {allowed} (k screening rollouts, then the other G - k)")
    if policy == "grpo":
        raise ConfigError(
            f"screen_size={int(k)} with policy='grpo': grpo trains on every group, so a screen it stops could not be "
            "trained on; use policy='dynamic_sampling' (or a skipping policy) with screening, or screen_size=None"
        )
    return int(k)


_INTS = {"batch_size": 1, "gen_batch_size": 1, "group_size": 2, "max_gen_rounds": 1, "epochs": 1, "max_staleness": 0}
"""Integer fields and their minimum."""
_OPTIONAL = ("gen_batch_size", "epochs", "max_staleness")
"""Integer fields that may be ``None``."""


def _canonical(value: Any) -> Any:
    """A hashable form of a field's value that equal values share: a mapping as its items in key order,
    a list as a tuple, an :class:`Options` as its class and its ``to_dict()``."""
    if isinstance(value, Options):
        return (type(value), _canonical(value.to_dict()))
    if isinstance(value, Mapping):
        return (dict, tuple(sorted(((k, _canonical(v)) for k, v in value.items()), key=lambda kv: repr(kv[0]))))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    return value


def _set(cfg: SchedulerConfig, name: str, value: Any) -> None:
    # frozen: the checked value (a numpy number as a Python one) replaces the given one
    object.__setattr__(cfg, name, value)


def _check_keywords(given: Mapping[str, Any]) -> None:
    """An unknown keyword is a :class:`ConfigError` naming the nearest field; one that names a policy's
    option (``snooze_factor``, ``predict_margin``, ``history_weight``) says which options class holds it."""
    unknown = [k for k in given if k not in _FIELDS]
    hints = [f"{k!r} is {hint}" for k in unknown if isinstance(k, str) for hint in [_option_hint(k)] if hint]
    check_known(SchedulerConfig, given, hint=hints[0] + "; " if hints else "")


def _option_hint(key: str) -> str | None:
    """``"snooze_factor"`` -> ``"options=SnoozeOptions(factor=...) with policy='snooze'"``: the option of a
    registered policy or skip rule that ``key`` names (``<name>_<field>`` or ``<field>_<name>`` in any word
    order, or a close spelling), ``None`` when it names none."""
    spelled: dict[str, tuple[str, str, type[Options], str]] = {}
    for registry, kind in ((POLICIES, "policy"), (SKIP_RULES, "skip")):
        for name in registry:
            cls = options_class(registry, name)
            for f in dataclasses.fields(cls):
                for form in (f"{name}_{f.name}", f"{f.name}_{name}", f.name):
                    spelled.setdefault(form, (kind, name, cls, f.name))
    same_words = [form for form in spelled if sorted(form.split("_")) == sorted(key.split("_"))]
    close = same_words or difflib.get_close_matches(key, spelled, n=1, cutoff=0.75)
    near = spelled[close[0]] if close else None
    if near is None:
        return None
    kind, name, cls, field = near
    if kind == "skip":
        return (
            f"option {field!r} of skip rule {name!r}: policy='snooze', "
            f"options=SnoozeOptions(skip={name!r}, rule={cls.__name__}({field}=...))"
        )
    return f"option {field!r} of policy {name!r}: policy={name!r}, options={cls.__name__}({field}=...)"


def _policy_options(policy: str, options: Any) -> Options:
    """``options`` as the policy's options class: ``None`` its defaults, a mapping built into it."""
    cls = options_class(POLICIES, policy)
    if options is None:
        return cls()
    if isinstance(options, Mapping):
        return cls.from_dict(options)
    if type(options) is not cls:
        raise ConfigError(
            f"options={options!r}: policy {policy!r} takes {cls.__name__} (or a mapping of its fields), "
            f"not {type(options).__name__}"
        )
    return options


def _check_choice(cfg: SchedulerConfig, name: str) -> None:
    _check_choice_value(name, getattr(cfg, name), field_choices(type(cfg), name) or ())


def _check_choice_value(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if not isinstance(value, str) or value not in allowed:
        raise ConfigError(f"{name}={value!r}: must be one of {', '.join(map(repr, allowed))}")


_FIELDS = frozenset(f.name for f in dataclasses.fields(SchedulerConfig))
RESERVED.update(_FIELDS)  # a plug-in's option key may not be a field (snooze.core.options)
