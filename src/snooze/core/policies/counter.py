"""``skip="counter"``: the design note's rule. A too-easy outcome adds ``SnoozeOptions.factor`` encounters to
the prompt's snooze counter; with ``backoff`` the k-th consecutive one adds
``round(factor * backoff**(k-1))``, capped at ``max``. It has no options of its own."""

from __future__ import annotations

from typing import Any

import numpy as np

from snooze.core.options import Options
from snooze.core.policies.base import Context, SkipRule, register_skip_rule

__all__ = ["CounterRule"]


@register_skip_rule("counter")
class CounterRule(SkipRule):
    """Skipping is the snooze counter alone: nothing to keep, nothing to mask."""

    def __init__(self, options: Options, context: Context, snooze: Any) -> None:
        super().__init__(options, context, snooze)
        self.marks_easy = snooze.factor > 0  # factor 0 is DAPO: nothing sleeps, nothing regresses
        self._fixed = np.int32(snooze.factor) if snooze.backoff == 1.0 else None

    def easy_periods(self, streak: np.ndarray) -> np.ndarray | np.integer:
        if self._fixed is not None:
            return self._fixed
        opts = self.snooze
        if opts.factor == 0:  # (0 x an overflowed backoff**k would be NaN)
            return np.int64(0)
        with np.errstate(over="ignore"):  # backoff**k past the largest float is inf: capped at max below
            grown = opts.factor * np.power(float(opts.backoff), streak.astype(np.float64))
        return np.minimum(np.rint(grown), opts.max).astype(np.int64)
