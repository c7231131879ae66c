"""``snooze``: dynamic data snoozing (the design note's third remedy; docs/concepts.md, "Snoozing, exactly").

Zero-signal groups are dropped (as DAPO). A too-easy outcome snoozes the prompt: how, is the skip
rule's (``SnoozeOptions.skip``): ``counter`` adds ``factor`` encounters to its counter (the design
note's rule), ``history`` skips it with a probability from its pass rate. Either way the prompt is marked
``EASY_SNOOZED`` and, if its next group is not too easy, it has *regressed*. With ``hard`` a too-hard
outcome adds ``hard_factor`` to the counter as well.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np

from snooze._kit.checks import as_int, as_real, shown
from snooze.core._memory import EASY_SNOOZED, Column, PromptMemory
from snooze.core.errors import ConfigError
from snooze.core.options import Choices, Options, options_class
from snooze.core.policies.base import SKIP_RULES, Changes, Context, Policy, Report, SkipMask, register_policy

__all__ = ["Snooze", "SnoozeOptions", "MAX_PERIOD"]

log = logging.getLogger(__name__)

MAX_PERIOD = 2**31 - 1
"""The most encounters a snooze counter (int32) holds: the largest ``factor``, ``hard_factor``, ``max``, and
where a counter given several periods at once is held."""


SkipName = Annotated[str, Choices(lambda: tuple(SKIP_RULES))]
"""A registered skip rule's name (read when used: a rule registered later is a choice too)."""


@dataclass(frozen=True)
class SnoozeOptions(Options):
    """The options of ``policy="snooze"``."""

    nested = {"rule": SKIP_RULES}

    factor: int = 1
    """Encounters a too-easy prompt is skipped for; added to its counter at each too-easy outcome. 1 is the
    recommended setting's (``snooze.RECOMMENDED``, with ``SchedulerConfig.carry_surplus``: docs/sizing.md);
    the design note's experiments use 5, which lost up to 4.6 points in the benchmark family. 0 behaves as
    ``dynamic_sampling``. At most 2**31 - 1 (what a counter holds)."""

    hard: bool = False
    """Also snooze too-hard prompts (off by default: the design note snoozes only the easy side)."""

    hard_factor: int | None = None
    """Encounters a too-hard prompt is skipped for when ``hard``; ``None``: ``factor``."""

    backoff: float = 1.0
    """Growth of the snooze period for prompts that stay easy after waking: the k-th consecutive
    too-easy outcome adds ``round(factor * backoff**(k-1))``. 1.0 is the design note's behaviour."""

    max: int = 1_000_000
    """Cap on a single snooze period under ``backoff`` (encounters)."""

    skip: SkipName = "counter"
    """How a too-easy prompt is skipped: ``counter`` (the design note's rule: a too-easy outcome adds ``factor``
    encounters to skip) or ``history`` (beyond the design note, docs/concepts.md: each encounter is skipped with
    probability ``min(p**G, k / (k + 1))``: ``p**G`` is the chance its group would be all-correct, ``p``
    the prompt's pass rate averaged over its past groups, and ``k = factor`` caps it so a prompt that
    stays solved is skipped for ``k`` encounters on average, as under ``counter``; a prompt whose groups
    start failing comes back at once), or any registered skip rule."""

    rule: Any = None
    """The skip rule's own options (``HistoryOptions(weight=...)`` for ``history``; a mapping is taken);
    ``None``: its defaults."""

    def check(self) -> None:
        self.set_checked("factor", as_int(self.factor, "factor", 0))
        if self.hard_factor is not None:
            self.set_checked("hard_factor", as_int(self.hard_factor, "hard_factor", 0))
        self.set_checked("max", as_int(self.max, "max", 1))
        for name in ("factor", "hard_factor", "max"):  # each is added to a prompt's int32 snooze counter
            value = getattr(self, name)
            if value is not None and value > MAX_PERIOD:
                raise ConfigError(
                    f"{name}={shown(value)}: a snooze counter holds at most {MAX_PERIOD} encounters (2**31 - 1); "
                    "give a smaller period, or policy='filter' to retire too-easy prompts for good"
                )
        if not isinstance(self.hard, (bool, np.bool_)):
            raise ConfigError(f"hard={self.hard!r}: must be True or False")
        self.set_checked("hard", bool(self.hard))
        self.set_checked(
            "backoff", as_real(self.backoff, "backoff", 1.0, allowed="a finite number >= 1.0 (1.0 disables it)")
        )
        if not isinstance(self.skip, str) or self.skip not in SKIP_RULES:
            raise ConfigError(f"skip={self.skip!r}: must be one of {', '.join(map(repr, SKIP_RULES))}")
        cls = options_class(SKIP_RULES, self.skip)
        rule = self.rule
        if isinstance(rule, Mapping) and set(rule) - {f.name for f in dataclasses.fields(cls)}:
            owners = [
                n for n in SKIP_RULES if set(rule) <= {f.name for f in dataclasses.fields(options_class(SKIP_RULES, n))}
            ]
            if owners:  # an option given without the setting that uses it: refused, never dropped
                raise ConfigError(
                    f"rule={dict(rule)!r}: options of skip rule {owners[0]!r}, but skip={self.skip!r}; "
                    f"add skip={owners[0]!r} (on the command line, --snooze-skip {owners[0]})"
                )
        if rule is None or isinstance(rule, Mapping):
            rule = cls.from_dict(rule or {})
        elif type(rule) is not cls:
            raise ConfigError(f"rule={rule!r}: skip rule {self.skip!r} takes {cls.__name__}, not {type(rule).__name__}")
        self.set_checked("rule", rule)

    def replace(self, **changes: Any) -> Options:
        """A copy with some options changed; a new ``skip`` without a ``rule`` starts from that rule's defaults."""
        if "skip" in changes and "rule" not in changes:
            changes["rule"] = None
        return super().replace(**changes)


@register_policy("snooze")
class Snooze(Policy):
    """The counter, streak and ``EASY_SNOOZED`` updates; the skip rule has its columns, mask and periods."""

    Options = SnoozeOptions

    def __init__(self, options: Options, context: Context) -> None:
        super().__init__(options, context)
        opts = self.options
        self.rule = SKIP_RULES[opts.skip](opts.rule, context, opts)
        hard = opts.factor if opts.hard_factor is None else opts.hard_factor
        self.hard_period = np.int32(hard if opts.hard else 0)

    @property
    def columns(self) -> tuple[Column, ...]:  # type: ignore[override]
        return self.rule.columns  # type: ignore[no-any-return]

    @property
    def skip_mask(self) -> SkipMask | None:  # type: ignore[override]
        return self.rule.skip_mask  # type: ignore[no-any-return]

    @property
    def patience(self) -> int:  # type: ignore[override]
        return self.rule.patience  # type: ignore[no-any-return]

    def report(self, memory: PromptMemory, report: Report) -> Changes:
        """Each prompt once, its groups together: a prompt issued twice in one round gets both periods."""
        self.rule.report(memory, report)
        p = report.prompts()
        cols = memory.columns
        flags, counter, streak = cols["flags"][p.rows], cols["counter"][p.rows], cols["streak"][p.rows]
        regressed = ((flags & EASY_SNOOZED) != 0) & p.other
        streak = streak * ~p.other  # a group that was not too easy ends the streak
        # in int64: a prompt issued k times before its groups were reported gets k periods, which may pass int32
        new_counter = counter.astype(np.int64) + p.easy.astype(np.int64) * self.rule.easy_periods(streak)
        if self.hard_period:
            new_counter += p.hard.astype(np.int64) * np.int64(self.hard_period)
        over = new_counter > MAX_PERIOD
        if over.any():  # held at the most a counter holds (asleep for 2**31 - 1 encounters), and said so
            log.warning(
                "%d prompt(s) were snoozed past the most a snooze counter holds (several copies of each reported "
                "too easy at once); their counters are set to %d encounters",
                int(over.sum()),
                MAX_PERIOD,
            )
            new_counter = np.minimum(new_counter, MAX_PERIOD)
        flags = flags & ~(regressed * EASY_SNOOZED)
        if self.rule.marks_easy:
            flags |= (p.easy > 0) * EASY_SNOOZED
        cols["flags"][p.rows] = flags
        cols["counter"][p.rows] = new_counter
        cols["streak"][p.rows] = np.minimum(streak.astype(np.int32) + p.easy, 255)  # consecutive too-easy outcomes
        return Changes(new=(counter == 0) & (new_counter > 0), regressed=regressed)
