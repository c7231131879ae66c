"""``skip="counter"``: the seed's rule. A too-easy outcome adds ``snooze_factor`` encounters to the
prompt's snooze counter; with ``backoff`` the k-th consecutive one adds
``round(snooze_factor * backoff**(k-1))``, capped at ``max_snooze``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from snooze.core.policies.base import SkipRule, register_skip_rule

if TYPE_CHECKING:
    from snooze.core.config import SchedulerConfig

__all__ = ["CounterRule"]


@register_skip_rule("counter")
class CounterRule(SkipRule):
    """Skipping is the snooze counter alone: nothing to keep, nothing to mask."""

    def __init__(self, config: SchedulerConfig) -> None:
        super().__init__(config)
        self.marks_easy = config.snooze_factor > 0  # factor 0 is DAPO: nothing sleeps, nothing regresses
        self._fixed = np.int32(config.snooze_factor) if config.backoff == 1.0 else None

    def easy_periods(self, streak: np.ndarray) -> np.ndarray | np.integer:
        if self._fixed is not None:
            return self._fixed
        cfg = self.config
        if cfg.snooze_factor == 0:  # (0 x an overflowed backoff**k would be NaN)
            return np.int64(0)
        with np.errstate(over="ignore"):  # backoff**k past the largest float is inf: capped at max_snooze below
            grown = cfg.snooze_factor * np.power(float(cfg.backoff), streak.astype(np.float64))
        return np.minimum(np.rint(grown), cfg.max_snooze).astype(np.int64)
