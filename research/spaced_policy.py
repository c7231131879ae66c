"""``spaced``: a review schedule in training steps, tried for issue 40 and not kept in the library.

A plug-in policy, registered by :func:`register` (``research/retention_dev.py`` calls it); what it
measured against DAPO and the design note's snoozing is in research/README.md ("Spaced review, measured").

Zero-signal groups are dropped (as DAPO). A prompt sits out only once it is *confirmed* mastered
(``confirm`` too-easy groups in a row, so a prompt that solved one group by luck is not kept away), and
then for a span of **training steps**, not encounters: forgetting happens over updates, and an
encounter in a large pool may come dozens of steps apart. Its next encounter after the span is a
**review**. A clean review (too easy again) multiplies the span by ``growth`` (spaced repetition:
what stays mastered is looked at less and less often); a review with signal or errors ends the run:
the prompt is back in the stream as any other (a *regression*, ``snooze/regressed``) and must be
confirmed again. Reviews happen at the prompt's own encounters, so a review takes a slot of a round
that a fresh draw would have taken: it costs no extra round. With ``hard`` the too-hard side is
spaced the same way (a prompt failed ``confirm`` times in a row sits out, and is looked at again).

The audit (``SchedulerConfig.audit``) samples the encounters this policy skips; an audited prompt
whose group was not too easy (on its side) comes back at once, so what the audit finds is acted on.

State: one int32 column a prompt beside the base columns (``seen``: the step of the prompt's last
group + 1; 0 for never), and ``hard_run`` (uint8: too-hard groups in a row) under ``hard``; run-level,
the training steps finished (saved as ``meta.policy``). The skip is a pure function of those and the
step, so a resumed run skips exactly what the uninterrupted one does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze import TOO_EASY, TOO_HARD, ConfigError, StateError
from snooze.core.policies import (
    EASY_SNOOZED,
    POLICIES,
    Changes,
    Column,
    Context,
    Options,
    Policy,
    Report,
    as_int,
    as_real,
    register_policy,
)

__all__ = ["Spaced", "SpacedOptions", "MAX_DOUBLINGS"]

MAX_DOUBLINGS = 12
"""Clean reviews after which the span stops growing (``interval x growth**12``: at the defaults 25 x 4096
steps, longer than any run), so the span stays a finite int."""

_MAX_STEPS = 2**31 - 2  # the ``seen`` column is int32: steps + 1


@dataclass(frozen=True)
class SpacedOptions(Options):
    """The options of ``policy="spaced"``."""

    interval: int = 25
    """Training steps a prompt sits out once it is confirmed mastered (before its first review)."""

    confirm: int = 2
    """Too-easy groups in a row (too-hard ones under ``hard``) before a prompt sits out; 1 sits it out at its
    first, as the design note's snoozing does."""

    growth: float = 2.0
    """Each clean review multiplies the span by this (1.0: a fixed span)."""

    hard: bool = False
    """Space too-hard prompts too (failed ``confirm`` times in a row); off: only the easy side."""

    def check(self) -> None:
        self.set_checked("interval", as_int(self.interval, "interval", 1, _MAX_STEPS))
        self.set_checked("confirm", as_int(self.confirm, "confirm", 1, 255))
        self.set_checked("growth", as_real(self.growth, "growth", 1.0, 16.0, allowed="a finite number in [1, 16]"))
        if not isinstance(self.hard, (bool, np.bool_)):
            raise ConfigError(f"hard={self.hard!r}: must be True or False")
        self.set_checked("hard", bool(self.hard))


class Spaced(Policy):
    """Confirmed-mastered prompts sit out a span of training steps that grows with each clean review."""

    Options = SpacedOptions

    def __init__(self, options: Options, context: Context) -> None:
        super().__init__(options, context)
        opts = self.options
        runs = np.arange(256) - opts.confirm  # [256] by the run length (streak byte): the span, in steps
        spans = opts.interval * np.power(float(opts.growth), np.clip(runs, 0, MAX_DOUBLINGS))
        self.span = np.where(runs >= 0, np.minimum(spans, _MAX_STEPS), 0).astype(np.int64)
        self.columns = (Column("seen", np.int32, minimum=0),) + ((Column("hard_run", np.uint8),) if opts.hard else ())
        self.steps = 0  # training steps finished: the clock of the spans

    def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
        run = table.streak[rows]
        if self.options.hard:
            run = np.maximum(run, table.columns["hard_run"][rows])
        span = self.span[run]  # 0 below confirm: never skipped
        return awake & (span > 0) & (self.steps - (table.columns["seen"][rows].astype(np.int64) - 1) < span)

    def report(self, memory: Any, report: Report) -> Changes:
        """Each prompt once, its groups together: all too easy extends its easy run (all too hard, its hard run
        under ``hard``), anything else ends it; a prompt confirmed mastered whose review was not clean regressed."""
        return self._learn(memory, report, audit=False)

    def audited(self, memory: Any, report: Report) -> Changes:
        """A skipped prompt the audit found not mastered on its side comes back at once (its run ends, and an easy
        one counts as regressed); one found mastered is left as it was, so the audit stays a sample."""
        return self._learn(memory, report, audit=True)

    def _learn(self, memory: Any, report: Report, audit: bool) -> Changes:
        rows, ds, all_easy, all_hard, n_easy, n_hard = _sides(report)
        cols = memory.columns
        streak, flags = cols["streak"][rows].astype(np.int32), cols["flags"][rows]
        regressed = ((flags & EASY_SNOOZED) != 0) & ~all_easy
        if audit:  # only a run the audit contradicts changes
            new_streak = np.where(all_easy, streak, 0)
        else:
            new_streak = np.where(all_easy, np.minimum(streak + n_easy, 255), 0)
            cols["seen"][rows] = min(self.steps + 1, _MAX_STEPS + 1)
        if self.options.hard:
            hard_run = cols["hard_run"][rows].astype(np.int32)
            grown = hard_run if audit else np.minimum(hard_run + n_hard, 255)
            cols["hard_run"][rows] = np.where(all_hard, grown, 0)
        cols["streak"][rows] = new_streak
        confirmed = self.span[new_streak] > 0
        cols["flags"][rows] = np.where(confirmed, flags | EASY_SNOOZED, flags & ~EASY_SNOOZED)
        return Changes(regressed=regressed)

    def end_step(self, steps: int) -> None:
        self.steps = steps

    # -- state -------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping) or set(state) != {"steps"}:
            raise StateError("the 'spaced' policy state must hold 'steps' only; the state is corrupt")
        steps = state["steps"]
        if type(steps) is not int or not 0 <= steps <= _MAX_STEPS:
            raise StateError(f"policy.steps={steps!r}: must be an integer in [0, {_MAX_STEPS}]; the state is corrupt")
        self.steps = steps


def _sides(report: Report) -> tuple[np.ndarray, ...]:
    """Each prompt of the report once: ``(rows, ds, all_easy, all_hard, too-easy groups, too-hard groups)``,
    ``[U]`` each (a prompt issued twice in one round has its groups counted together)."""
    easy, hard = report.outcomes == TOO_EASY, report.outcomes == TOO_HARD
    if not report.repeated:
        return report.group_rows, report.group_ds, easy, hard, easy.astype(np.int32), hard.astype(np.int32)
    rows, first, inverse = np.unique(report.group_rows, return_index=True, return_inverse=True)
    n = np.bincount(inverse, minlength=rows.shape[0])
    n_easy = np.bincount(inverse, weights=easy, minlength=rows.shape[0]).astype(np.int32)
    n_hard = np.bincount(inverse, weights=hard, minlength=rows.shape[0]).astype(np.int32)
    return rows, report.group_ds[first], n_easy == n, n_hard == n, n_easy, n_hard


def register() -> None:
    """Register ``policy="spaced"`` (once; ``research/retention_dev.py`` does before building its arms)."""
    if POLICIES.get("spaced") is not Spaced:
        register_policy("spaced")(Spaced)
