"""``snooze``: dynamic data snoozing (the design note's third remedy; docs/concepts.md, "Snoozing, exactly").

Zero-signal groups are dropped (as DAPO). A too-easy outcome snoozes the prompt: how, is the skip
rule's (``SchedulerConfig.skip``): ``counter`` adds ``snooze_factor`` encounters to its counter (the
seed's rule), ``history`` skips it with a probability from its pass rate. Either way the prompt is
marked ``EASY_SNOOZED`` and, if its next group is not too easy, it has *regressed*. With
``snooze_hard`` a too-hard outcome adds ``hard_snooze_factor`` to the counter as well.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from snooze.core._memory import EASY_SNOOZED, PromptMemory
from snooze.core.policies.base import SKIP_RULES, Changes, Policy, Report, register_policy

if TYPE_CHECKING:
    from snooze.core.config import SchedulerConfig

__all__ = ["Snooze", "MAX_COUNTER"]

log = logging.getLogger(__name__)

MAX_COUNTER = 2**31 - 1  # the counter column is int32 (SchedulerConfig.MAX_PERIOD: no one period is longer)


@register_policy("snooze")
class Snooze(Policy):
    """The counter, streak and ``EASY_SNOOZED`` updates; the skip rule adds its columns, mask and periods."""

    def __init__(self, config: SchedulerConfig) -> None:
        super().__init__(config)
        self.rule = SKIP_RULES[config.skip](config)
        self.columns = self.rule.columns
        self.skip_mask = self.rule.skip_mask
        self.patience = self.rule.patience
        hard = config.snooze_factor if config.hard_snooze_factor is None else config.hard_snooze_factor
        self.hard_period = np.int32(hard if config.snooze_hard else 0)

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
        over = new_counter > MAX_COUNTER
        if over.any():  # held at the most a counter holds (asleep for 2**31 - 1 encounters), and said so
            log.warning("%d prompt(s) were snoozed past the most a snooze counter holds (several copies of each reported "
                        "too easy at once); their counters are set to %d encounters", int(over.sum()), MAX_COUNTER)
            new_counter = np.minimum(new_counter, MAX_COUNTER)
        flags = flags & ~(regressed * EASY_SNOOZED)
        if self.rule.marks_easy:
            flags |= (p.easy > 0) * EASY_SNOOZED
        cols["flags"][p.rows] = flags
        cols["counter"][p.rows] = new_counter
        cols["streak"][p.rows] = np.minimum(streak.astype(np.int32) + p.easy, 255)  # consecutive too-easy outcomes
        return Changes(p.ds, new=(counter == 0) & (new_counter > 0), regressed=regressed)
