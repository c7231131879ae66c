"""The audit and the exhaustion diagnosis: what skipping gives up, and when the pool is used up
(docs/concepts.md, "The audit" and "Exhaustion"; docs/metrics.md).

**Audit.** A share ``SchedulerConfig.audit`` of the encounters a policy skips before any rollout is
rolled out anyway, and at most that share of each generation round (:func:`audit_budget`: an audit
group fills a slot of the round, so the audit's cost is bounded by its share of generation whatever
the policy skips). Which ones is a hash of ``(seed, dataset, row, epoch)`` (a prompt comes up once
per epoch, so the epoch is its encounter number): stateless, the same on every machine and across a
resume, and independent of everything the run has seen, so the audited encounters are a uniform
random sample of the skipped ones the walk looks at (the first of them in stream order, up to the
round's budget; a leap over prompts that are all asleep looks at none). Their signal rate is an
unbiased estimate of the signal rate of the encounters the policy skips, and ``(skipped - audited) x
that rate`` estimates the signal groups given up. An audit group reaches the policy only through
:meth:`Policy.audited` (nothing by default: the memory evolves as if it had been skipped).

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
import math
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from snooze._kit.checks import finite_float, shown
from snooze.core._stateful import state_int
from snooze.core.classify import SIGNAL, group_means
from snooze.core.errors import DataError, StateError

__all__ = [
    "audit_uniform",
    "expected_rounds",
    "dapo_step_groups",
    "saved_from_metrics",
    "Shape",
    "Diagnosis",
    "AUDIT_MIN_GROUPS",
    "AUDIT_WARN_RATIO",
    "EXHAUSTED_WINDOW",
    "EXHAUSTED_USED",
]

log = logging.getLogger("snooze.core.scheduler")  # the scheduler's logger: users filter one name

AUDIT_MIN_GROUPS = 50
"""Audit groups (and drawn groups) needed before the audit may warn: at 50 groups the standard error of
a signal rate near 0.3 is about 0.065, small beside the gap the warning looks for."""
AUDIT_WARN_RATIO = 0.5
"""Warn when skipped encounters carry signal at least this share as often as drawn ones: skipping then
gives up half a drawn encounter's worth of signal or more for every encounter it saves."""
PRIOR_GROUPS = 3
"""Pseudo-audit-groups with signal at the drawn rate added to the audit's when ``snooze/saved/*`` estimates how
often skipped encounters carry signal against drawn ones: before the audit has seen a few groups, the estimate
leans to no saving (chosen on development runs, ``research/saved_gap.py``: 10 leaned to it for most of a run)."""
EXHAUSTED_WINDOW = 10
"""Steps in a row at which ``max_gen_rounds`` must bind (the batch not full after the last round)."""
EXHAUSTED_USED = 0.05
"""Used share of generation (groups trained / groups generated) over the window below which the pool
counts as used up. A step that stops at the round limit uses at most ``batch_size / (max_gen_rounds x
gen_batch_size)`` of it (1/8 at the defaults); 0.05 means less than 40% of each batch was filled."""

_BOUND_WARNINGS = {
    "exhausted": "the pool is used up: max_gen_rounds bound at each of the last %d steps, which trained on %d of the "
    "%d groups they generated (%.1f%%), most of the rest too easy; add data, stop, or lower max_gen_rounds",
    "unsolved": "the pool is beyond the model for now: max_gen_rounds bound at each of the last %d steps, which "
    "trained on %d of the %d groups they generated (%.1f%%), as many or more of the rest too hard as too easy (as at "
    "a cold start: the run is about to learn, not done); keep going, make the data easier, or raise max_gen_rounds "
    "or gen_batch_size",
}


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
    audit groups x its drawn rate), both over the run so far, with :data:`PRIOR_GROUPS` pseudo-groups at 1 (no
    saving claimed before the audit measured it; with the audit off, none is). A ratio and not the audited
    rate itself, because the signal rate falls as the model learns: a rate pooled over the run would carry
    the early, higher rates into late steps (research/saved_gap.py measured that bias on development runs).
    ``step``/``totals``: the counts of :class:`Diagnosis` (``totals`` with the step added)."""
    skipped = max(step["skips"] - step["audit_groups"], 0)
    met = step["drawn_groups"] + step["audit_groups"] + skipped
    if not met:
        return 0.0
    drawn = _rate(step["drawn_signal"], step["drawn_groups"])
    prior = PRIOR_GROUPS * drawn
    rho = (totals["audit_signal"] + prior) / (totals["audit_drawn"] + prior) if totals["audit_drawn"] + prior else 1.0
    signal = step["drawn_signal"] + step["audit_signal"] + skipped * rho * drawn
    return shape.gen * expected_rounds(shape.batch, shape.gen, signal / met, shape.rounds)


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
        # the skipped encounters, audited ones among them (what the audit samples): as Diagnosis.add_skips
        step["skips"] = float(line["snooze/skipped"]) + float(line.get("filter/skipped") or 0)
        totals["audit_signal"] += step["audit_signal"]
        totals["audit_drawn"] += _audit_drawn(step)
        out += dapo_step_groups(step, totals, shape)
    return out


def _not_count(value: Any) -> bool:
    """Whether a logged count or rate is unusable: not a finite real number >= 0 (a bool is not one, nor an
    integer too large for a float, ``10**400``: :func:`~snooze._kit.checks.finite_float`)."""
    if not isinstance(value, (int, float, np.integer, np.floating)):
        return True
    number = finite_float(value)
    return number is None or number < 0


def _audit_drawn(step: Mapping[str, float]) -> float:
    """The signal groups the step's audit groups would have given at its drawn rate (``rho``'s denominator)."""
    return step["audit_groups"] * _rate(step["drawn_signal"], step["drawn_groups"])


_SALT = np.uint64(0x5A0D17A0D17C0FFE)  # keeps the audit's hash apart from the streams' permutations
_BUDGET_KEY = 2**40 + 0xB0D6E7  # the rounds' budgets: a "dataset key" no dataset has (crc32s of names: < 2**32)
_COUNTS = ("audit_groups", "audit_signal", "drawn_groups", "drawn_signal", "skips")
_SUMS = ("audit_pass", "drawn_pass", "dapo_groups", "audit_drawn")


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser on ``uint64`` (arithmetic mod 2**64): every input bit reaches every output bit."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def audit_budget(share: float, n: int, seed: int, step: int, round_: int) -> int:
    """Audits a round of ``n`` candidates may take: ``share x n`` rounded up or down at random (a hash of
    ``(seed, step, round)``: stateless), so over a run the audit costs at most ``share`` of generation."""
    if not share:
        return 0
    exact = share * n
    u = audit_uniform(seed, _BUDGET_KEY, step, np.array([round_]))[0]
    return int(np.floor(exact)) + int(u < exact - np.floor(exact))


def audit_uniform(seed: int, key: int, epoch: int, rows: np.ndarray) -> np.ndarray:
    """``[M]`` uniforms in [0, 1), one per encounter of rows ``rows`` of the dataset with stream key ``key``
    (:func:`~snooze.core._stream.dataset_key`) in ``epoch`` of a run seeded ``seed``. An encounter is
    audited when its uniform is below ``audit``: a pure function of its arguments."""
    base = np.array([int(seed) % 2**64], dtype=np.uint64) ^ _SALT
    base = _mix(_mix(base) ^ np.uint64(key % 2**64))
    base = _mix(base ^ np.uint64(int(epoch) % 2**64))
    h = _mix(base ^ np.asarray(rows).astype(np.uint64))
    return (h >> np.uint64(11)).astype(np.float64) * 2.0**-53


class Diagnosis:
    """The audit's counts (per step and run totals), the exhaustion window and which warnings were given.
    Part of the step metrics' state (``metrics.diagnosis``); a state without it starts at zero."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = {k: 0 for k in _COUNTS} | {k: 0.0 for k in _SUMS}
        # the last EXHAUSTED_WINDOW steps: [bound (0/1), generated, trained, too easy, too hard]
        self.window: list[list[int]] = []
        self.warned: dict[str, bool] = {"audit": False, "exhausted": False, "unsolved": False}
        self.start_step()

    def start_step(self) -> None:
        self.step: dict[str, float] = {k: 0 for k in _COUNTS} | {k: 0.0 for k in _SUMS}

    def snapshot(self) -> tuple[Any, ...]:
        return dict(self.totals), dict(self.step), [list(w) for w in self.window], dict(self.warned)

    def restore(self, snap: tuple[Any, ...]) -> None:
        self.totals, self.step, self.window, self.warned = snap

    def add_skips(self, n: int) -> None:
        """Encounters the policy skipped (audited ones among them): the population the audit samples."""
        self.step["skips"] += int(n)

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
        self, out: dict[str, Any], bound: bool, counts: tuple[int, int, int, int], audit_share: float, shape: Shape
    ) -> None:
        """Add the finished step's ``snooze/audit/*``, ``snooze/drawn/*``, ``snooze/saved/*``, ``gen/exhausted``,
        ``gen/unsolved`` and their totals to ``out``; advance the totals and the window (``counts``: the step's
        generated, trained, too-easy and too-hard groups; ``shape``: the step's sizes); warn (once per run) when
        the numbers say so."""
        s, t = self.step, self.totals
        s["audit_drawn"] = _audit_drawn(s)
        for k in (*_COUNTS, *_SUMS):
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
        self._warn_audit(audit_share)
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

    def _warn_audit(self, audit_share: float) -> None:
        t = self.totals
        if self.warned["audit"] or t["audit_groups"] < AUDIT_MIN_GROUPS or t["drawn_groups"] < AUDIT_MIN_GROUPS:
            return
        audited, drawn = _rate(t["audit_signal"], t["audit_groups"]), _rate(t["drawn_signal"], t["drawn_groups"])
        if drawn > 0 and audited >= AUDIT_WARN_RATIO * drawn:
            self.warned["audit"] = True
            given_up = max(int(t["skips"] - t["audit_groups"]), 0) * audited
            found = t["drawn_signal"] + t["audit_signal"]
            log.warning(
                "skipped prompts still carry signal: %d audited skipped encounters (audit=%g) gave a signal group "
                "%.0f%% of the time, drawn ones %.0f%% (%d groups); skipping has given up about %.0f signal groups "
                "so far, against %.0f the run found. The recommended setting shows this too (docs/sizing.md): judge "
                "it by late accuracy, and if it lags a DAPO run's, lower SnoozeOptions.factor (or "
                "PredictiveOptions.margin) or use policy='dynamic_sampling' to skip nothing",
                t["audit_groups"],
                audit_share,
                100 * audited,
                100 * drawn,
                t["drawn_groups"],
                given_up,
                found,
            )

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
            totals["audit_drawn"] = _audit_drawn(totals)
        self.totals, self.step, self.window = totals, step, window
        self.warned = {k: bool(warned.get(k, False)) for k in self.warned}


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
