"""The reward log's header: its first line says what run wrote it (``docs/reward-log.md``, "The header").

::

    {"format": "snooze-reward-log", "version": 1, "group_size": 8, "batch_size": 16, "gen_batch_size": 16,
     "max_gen_rounds": 8, "policy": "dynamic_sampling", "dynamic_sampling": true, "options": null,
     "reward_range": [0.0, 1.0], "carry_surplus": false, "source": "snooze.trainer"}

A replay of the log needs the run's step loop (signal groups per step, groups per round, the round
limit) and whether the run generated again for groups without signal (DAPO's dynamic sampling): a
plain GRPO run trains on every group and is one round per step, so no DAPO step loop can be rebuilt
from it. Without a header the replay has to guess these from the lines; with one it reads them.
A size nobody knows (an import from a dump that does not say) is ``null``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from snooze._kit.checks import INT64_MAX, finite_float, is_int, shown
from snooze.core.errors import DataError

__all__ = ["RewardLogHeader", "FORMAT", "VERSION", "is_header"]

FORMAT = "snooze-reward-log"
"""The ``format`` field of a header line: what tells it from a group's line (which has no ``format``)."""

VERSION = 1
"""The header's version; a reader refuses another (it cannot know what the fields mean)."""

_SIZES = ("batch_size", "gen_batch_size", "max_gen_rounds")
_OPTIONAL = ("out_of_range", "reward_field", "caveats")


def is_header(obj: Any) -> bool:
    """Whether a parsed line is a header (a JSON object with a ``format`` field)."""
    return isinstance(obj, dict) and "format" in obj


@dataclass(frozen=True)
class RewardLogHeader:
    """The run a reward log comes from: its sizes, its policy and its reward range."""

    group_size: int
    """Rollouts per group (G); every line of the log has this many rewards."""

    batch_size: int | None = None
    """Groups trained per step (signal groups under dynamic sampling); ``None``: not known."""

    gen_batch_size: int | None = None
    """Groups asked for in one generation round; ``None``: not known."""

    max_gen_rounds: int | None = None
    """Generation rounds a step may take at most; ``None``: not known (1 for a run without dynamic sampling)."""

    policy: str = "unknown"
    """The policy that built the batches: a snooze policy name (``grpo``, ``dynamic_sampling``, ``filter``,
    ``snooze``, ...) or ``unknown``."""

    dynamic_sampling: bool | None = None
    """Whether groups without signal were dropped and generation repeated until the batch was full (DAPO);
    ``False`` for a run that trains on every group (plain GRPO); ``None``: not known."""

    options: dict[str, Any] | None = None
    """The policy's options as its options class writes them (``{"factor": 5, ...}``), or ``None``."""

    reward_range: tuple[float, float] = (0.0, 1.0)
    """``(low, high)``: where the run's rewards lie."""

    carry_surplus: bool | None = None
    """Whether surplus signal groups were carried into the next step; ``None``: not known."""

    source: str = ""
    """What wrote the log: ``snooze.trainer``, ``snooze.integrations.trl``, ``snooze import verl``, ..."""

    out_of_range: str = "raise"
    """``"raise"``: every reward lies in ``reward_range``. ``"accept"``: the run accepted rewards outside it
    (``SchedulerConfig.out_of_range="accept"``, the TRL adapter's default), so its lines may hold them; a
    reader then takes the range as wide as the lines need and says so (:func:`~snooze.logs.read_reward_log`).
    Written only when ``"accept"``."""

    reward_field: str | None = None
    """The field of the framework's dump read as each rollout's reward (``snooze import --reward-field``:
    ``score``, verl's older ``acc``, ...); ``None``: the writer's own reward (not written)."""

    caveats: tuple[str, ...] = ()
    """What the writer could not know and guessed (each a sentence): an import's ``policy`` or
    ``dynamic_sampling`` read from a dump that does not record them, a sample of a run's groups. Written
    only when there are some; replay prints them."""

    extra: dict[str, Any] = field(default_factory=dict)
    """Fields of the header line this version does not know (kept, never read)."""

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def of_config(cls, config: Any, source: str) -> RewardLogHeader:
        """The header of a run built by a :class:`~snooze.SchedulerConfig` (the trainer and the adapters)."""
        from snooze.core.options import POLICIES

        options = config.options.to_dict() if config.options is not None else None
        return cls(
            group_size=int(config.group_size),
            batch_size=int(config.batch_size),
            gen_batch_size=int(config.whole_gen_size),  # DAPO's round: the log holds whole groups only
            max_gen_rounds=int(config.max_gen_rounds),
            policy=str(config.policy),
            dynamic_sampling=not POLICIES[config.policy].trains_on_zero_signal,
            options=json.loads(json.dumps(options, default=str)) if options is not None else None,
            reward_range=(float(config.reward_range[0]), float(config.reward_range[1])),
            carry_surplus=bool(config.carry_surplus),
            source=source,
        )

    def to_dict(self) -> dict[str, Any]:
        """The header as the plain JSON object its line holds (the optional fields only when they say something)."""
        body = {k: v for k, v in asdict(self).items() if k not in ("extra", *_OPTIONAL)}
        body["reward_range"] = list(self.reward_range)
        if self.out_of_range != "raise":
            body["out_of_range"] = self.out_of_range
        if self.reward_field is not None:
            body["reward_field"] = self.reward_field
        if self.caveats:
            body["caveats"] = list(self.caveats)
        return {"format": FORMAT, "version": VERSION, **body, **self.extra}

    def to_line(self) -> str:
        """The header as the log's first line (with its newline)."""
        return json.dumps(self.to_dict()) + "\n"

    @classmethod
    def from_line(cls, obj: dict[str, Any], path: str, line: int) -> RewardLogHeader:
        """The header a parsed first line holds; a :class:`~snooze.DataError` names the file, line and field."""
        where = f"{path}, line {line} (the header)"
        if obj.get("format") != FORMAT:
            raise DataError(
                f"{where}, field 'format': {shown(obj.get('format'))}: a reward log's header says {FORMAT!r}"
            )
        if not is_int(obj.get("version")) or obj.get("version") != VERSION:  # (true == 1 and 1.0 == 1 in Python)
            raise DataError(
                f"{where}, field 'version': {shown(obj.get('version'))}: this snooze reads version {VERSION} headers"
            )
        if "group_size" not in obj:
            raise DataError(f"{where}, field 'group_size': missing; a header needs at least the group size")
        known = {f for f in cls.__dataclass_fields__ if f != "extra"}
        fields = {k: obj[k] for k in known if k in obj}
        rr = fields.get("reward_range", [0.0, 1.0])
        if not isinstance(rr, list) or len(rr) != 2:
            raise DataError(f"{where}, field 'reward_range': {shown(rr)}: must be [low, high]")
        fields["reward_range"] = tuple(rr)
        if isinstance(fields.get("caveats"), list):
            fields["caveats"] = tuple(fields["caveats"])
        extra = {k: v for k, v in obj.items() if k not in known and k not in ("format", "version")}
        try:
            return cls(**fields, extra=extra)
        except DataError as exc:
            raise DataError(f"{where}, {exc}") from None

    def sizes(self) -> dict[str, int]:
        """The step loop's sizes the header knows: ``batch_size``, ``gen_batch_size``, ``max_gen_rounds``."""
        return {name: getattr(self, name) for name in _SIZES if getattr(self, name) is not None}


def _fail(field_name: str, what: str) -> DataError:
    return DataError(f"field {field_name!r}: {what}")


def _size_ok(value: Any, least: int) -> bool:
    """A size the command line would take too (``snooze replay --batch-size``: an integer within int64)."""
    return is_int(value) and least <= value <= INT64_MAX


def _integer(value: Any, least: int) -> str:
    """What a size must be; the storage limit is named only to a value beyond it (as ``as_int`` does)."""
    return f"an integer in [{least}, 2**63 - 1]" if is_int(value) and value > INT64_MAX else f"an integer >= {least}"


def _json_plain(value: Any) -> Any:
    """numpy's numbers as Python's (for ``json.dumps``); anything else JSON cannot hold is a TypeError."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON")


def _check(h: RewardLogHeader) -> None:
    """Every field checked, numpy's integers taken as Python's, the line made once: a header that could not be
    written is refused here, when it is built, before any writer opens (or moves aside) a file."""
    _check_sizes(h)
    _check_added(h)
    for name in ("options", "extra"):
        try:
            plain = json.loads(json.dumps(getattr(h, name), default=_json_plain, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise _fail(
                name, f"cannot be written as JSON ({exc}); pass plain numbers, strings, lists and objects"
            ) from None
        object.__setattr__(h, name, plain)
    if not isinstance(h.extra, dict):
        raise _fail("extra", f"{shown(h.extra)}: must be a mapping of field to value")
    if not isinstance(h.policy, str) or not h.policy:
        raise _fail("policy", f"{shown(h.policy)}: must be a policy name (or 'unknown')")
    for name in ("dynamic_sampling", "carry_surplus"):
        if getattr(h, name) is not None and not isinstance(getattr(h, name), bool):
            raise _fail(name, f"{shown(getattr(h, name))}: must be true, false or null")
    if h.options is not None and not isinstance(h.options, dict):
        raise _fail("options", f"{shown(h.options)}: must be an object or null")
    rr = h.reward_range
    if not isinstance(rr, tuple | list) or len(rr) != 2:
        raise _fail("reward_range", f"{shown(rr)}: must be [low, high]")
    low, high = (finite_float(v) for v in rr)
    if low is None or high is None or not low < high:
        raise _fail("reward_range", f"{shown(list(h.reward_range))}: must be [low, high], low < high")
    object.__setattr__(h, "reward_range", (low, high))
    if not isinstance(h.source, str):
        raise _fail("source", f"{shown(h.source)}: must be a string")


def _check_sizes(h: RewardLogHeader) -> None:
    if not _size_ok(h.group_size, 2):
        raise _fail("group_size", f"{shown(h.group_size)}: must be {_integer(h.group_size, 2)}")
    object.__setattr__(h, "group_size", int(h.group_size))
    for name in _SIZES:
        value = getattr(h, name)
        if value is not None and not _size_ok(value, 1):
            raise _fail(name, f"{shown(value)}: must be {_integer(value, 1)}, or null when not known")
        if value is not None:
            object.__setattr__(h, name, int(value))


def _check_added(h: RewardLogHeader) -> None:
    """The fields written only when they say something (:data:`_OPTIONAL`)."""
    if h.out_of_range not in ("raise", "accept"):
        raise _fail("out_of_range", f"{shown(h.out_of_range)}: must be 'raise' or 'accept'")
    if h.reward_field is not None and (not isinstance(h.reward_field, str) or not h.reward_field):
        raise _fail("reward_field", f"{shown(h.reward_field)}: must be a field name, or null")
    if not isinstance(h.caveats, tuple | list) or not all(isinstance(c, str) for c in h.caveats):
        raise _fail("caveats", f"{shown(h.caveats)}: must be a list of sentences")
    object.__setattr__(h, "caveats", tuple(h.caveats))
