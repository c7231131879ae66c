"""What DAPO would have generated: the saved-groups estimator behind ``snooze/saved/*`` (docs/metrics.md).

Public, so that a finished run's saving can be re-estimated from its metrics log by this version's estimator
(:func:`saved_from_metrics`; :func:`snooze.analysis.saved_dapo_groups` reads the log for it). The scheduler's
audit (:mod:`snooze.core._audit`) calls :func:`dapo_step_groups` at the end of every step; the estimate decides
nothing in a run. Pure functions of counts: no state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from snooze._kit.checks import finite_float, shown
from snooze.core.errors import DataError

__all__ = ["Shape", "expected_rounds", "dapo_step_groups", "saved_from_metrics", "audit_drawn", "PRIOR_GROUPS"]

PRIOR_GROUPS = 3
"""Pseudo-audit-groups with signal at the drawn rate added to the audit's when ``snooze/saved/*`` estimates how
often skipped encounters carry signal against drawn ones: before the audit has seen a few groups, the estimate
leans to no saving (chosen on development runs, ``research/saved_gap.py``: 10 leaned to it for most of a run)."""


class Shape(NamedTuple):
    """A step's sizes: ``batch_size`` signal groups wanted, rounds of ``gen_batch_size``, ``max_gen_rounds``."""

    batch: int
    gen: int
    rounds: int


def expected_rounds(batch: int, gen: int, rate: float, cap: int) -> float:
    """Rounds DAPO's dynamic sampling takes on average to gather ``batch`` groups with signal, ``gen`` groups a
    round each with signal at ``rate``, at most ``cap``: ``sum over k < cap of P(Bin(k x gen, rate) < batch)``,
    each term by the normal approximation with a continuity correction (the sum of the first k rounds' signal
    groups is Bin(k x gen, rate); the step goes on to round k + 1 while it is short)."""
    out = 1.0  # the first round always runs
    for k in range(1, cap):
        mean, var = k * gen * rate, k * gen * rate * (1.0 - rate)
        if var <= 0.0:
            short = mean < batch
        else:
            short = 0.5 * (1.0 + math.erf((batch - 0.5 - mean) / math.sqrt(2.0 * var)))
        out += float(short)
    return out


def dapo_step_groups(step: Mapping[str, float], totals: Mapping[str, float], shape: Shape) -> float:
    """Groups DAPO's dynamic sampling would have generated for a step: rounds of ``gen_batch_size`` until
    ``batch_size`` groups with signal, at most ``max_gen_rounds`` (:func:`expected_rounds`), at the signal rate
    of the step's encounters, the skipped ones (not rolled out) taken at ``rho`` x the step's drawn rate.

    ``rho``, how often a skipped encounter carries signal against a drawn one, is the audit's signal groups
    over the signal groups drawn encounters would have given at the same steps (``audit_drawn``: each step's
    audit groups x its drawn rate, :func:`audit_drawn`), both over the run so far, with :data:`PRIOR_GROUPS`
    pseudo-groups at 1 (no saving claimed before the audit measured it; with the audit off, none is). A ratio
    and not the audited rate itself, because the signal rate falls as the model learns: a rate pooled over the
    run would carry the early, higher rates into late steps (research/saved_gap.py measured that bias on
    development runs). ``step``: the step's ``audit_groups``, ``audit_signal``, ``drawn_groups``,
    ``drawn_signal`` and ``skips`` (the encounters the policy skipped, audited ones among them); ``totals``: the
    run's ``audit_signal`` and ``audit_drawn``, this step's included."""
    skipped = max(step["skips"] - step["audit_groups"], 0)
    met = step["drawn_groups"] + step["audit_groups"] + skipped
    if not met:
        return 0.0
    drawn = _rate(step["drawn_signal"], step["drawn_groups"])
    prior = PRIOR_GROUPS * drawn
    rho = (totals["audit_signal"] + prior) / (totals["audit_drawn"] + prior) if totals["audit_drawn"] + prior else 1.0
    signal = step["drawn_signal"] + step["audit_signal"] + skipped * rho * drawn
    return shape.gen * expected_rounds(shape.batch, shape.gen, signal / met, shape.rounds)


def audit_drawn(step: Mapping[str, float]) -> float:
    """The signal groups the step's audit groups would have given at its drawn rate (``rho``'s denominator)."""
    return step["audit_groups"] * _rate(step["drawn_signal"], step["drawn_groups"])


def saved_from_metrics(lines: Sequence[Mapping[str, Any]], shape: Shape) -> float:
    """``total/saved_dapo_groups`` recomputed from a run's per-step metrics lines (``snooze/audit/*``,
    ``snooze/drawn/*``, ``snooze/skipped``; the ``full`` metrics) with this version's :func:`dapo_step_groups`:
    to re-estimate a finished run's saving (the estimate changes no decision of the run) or check a new
    estimator on old logs. Lines without those keys (``compact`` metrics, another tool's log) raise a
    :class:`DataError`. ``snooze/skipped`` and ``filter/skipped`` stand for the encounters the audit samples:
    exact for policies that do not exclude prompts (a curriculum's excluded ones are counted in too)."""
    need = ("snooze/audit/groups", "snooze/audit/signal_rate", "snooze/drawn/groups", "snooze/drawn/signal_rate")
    totals = {"audit_signal": 0.0, "audit_drawn": 0.0}
    out = 0.0
    for i, line in enumerate(lines):
        if not isinstance(line, Mapping):
            raise DataError(f"metrics line {i} is a {type(line).__name__}, not a mapping of metric names to values")
        missing = [k for k in (*need, "snooze/skipped") if line.get(k) is None]
        if missing:
            raise DataError(
                f"metrics line {i} has no {', '.join(missing)}: recomputing the saving needs every step's full "
                "metrics (TrainConfig(metrics='full'), the default)"
            )
        bad = [
            k for k in (*need, "snooze/skipped", "filter/skipped") if line.get(k) is not None and _not_count(line[k])
        ]
        if bad:
            raise DataError(f"metrics line {i}: {bad[0]} is {shown(line[bad[0]])}, not a finite number >= 0")
        rate = [k for k in need if k.endswith("signal_rate") and float(line[k]) > 1]
        if rate:
            raise DataError(f"metrics line {i}: {rate[0]} is {line[rate[0]]!r}, not a rate in [0, 1]")
        step = {
            "audit_groups": float(line["snooze/audit/groups"]),
            "audit_signal": line["snooze/audit/groups"] * line["snooze/audit/signal_rate"],
            "drawn_groups": float(line["snooze/drawn/groups"]),
            "drawn_signal": line["snooze/drawn/groups"] * line["snooze/drawn/signal_rate"],
        }
        # the skipped encounters, audited ones among them (what the audit samples): as the audit counts them
        step["skips"] = float(line["snooze/skipped"]) + float(line.get("filter/skipped") or 0)
        totals["audit_signal"] += step["audit_signal"]
        totals["audit_drawn"] += audit_drawn(step)
        out += dapo_step_groups(step, totals, shape)
    return out


def _not_count(value: Any) -> bool:
    """Whether a logged count or rate is unusable: not a finite real number >= 0 (a bool is not one, nor an
    integer too large for a float, ``10**400``: :func:`~snooze._kit.checks.finite_float`)."""
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return True
    number = finite_float(value)
    return number is None or number < 0


def _rate(num: float, den: float) -> float:
    return float(num) / float(den) if den else 0.0
