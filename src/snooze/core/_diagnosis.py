"""The audit's diagnosis: the evidence it gathers step by step, and the alarms that read it (docs/concepts.md,
"The audit" and "Exhaustion"; docs/metrics.md).

**Evidence.** Each step's counts (:data:`EVIDENCE`: audit and drawn groups, their signal groups and pass rates,
the encounters the policy skipped, what DAPO would have generated) are gathered in :attr:`Diagnosis.step` while
the step runs and added to the run's :attr:`Diagnosis.totals` when it ends (:meth:`Diagnosis.finish`), which
turns them into the ``snooze/audit/*``, ``snooze/drawn/*``, ``snooze/saved/*`` and ``total/*`` metrics. An
alarm reads a finished step's evidence and the totals; its state (which alarms fired) is
:attr:`Diagnosis.warned`, saved with the rest.

**The skipping alarm** (:func:`skipping_costs`), which turns the guard on (:class:`~snooze.core._audit.Audit`).
It fires at the end of the first step at which either

- the signal given up reaches :data:`GIVEN_UP_SHARE` of the signal found: skipped encounters not rolled out, each at
  its step's drawn signal rate, times the audit's ratio at its lower bound (its signal groups, less :data:`LOWER_Z`
  standard deviations, over what drawn groups would have given at the same steps), over the run's signal groups
  (drawn and audited), once :data:`MIN_AUDITS` audit groups are in. It needs the audit (``SchedulerConfig.audit``
  above 0): without it nothing is measured; or
- the relapse rate reaches :data:`RELAPSE_RATE`: of the groups of prompts whose previous group was too easy
  (``EASY_SNOOZED``: the moment a skipping policy skips), at least :data:`MIN_RETURNS` of them, the share not too easy
  again (the mastery it skipped on did not hold).

Both thresholds were fitted on labelled development runs (``research/alarm_dev.py``; docs/results.md, "How often the
alarm is right"): 1 false alarm in 30 healthy runs, 40 of 57 harmful ones caught. That misses the error rates a
default warning is held to, so the alarm is a metric (``snooze/audit/alarm``: 1 from the step it fired) and an INFO
line, not a WARNING; the guard acts on it all the same, since acting costs a healthy run only part of its saving.

**Exhaustion.** When ``max_gen_rounds`` binds at every one of the last :data:`EXHAUSTED_WINDOW` steps
and those steps trained on less than :data:`EXHAUSTED_USED` of what they generated, the batch cannot be
filled, and which side the round limit ran out on says why. Most of the window's groups too easy: the pool
is used up (``gen/exhausted`` is 1; add data, stop, or lower ``max_gen_rounds``). As many or more too
hard: the pool is beyond the model for now (``gen/unsolved`` is 1, as at a cold start where nothing is
solved yet; the run is about to learn, not done: keep going, make the data easier, or raise
``max_gen_rounds`` or ``gen_batch_size``). Each warns once a run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

from snooze._kit.state import state_int
from snooze.core.classify import SIGNAL, group_means
from snooze.core.errors import StateError
from snooze.core.saved import Shape, audit_drawn, dapo_step_groups

__all__ = [
    "Diagnosis",
    "skipping_costs",
    "guard_scores",
    "EVIDENCE",
    "GIVEN_UP_SHARE",
    "RELAPSE_RATE",
    "MIN_RETURNS",
    "EXHAUSTED_WINDOW",
    "EXHAUSTED_USED",
]

log = logging.getLogger("snooze.core.scheduler")  # the scheduler's logger: users filter one name

GIVEN_UP_SHARE = 0.45
"""The alarm fires when the signal groups skipping gave up (at the audit's lower bound, :data:`LOWER_Z`) reach this
share of those the run found (fitted on development runs: every threshold from 0.35 to 0.5 gave the same error
rates there)."""
LOWER_Z = 1.28
"""The audit's signal count is taken at its one-sided 90% lower bound, ``k - 1.28 sqrt(k)`` (Poisson, normal
approximation): a run whose skips far outnumber its signal groups multiplies the audit's sampling error, and a
point estimate (or its prior) fired the alarm in a pool 90% solved, where skipping gives up almost nothing."""
MIN_AUDITS = 20
"""Audit groups needed before the given-up share may fire the alarm: before them the audit's ratio is mostly its
prior (skipped encounters as rich in signal as drawn ones), which claims every skip gave up a drawn group's signal.
On the development runs no alarm came earlier for it; in small runs with few audits it keeps the prior from firing."""
RELAPSE_RATE = 0.40
"""... or when this share of the returns (groups of prompts whose previous group was too easy) is not too easy again
(fitted on development runs; in the synthetic case where every prompt passes at 0.8 it reaches 0.8-0.95)."""
MIN_RETURNS = 30
"""Returns needed before the relapse rate may fire the alarm."""
EXHAUSTED_WINDOW = 10
"""Steps in a row at which ``max_gen_rounds`` must bind (the batch not full after the last round)."""
EXHAUSTED_USED = 0.05
"""Used share of generation (groups trained / groups generated) over the window below which the pool
counts as used up. A step that stops at the round limit uses at most ``batch_size / (max_gen_rounds x
gen_batch_size)`` of it (1/8 at the defaults); 0.05 means less than 40% of each batch was filled."""

_COUNTS = ("audit_groups", "audit_signal", "drawn_groups", "drawn_signal", "skips", "returns", "relapses")
_SUMS = ("audit_pass", "drawn_pass", "dapo_groups", "audit_drawn", "skipped_drawn")
EVIDENCE = (*_COUNTS, *_SUMS)
"""A step's evidence (and the run's totals of it): counts (integers) then sums (floats). ``returns`` and
``relapses`` are groups of prompts whose previous group was too easy, and those of them not too easy again;
``skipped_drawn`` sums each step's skipped encounters not rolled out times its drawn signal rate."""
ALARMS = ("skipping", "exhausted", "unsolved")
"""The alarms, each of which warns once a run: their state is :attr:`Diagnosis.warned`."""

_BOUND_WARNINGS = {
    "exhausted": "the pool is used up: max_gen_rounds bound at each of the last %d steps, which trained on %d of the "
    "%d groups they generated (%.1f%%), most of the rest too easy; add data, stop, or lower max_gen_rounds",
    "unsolved": "the pool is beyond the model for now: max_gen_rounds bound at each of the last %d steps, which "
    "trained on %d of the %d groups they generated (%.1f%%), as many or more of the rest too hard as too easy (as at "
    "a cold start: the run is about to learn, not done); keep going, make the data easier, or raise max_gen_rounds "
    "or gen_batch_size",
}


def guard_scores(totals: Mapping[str, float], audit_on: bool) -> tuple[float, float]:
    """The alarm's two statistics on the run's evidence: ``(given-up share, relapse rate)``. The share: skipped
    encounters not rolled out, each at its step's drawn signal rate (``skipped_drawn``), times the audit's ratio at its
    lower bound (its signal groups, less :data:`LOWER_Z` standard deviations, over what drawn groups would have given
    at the same steps), over the signal groups found; 0 while nothing was found or audited, or with the audit off.
    The rate: relapses over returns, 0 before any return."""
    found, k = totals["drawn_signal"] + totals["audit_signal"], totals["audit_signal"]
    share = 0.0
    if audit_on and found > 0 and totals["audit_drawn"] > 0:
        rho = max(k - LOWER_Z * k**0.5, 0.0) / totals["audit_drawn"]
        share = float(totals["skipped_drawn"] * rho / found)
    return share, _rate(totals["relapses"], totals["returns"])


def skipping_costs(totals: Mapping[str, float], scores: tuple[float, float]) -> bool:
    """The alarm's test on :func:`guard_scores`: the given-up share at least :data:`GIVEN_UP_SHARE` once
    :data:`MIN_AUDITS` audit groups are in, or the relapse rate at least :data:`RELAPSE_RATE` once :data:`MIN_RETURNS`
    returns are in."""
    share, rate = scores
    return (totals["audit_groups"] >= MIN_AUDITS and share >= GIVEN_UP_SHARE) or (
        totals["returns"] >= MIN_RETURNS and rate >= RELAPSE_RATE
    )


class Diagnosis:
    """The audit's evidence (per step and run totals), the exhaustion window and which alarms fired.
    Part of the audit's state (:class:`~snooze.core._audit.Audit`); a state without it starts at zero."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = _zeros()
        # the last EXHAUSTED_WINDOW steps: [bound (0/1), generated, trained, too easy, too hard]
        self.window: list[list[int]] = []
        self.warned: dict[str, bool] = {k: False for k in ALARMS}  # the alarm state: each warns once a run
        self.start_step()

    def start_step(self) -> None:
        self.step: dict[str, float] = _zeros()  # the evidence of the step in progress

    def snapshot(self) -> tuple[Any, ...]:
        return dict(self.totals), dict(self.step), [list(w) for w in self.window], dict(self.warned)

    def restore(self, snap: tuple[Any, ...]) -> None:
        self.totals, self.step, self.window, self.warned = snap

    # -- evidence ---------------------------------------------------------------------------------
    def add_skips(self, n: int) -> None:
        """Encounters the policy skipped (audited ones among them): the population the audit samples."""
        self.step["skips"] += int(n)

    def add_returns(self, returns: int, relapses: int) -> None:
        """A report's groups of prompts whose previous group was too easy, and those not too easy again."""
        self.step["returns"] += int(returns)
        self.step["relapses"] += int(relapses)

    def record(
        self, audit: np.ndarray, outcomes: np.ndarray, rewards: np.ndarray, reward_range: tuple[float, float]
    ) -> None:
        """A report's groups: ``audit`` ``[N]`` marks the audit groups, the rest are the stream's draws."""
        low, high = reward_range
        means = np.clip((group_means(rewards) - low) / (high - low), 0.0, 1.0)
        signal = outcomes == SIGNAL
        for name, sel in (("audit", audit), ("drawn", ~audit)):
            self.step[f"{name}_groups"] += int(np.count_nonzero(sel))
            self.step[f"{name}_signal"] += int(np.count_nonzero(signal & sel))
            self.step[f"{name}_pass"] += float(means[sel].sum())

    def finish(
        self,
        out: dict[str, Any],
        bound: bool,
        counts: tuple[int, int, int, int],
        audit_share: float,
        shape: Shape,
        guard: bool = True,
    ) -> None:
        """Add the finished step's ``snooze/audit/*``, ``snooze/drawn/*``, ``snooze/saved/*``, ``snooze/guard/*``
        statistics, ``gen/exhausted``, ``gen/unsolved`` and their totals to ``out``; advance the totals and the window
        (``counts``: the step's generated, trained, too-easy and too-hard groups; ``shape``: the step's sizes); log
        (once per run) when an alarm fires (``guard``: whether the guard will act on the skipping alarm)."""
        s, t = self.step, self.totals
        s["audit_drawn"] = audit_drawn(s)
        drawn_rate = _rate(s["drawn_signal"], s["drawn_groups"])
        s["skipped_drawn"] = max(int(s["skips"] - s["audit_groups"]), 0) * drawn_rate
        for k in EVIDENCE:
            if k != "dapo_groups":
                t[k] += s[k]
        s["dapo_groups"] = dapo_step_groups(s, t, shape)  # (the totals with this step: dapo_step_groups's contract)
        t["dapo_groups"] += s["dapo_groups"]
        out["snooze/saved/dapo_groups"], out["snooze/saved/groups"] = s["dapo_groups"], s["dapo_groups"] - counts[0]
        self._rates(out, "snooze/", s)
        self._rates(out, "total/", t)
        self.window = (self.window + [[int(bound), *map(int, counts)]])[-EXHAUSTED_WINDOW:]
        side = self.bound_side()
        out["gen/exhausted"], out["gen/unsolved"] = int(side == "exhausted"), int(side == "unsolved")
        if side and not self.warned[side]:
            self.warned[side] = True
            gen, used = sum(w[1] for w in self.window), sum(w[2] for w in self.window)
            log.warning(_BOUND_WARNINGS[side], EXHAUSTED_WINDOW, used, gen, 100 * used / gen if gen else 0.0)
        scores = guard_scores(t, audit_share > 0)
        out["snooze/guard/given_up_share"], out["snooze/guard/relapse_rate"] = scores
        out["snooze/guard/returns"] = int(t["returns"])
        if not self.warned["skipping"] and skipping_costs(t, scores):
            self.warned["skipping"] = True
            _note_alarm(t, scores, guard)
        out["snooze/audit/alarm"] = int(self.warned["skipping"])
        self.start_step()

    def cumulative(self) -> dict[str, Any]:
        """The run's totals as metrics (``total/audit_*``, ``total/drawn_*``), as :meth:`finish` adds them."""
        out: dict[str, Any] = {}
        self._rates(out, "total/", self.totals)
        return out

    def _rates(self, out: dict[str, Any], prefix: str, c: Mapping[str, float]) -> None:
        """``c``'s counts as metrics under ``prefix`` (``snooze/``: this step's; ``total/``: the run's)."""
        rate = _rate(self.totals["audit_signal"], self.totals["audit_groups"])
        sep = "/" if prefix == "snooze/" else "_"
        for name in ("audit", "drawn"):
            key = f"{prefix}{name}{sep}"
            out[key + "groups"] = int(c[f"{name}_groups"])
            out[key + "signal_rate"] = _rate(c[f"{name}_signal"], c[f"{name}_groups"])
            out[key + "pass_rate"] = _rate(c[f"{name}_pass"], c[f"{name}_groups"])
        # signal groups given up: skipped encounters not rolled out x the run's audited signal rate so far
        out[f"{prefix}audit{sep}given_up"] = max(int(c["skips"] - c["audit_groups"]), 0) * rate

    def bound_side(self) -> str:
        """``"exhausted"`` or ``"unsolved"`` when every step of a full window bound and together they used less
        than :data:`EXHAUSTED_USED` (mostly too-easy groups, or as many too hard), else ``""``."""
        if len(self.window) < EXHAUSTED_WINDOW or not all(w[0] for w in self.window):
            return ""
        gen, used, easy, hard = (sum(w[i] for w in self.window) for i in (1, 2, 3, 4))
        if not (gen > 0 and used < EXHAUSTED_USED * gen):
            return ""
        return "unsolved" if hard >= easy else "exhausted"

    # -- state ------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "totals": dict(self.totals),
            "step": dict(self.step),
            "window": [list(w) for w in self.window],
            "warned": dict(self.warned),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Counts integers >= 0, sums finite and >= 0, the window at most :data:`EXHAUSTED_WINDOW` 5-lists. A state
        written before ``audit_drawn`` existed takes the run's drawn signal rate for it (``snooze/saved/*`` only)."""
        if not isinstance(state, Mapping):
            raise StateError("metrics.diagnosis is not a mapping; the state is corrupt")
        totals, step = (_counts(state.get(part, {}), part) for part in ("totals", "step"))
        window = state.get("window", [])
        if (
            not isinstance(window, list)
            or len(window) > EXHAUSTED_WINDOW
            or not all(isinstance(w, list) and len(w) == 5 for w in window)
        ):
            raise StateError(
                "metrics.diagnosis.window is not a list of [bound, generated, trained, too easy, too hard]; "
                "the state is corrupt"
            )
        window = [[state_int(v, "metrics.diagnosis.window") for v in w] for w in window]
        warned = state.get("warned", {})
        if not isinstance(warned, Mapping) or not all(isinstance(warned.get(k, False), bool) for k in self.warned):
            raise StateError("metrics.diagnosis.warned is not a mapping of warning to True/False; the state is corrupt")
        if "audit_drawn" not in state.get("totals", {}):  # written before the field: the run's drawn rate stands in
            totals["audit_drawn"] = audit_drawn(totals)
        self.totals, self.step, self.window = totals, step, window
        self.warned = {k: bool(warned.get(k, False)) for k in self.warned}


def _note_alarm(t: Mapping[str, float], scores: tuple[float, float], guard: bool) -> None:
    """The skipping alarm, logged at INFO, not WARNING: measured as a test on labelled development runs it alarmed 1
    healthy run in 30 and caught 40 harmful ones in 57 (docs/results.md, "How often the alarm is right"), short of
    the 1 in 20 and 80% a warning given by default is held to; ``snooze/audit/alarm`` records it, and the guard (on
    unless ``SchedulerConfig.guard=False``) acts on it from the next step."""
    share, rate = scores
    log.info(
        "skipping is giving up signal: it skipped encounters worth about %.0f%% of the %d signal groups the run found "
        "(alarm at %.0f%%), and %d of %d prompts that came back after a too-easy group were not too easy again (alarm "
        "at %.0f%% of at least %d). %s. Judge the run by late accuracy beside a DAPO run's",
        100 * share,
        t["drawn_signal"] + t["audit_signal"],
        100 * GIVEN_UP_SHARE,
        t["relapses"],
        t["returns"],
        100 * RELAPSE_RATE,
        MIN_RETURNS,
        "From the next step every encounter the policy skips is rolled out (the guard; SchedulerConfig.guard=False "
        "keeps skipping)"
        if guard
        else "The guard is off (SchedulerConfig.guard=False): skipping goes on",
    )


def _zeros() -> dict[str, float]:
    return {k: 0 for k in _COUNTS} | {k: 0.0 for k in _SUMS}


def _counts(part: Any, what: str) -> dict[str, float]:
    if not isinstance(part, Mapping):
        raise StateError(f"metrics.diagnosis.{what} is not a mapping; the state is corrupt")
    out: dict[str, float] = {k: state_int(part.get(k, 0), f"metrics.diagnosis.{what}[{k!r}]") for k in _COUNTS}
    for k in _SUMS:
        v = part.get(k, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
            raise StateError(f"metrics.diagnosis.{what}[{k!r}]={v!r} is not a finite number >= 0; the state is corrupt")
        out[k] = float(v)
    return out


def _rate(num: float, den: float) -> float:
    return float(num) / float(den) if den else 0.0
