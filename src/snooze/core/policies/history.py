"""``skip="history"``: probabilistic skipping from each prompt's pass-rate history (docs/concepts.md).

Each prompt keeps one byte, its pass rate ``p`` averaged over its past groups
(``p <- p + weight * (mean - p)``, :class:`HistoryOptions`; the first group sets it; 0 = no group yet, ``1 + 254 p``
otherwise). At each encounter it is skipped with probability ``min(p**G, k / (k + 1))``: ``p**G`` is
the chance its group would be all-correct (wasted), and the cap ``k / (k + 1)`` (``k = SnoozeOptions.factor``)
makes a prompt that stays solved sit out ``k`` encounters on average, as under the counter rule.
The randomness is a hash of ``(seed, dataset, epoch, row)`` (:func:`~snooze.core._hash.encounter_uniform`, the
scheduler's one stateless hash), so nothing is saved for it and a resumed
run skips exactly what the uninterrupted one does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze._kit.checks import as_real
from snooze.core._hash import encounter_uniform  # (re-exported: predictive's jitter uses it too)
from snooze.core._memory import Column, PromptMemory, PromptTable
from snooze.core._stream import DatasetStream
from snooze.core.errors import ConfigError
from snooze.core.options import Options
from snooze.core.policies.base import Context, Report, SkipRule, register_skip_rule

__all__ = ["HistoryRule", "HistoryOptions", "encounter_uniform", "PATIENCE"]

PATIENCE = 256
"""Passes over a dataset in which every encounter was skipped after which a draw gives up on it for the round:
each is rolled out with probability at least ``1 / (k + 1)``, so a walk would end, but after about ``k``
passes (``k = SnoozeOptions.factor``, up to 2**31 - 1). With ``k = 5`` a dataset of one solved prompt gives up
wrongly with probability (5/6)**256 = 5e-21."""
_LEVELS = 254  # history byte h: 0 = no group seen yet; 1..255 = pass rate (h - 1) / 254


@dataclass(frozen=True)
class HistoryOptions(Options):
    """The options of ``skip="history"`` (``SnoozeOptions(skip="history", rule=HistoryOptions(...))``)."""

    weight: float = 0.5
    """``skip="history"``: weight of the newest group in the pass-rate average (1.0: the last group only)."""

    def check(self) -> None:
        w = as_real(self.weight, "weight", allowed="in (0, 1]")
        if not 0.0 < w <= 1.0:
            raise ConfigError(f"weight={self.weight!r}: must be in (0, 1]")
        self.set_checked("weight", w)


@register_skip_rule("history")
class HistoryRule(SkipRule):
    """One pass-rate byte per prompt; an encounter skipped with probability ``min(p**G, k/(k+1))``."""

    Options = HistoryOptions
    columns = (Column("history", np.uint8),)
    patience = PATIENCE  # a walk gives up on a dataset after this many passes of skips in a row (k = 10**7 would
    # otherwise walk on for ever)

    def __init__(self, options: Options, context: Context, snooze: Any) -> None:
        super().__init__(options, context, snooze)
        k = snooze.factor
        p = np.concatenate([[0.0], np.arange(_LEVELS + 1) / _LEVELS])  # byte 0: no group seen yet
        self.skip_lut = np.minimum(p**context.group_size, k / (k + 1))  # [256] skip probability per byte
        self.skip_lut[0] = 0.0

    def skip_mask(self, table: PromptTable, stream: DatasetStream, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
        p_skip = self.skip_lut[table.columns["history"][rows]]
        maybe = np.flatnonzero(awake & (p_skip > 0))  # hash only where a skip is possible
        skip = np.zeros(rows.shape[0], dtype=bool)
        skip[maybe] = encounter_uniform(stream.seed, stream.key, stream.epoch, rows[maybe]) < p_skip[maybe]
        return skip

    def report(self, memory: PromptMemory, report: Report) -> None:
        """Fold each group's pass rate into its prompt's byte, in report order when a prompt repeats."""
        h, rows, means, w = memory.columns["history"], report.group_rows, report.means(), self.options.weight

        def fold(byte: np.ndarray, m: np.ndarray) -> np.ndarray:
            old = np.where(byte > 0, (byte.astype(np.float64) - 1.0) / _LEVELS, m)
            return (1.0 + np.rint(_LEVELS * (old + w * (m - old)))).astype(np.uint8)

        if not report.repeated:
            h[rows] = fold(h[rows], means)
            return
        for r, m in zip(rows.tolist(), means.tolist()):  # rare (an epoch edge in one report): one at a time
            h[r] = fold(h[r : r + 1], np.array([m]))[0]

    def easy_periods(self, streak: np.ndarray) -> np.integer:
        return np.int32(0)  # no counter for too-easy outcomes: the history decides at each encounter
