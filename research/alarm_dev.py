"""Issue 49's alarm, designed offline: candidate statistics read from a skipping run's own logs as it goes, measured
on labelled development runs (``research/alarm_runs.py``: development regimes, seeds 100 and up).

    .venv/bin/python research/alarm_dev.py --runs /work/runs/alarm
    .venv/bin/python research/alarm_dev.py --runs /work/runs/alarm --cells     # the labelled cells only
    .venv/bin/python research/alarm_dev.py --synthetic                        # the pass-rate-0.8 case only

**Labels** are by arm and regime, never by run (one seed's gap swings by 2 points or more): a cell is *healthy*
when the arm's mean late gap to DAPO over the seeds paired with DAPO's is -0.5 points or better, *harmful* when it is
-1.5 or worse; cells between are left out. Every run of a healthy cell counts toward the false-alarm rate, every
run of a harmful cell toward detection.

**Evidence** a running scheduler has (no DAPO run to compare with), step by step:

- the audit (``snooze/audit/*`` against ``snooze/drawn/*``): how often a skipped encounter carries signal against
  a drawn one at the same steps, ``rho``;
- *returns*, from the reward log: a group of a prompt whose previous group was all-correct (the moment a skipping
  policy decides to skip). Under snoozing every such prompt is skipped and comes back; its group on return (or on
  audit) says whether the mastery held. A *relapse* is a return that is not all-correct;
- the skipped share of encounters and the signal given up against the signal found.

Each candidate turns the evidence up to step ``t`` into a score; the alarm fires at the first step whose score
reaches the threshold. The table gives, per candidate and threshold, the false-alarm rate on healthy runs, the
detection rate on harmful runs, and the median detection step as a share of the run; and the step at which it
fires in the issue's synthetic case (every prompt at pass rate 0.8, ``snooze.RECOMMENDED``, the default audit share,
150 steps).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

DAPO = "dynamic_sampling"
HEALTHY, HARMFUL = -0.5, -1.5
"""Cell labels by the arm's mean late gap to DAPO in the regime, in points (issue 49)."""

_STEP_KEYS = {
    "A": "snooze/audit/groups",
    "a_rate": "snooze/audit/signal_rate",
    "a_pass": "snooze/audit/pass_rate",
    "D": "snooze/drawn/groups",
    "d_rate": "snooze/drawn/signal_rate",
    "d_pass": "snooze/drawn/pass_rate",
    "skipped": "snooze/skipped",
    "fskipped": "filter/skipped",
    "regressed": "snooze/regressed",
    "new": "snooze/new",
    "gen": "gen/groups",
    "easy": "groups/too_easy",
}


@dataclass
class Run:
    """One finished run's per-step evidence (arrays over its steps) and its late accuracy."""

    regime: str
    arm: str
    seed: int
    late: float
    steps: int
    s: dict[str, np.ndarray] = field(default_factory=dict)
    """Per-step counts: ``A``/``As`` audit groups and their signal groups, ``D``/``Ds`` drawn ones, ``S`` skipped
    encounters (audited ones among them), ``ret``/``rel``/``ret_sig`` returns, relapses and returns with signal."""


def _late(metrics: Sequence[Mapping[str, Any]]) -> float:
    evals = [x["eval/sampled_accuracy"] for x in metrics if x.get("eval/sampled_accuracy") is not None]
    if len(evals) < 4:
        return math.nan
    return float(np.mean(evals[-3:]))  # snooze.logs.LATE_EVALS evaluations after the base's


def _returns(rewards: Path, steps: int) -> dict[str, np.ndarray]:
    """Per step: groups of prompts whose previous group was all-correct (``ret``), those not all-correct again
    (``rel``), those with signal (``ret_sig``), the steps since that previous group summed (``ret_gap``), and the
    groups of prompts whose previous group had signal (``rep``) with those all-correct (``rep_ac``)."""
    out = {k: np.zeros(steps) for k in _RETURN_KEYS}
    last: dict[tuple[str, Any], tuple[int, bool, bool]] = {}
    with rewards.open() as f:
        for raw in f:
            line = json.loads(raw)
            if "format" in line or "step" not in line:
                continue
            t, key, r = int(line["step"]), (line["dataset"], line["id"]), line["rewards"]
            if t >= steps:
                continue
            _add_group(out, last, t, key, r)
    return out


_RETURN_KEYS = ("ret", "rel", "ret_sig", "ret_fail", "ret_gap", "ret_gap2", "ret_gap_rel", "rep", "rep_ac")


def _add_group(
    out: dict[str, np.ndarray], last: dict[Any, tuple[int, bool, bool]], t: int, key: Any, r: Sequence[float]
) -> None:
    """Count one group (rewards in [0, 1]) of prompt ``key`` at step ``t`` into the return counts."""
    lo, hi = min(r), max(r)
    ac, signal = lo >= 1.0, hi > lo
    prev = last.get(key)
    if prev is not None:
        if prev[1]:
            out["ret"][t] += 1
            out["rel"][t] += not ac
            out["ret_sig"][t] += signal
            out["ret_fail"][t] += 1.0 - float(np.mean(r))
            gap = t - prev[0]
            out["ret_gap"][t] += gap
            out["ret_gap2"][t] += gap * gap
            out["ret_gap_rel"][t] += gap * (not ac)
        elif prev[2]:
            out["rep"][t] += 1
            out["rep_ac"][t] += ac
    last[key] = (t, ac, signal)


def read_run(run_dir: Path, regime: str, arm: str, seed: int) -> Run | None:
    """A finished run's evidence, ``None`` when it has not finished (fewer metrics lines than its steps)."""
    config = json.loads((run_dir / "config.json").read_text())
    steps = int(config["train"]["steps"])
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    lines = [x for x in lines if "step" in x and "gen/groups" in x]
    if len(lines) < steps:
        return None
    lines = lines[:steps]
    s = {k: np.array([float(x.get(key) or 0.0) for x in lines]) for k, key in _STEP_KEYS.items()}
    s["As"], s["Ds"] = s["A"] * s["a_rate"], s["D"] * s["d_rate"]
    s["Ap"], s["Dp"] = s["A"] * s["a_pass"], s["D"] * s["d_pass"]
    s["S"] = s["skipped"] + s["fskipped"]
    s.update(_returns(run_dir / "rewards.jsonl", steps))
    return Run(regime, arm, seed, _late(lines), steps, s)


def read_runs(root: Path, seeds: tuple[int, int] | None = None) -> list[Run]:
    """Every finished run under ``root/<regime>/<arm>/seed<k>`` (``seeds``: only ``k`` in that inclusive range)."""
    runs = []
    for run_dir in sorted(root.glob("*/*/seed*")):
        if not (run_dir / "metrics.jsonl").exists() or not (run_dir / "config.json").exists():
            continue
        regime, arm, seed = run_dir.parent.parent.name, run_dir.parent.name, int(run_dir.name[4:])
        if seeds is not None and not seeds[0] <= seed <= seeds[1]:
            continue
        run = read_run(run_dir, regime, arm, seed)
        if run is not None:
            runs.append(run)
    return runs


def cells(runs: Sequence[Run]) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (regime, arm), skipping arms only: the late gaps to DAPO by paired seed (points), their mean and the
    label (``healthy``, ``harmful`` or ``between``)."""
    dapo = {(r.regime, r.seed): r.late for r in runs if r.arm == DAPO}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in runs:
        if r.arm == DAPO or (r.regime, r.seed) not in dapo:
            continue
        cell = out.setdefault((r.regime, r.arm), {"gaps": {}, "runs": []})
        cell["gaps"][r.seed] = 100.0 * (r.late - dapo[(r.regime, r.seed)])
        cell["runs"].append(r)
    for cell in out.values():
        cell["gap"] = float(np.mean(list(cell["gaps"].values())))
        gap = round(cell["gap"], 9)  # a mean of differences of floats: -0.5 must not read -0.5000000000000004
        cell["label"] = "healthy" if gap >= HEALTHY else "harmful" if gap <= HARMFUL else "between"
    return out


def cells_markdown(table: Mapping[tuple[str, str], Mapping[str, Any]], runs: Sequence[Run]) -> str:
    """The cells as a table: a row per regime (DAPO's mean late accuracy and its seeds), a column per arm: the mean
    late gap in points over the paired seeds, their number, and the label (healthy, harmful; blank: between)."""
    arms = sorted({arm for _, arm in table}, key=lambda a: (a != RECOMMENDED_ARM, a))
    lines = ["| regime | DAPO late avg@k (seeds) | " + " | ".join(arms) + " |", "|---|---|" + "---|" * len(arms)]
    for regime in sorted({reg for reg, _ in table}):
        late = [r.late for r in runs if r.arm == DAPO and r.regime == regime]
        row = [f"{np.mean(late):.3f} ({len(late)})"]
        for arm in arms:
            c = table.get((regime, arm))
            tag = {"healthy": " healthy", "harmful": " **harmful**"}.get(c["label"], "") if c else ""
            row.append(f"{c['gap']:+.1f} ({len(c['gaps'])}){tag}" if c else "-")
        lines.append(f"| {regime} | " + " | ".join(row) + " |")
    return "\n".join(lines)


# -- candidate statistics: each maps a run's per-step evidence to a score per step (NaN: not enough evidence yet) --


def _cum(x: np.ndarray) -> np.ndarray:
    return np.cumsum(x)


def _window(x: np.ndarray, w: int) -> np.ndarray:
    c = np.cumsum(x)
    return c - np.concatenate([np.zeros(w), c[:-w]]) if len(c) > w else c


def _drawn_rate(s: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.where(s["D"] > 0, s["Ds"] / np.maximum(s["D"], 1), 0.0)


def current_rule(s: Mapping[str, np.ndarray]) -> np.ndarray:
    """Today's warning: the run's audited signal rate over its drawn one, once 50 audit and 50 drawn groups are in
    (fires at 0.5)."""
    a, asig, d, dsig = _cum(s["A"]), _cum(s["As"]), _cum(s["D"]), _cum(s["Ds"])
    ratio = np.where((a >= 50) & (d >= 50) & (dsig > 0), (asig / np.maximum(a, 1)) / (dsig / np.maximum(d, 1)), np.nan)
    return ratio


def rho_z(r0: float, window: int | None = None) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """One-sided z of "skipped encounters carry signal more than ``r0`` x as often as drawn ones at the same steps":
    the audit's signal groups against ``r0 x`` each audit group's step's drawn rate (binomial variance), over the
    run so far or the last ``window`` steps."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        p = np.clip(r0 * _drawn_rate(s), 0.0, 1.0)
        agg = _cum if window is None else (lambda x: _window(x, window))
        obs, mean, var = agg(s["As"]), agg(s["A"] * p), agg(s["A"] * p * (1 - p))
        return np.where(var > 0, (obs - mean) / np.sqrt(np.maximum(var, 1e-12)), np.nan)

    return score


def relapse_z(r0: float, window: int | None = None) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """The same test on *returns* (every group of a prompt whose previous group was all-correct: the returns of
    skipped prompts and the audited ones): their signal groups against ``r0 x`` the step's drawn rate."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        p = np.clip(r0 * _drawn_rate(s), 0.0, 1.0)
        agg = _cum if window is None else (lambda x: _window(x, window))
        obs, mean, var = agg(s["ret_sig"]), agg(s["ret"] * p), agg(s["ret"] * p * (1 - p))
        return np.where(var > 0, (obs - mean) / np.sqrt(np.maximum(var, 1e-12)), np.nan)

    return score


def return_rho(min_returns: int = 30, window: int | None = None) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """How often a return carries signal against a drawn group at the same steps: the returns' signal groups over
    what drawn groups would have given (each return at its step's drawn rate), over the run or the last
    ``window`` steps, once ``min_returns`` returns are in."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        agg = _cum if window is None else (lambda x: _window(x, window))
        n, obs, exp = agg(s["ret"]), agg(s["ret_sig"]), agg(s["ret"] * _drawn_rate(s))
        return np.where((n >= min_returns) & (exp > 0), obs / np.maximum(exp, 1e-12), np.nan)

    return score


def return_excess(prior: float = 10.0, min_returns: int = 30) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """The returns' ratio (:func:`return_rho`) minus the audit's, over the run so far: the audit looks at a skipped
    prompt when it would have been drawn, the return after it was kept away, so the difference is what keeping it
    away cost in mastery. The audit's ratio is shrunk by ``prior`` pseudo-groups toward the returns' (no excess
    claimed before the audit has measured it)."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        q = _drawn_rate(s)
        n, obs, exp = _cum(s["ret"]), _cum(s["ret_sig"]), _cum(s["ret"] * q)
        rho_ret = obs / np.maximum(exp, 1e-12)
        qbar = _cum(s["Ds"]) / np.maximum(_cum(s["D"]), 1)
        rho_audit = (_cum(s["As"]) + prior * qbar * rho_ret) / (_cum(s["A"] * q) + prior * qbar + 1e-12)
        return np.where((n >= min_returns) & (exp > 0), rho_ret - rho_audit, np.nan)

    return score


def relapse_rate(min_returns: int = 30, window: int | None = None) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """The share of returns that are not all-correct (mastery that did not hold)."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        agg = _cum if window is None else (lambda x: _window(x, window))
        n, k = agg(s["ret"]), agg(s["rel"])
        return np.where(n >= min_returns, k / np.maximum(n, 1), np.nan)

    return score


def given_up_share(prior: float = 3.0) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """Signal groups skipping gave up over those the run found, so far: skipped encounters (not rolled out) x
    ``rho`` x the step's drawn rate, ``rho`` the audit's ratio so far with ``prior`` pseudo-groups at 1 (each at
    the step's drawn rate, as ``snooze/saved/*``)."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        q = _drawn_rate(s)
        exp_a = _cum(s["A"] * q)
        rho = (_cum(s["As"]) + prior * q) / (exp_a + prior * q + 1e-12)  # the prior at the step's rate, as saved/*
        lost = _cum(np.maximum(s["S"] - s["A"], 0) * q) * rho
        found = _cum(s["Ds"] + s["As"])
        return np.where(found > 0, lost / np.maximum(found, 1e-12), np.nan)

    return score


def given_up_lower(z: float, min_audits: int) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """:func:`given_up_share` with the audit's ratio at its one-sided lower bound (its signal groups ``k`` less ``z``
    standard deviations, ``k - z sqrt(k)``, Poisson) and no prior, from ``min_audits`` audit groups on: the shipped
    alarm's half (``snooze.core._diagnosis.guard_scores``)."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        q = _drawn_rate(s)
        exp_a, k = _cum(s["A"] * q), _cum(s["As"])
        rho = np.maximum(k - z * np.sqrt(k), 0.0) / np.maximum(exp_a, 1e-12)
        lost = _cum(np.maximum(s["S"] - s["A"], 0) * q) * rho
        found = _cum(s["Ds"] + s["As"])
        out = np.where((found > 0) & (exp_a > 0), lost / np.maximum(found, 1e-12), np.nan)
        out[_cum(s["A"]) < min_audits] = np.nan
        return out

    return score


def shipped_alarm() -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """The alarm as the scheduler ships it (its constants read from ``snooze.core._diagnosis``): the given-up share at
    its lower bound reaching ``GIVEN_UP_SHARE``, or the relapse rate reaching ``RELAPSE_RATE`` from ``MIN_RETURNS``
    returns on; a score that reaches 1 at the step it fires (so judged at threshold 1)."""
    from snooze.core import _diagnosis as d

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        a = given_up_lower(d.LOWER_Z, d.MIN_AUDITS)(s) / d.GIVEN_UP_SHARE
        b = relapse_rate(d.MIN_RETURNS)(s) / d.RELAPSE_RATE
        return np.fmax(a, b)

    return score


def skipped_share(s: Mapping[str, np.ndarray]) -> np.ndarray:
    """Encounters skipped (not rolled out) over encounters met, so far."""
    skip = _cum(np.maximum(s["S"] - s["A"], 0))
    return skip / np.maximum(skip + _cum(s["D"] + s["A"]), 1)


def fail_ratio(
    kind: str, min_groups: int, window: int | None = None
) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """How often a skipped prompt's rollouts fail against a drawn one's: the failure share (1 - pass rate) of the
    audit groups (``kind="audit"``) or of the returns (``"return"``) over that of the drawn groups, at the same
    steps (each step's drawn failure share weighted by the step's audit groups or returns)."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        agg = _cum if window is None else (lambda x: _window(x, window))
        d_fail = np.where(s["D"] > 0, 1.0 - s["Dp"] / np.maximum(s["D"], 1), 0.0)
        n, fail = (s["A"], s["A"] - s["Ap"]) if kind == "audit" else (s["ret"], s["ret_fail"])
        num, den, cnt = agg(fail), agg(n * d_fail), agg(n)
        return np.where((cnt >= min_groups) & (den > 0), num / np.maximum(den, 1e-12), np.nan)

    return score


def forgetting_z(min_returns: int = 50) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """Whether mastery decays with time away: the z of the slope of "relapse" (a return not all-correct) on the steps
    since the prompt's all-correct group, a linear fit over the returns so far. Without forgetting a prompt's chance
    to relapse does not depend on how long it was away (the stream puts its next encounter anywhere in the next
    pass), so a positive slope is forgetting."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        n, sg, sg2, sy, sgy = (_cum(s[k]) for k in ("ret", "ret_gap", "ret_gap2", "rel", "ret_gap_rel"))
        sxx = sg2 - sg * sg / np.maximum(n, 1)
        b = (sgy - sg * sy / np.maximum(n, 1)) / np.maximum(sxx, 1e-12)
        ybar = sy / np.maximum(n, 1)
        se = np.sqrt(np.maximum(ybar * (1 - ybar), 1e-6) / np.maximum(sxx, 1e-12))
        return np.where((n >= min_returns) & (sxx > 0), b / se, np.nan)

    return score


def forgetting_share(min_returns: int = 50) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """The share of relapses the fitted slope puts on time away: ``slope x mean gap / relapse rate``."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        n, sg, sg2, sy, sgy = (_cum(s[k]) for k in ("ret", "ret_gap", "ret_gap2", "rel", "ret_gap_rel"))
        sxx = sg2 - sg * sg / np.maximum(n, 1)
        b = (sgy - sg * sy / np.maximum(n, 1)) / np.maximum(sxx, 1e-12)
        share = b * (sg / np.maximum(n, 1)) / np.maximum(sy / np.maximum(n, 1), 1e-6)
        return np.where((n >= min_returns) & (sxx > 0), share, np.nan)

    return score


CANDIDATES: dict[str, Callable[[Mapping[str, np.ndarray]], np.ndarray]] = {
    "current (audit/drawn, 50 groups)": current_rule,
    **{f"audit rho>{r0} z": rho_z(r0) for r0 in (0.5, 0.75, 1.0)},
    **{f"return rho>{r0} z": relapse_z(r0) for r0 in (0.5, 0.75, 1.0)},
    **{f"return rho>{r0} z, last 30 steps": relapse_z(r0, 30) for r0 in (0.75, 1.0)},
    "audit fail ratio (10 groups)": fail_ratio("audit", 10),
    "return fail ratio (30)": fail_ratio("return", 30),
    "return fail ratio (30), last 30 steps": fail_ratio("return", 30, 30),
    "return rho": return_rho(),
    "return rho, last 30 steps": return_rho(window=30),
    "return rho - audit rho": return_excess(),
    "forgetting slope z": forgetting_z(),
    "forgetting share": forgetting_share(),
    "relapse rate": relapse_rate(),
    "relapse rate, last 30 steps": relapse_rate(window=30),
    "given up / found": given_up_share(),
    "given up / found, 90% lower bound": given_up_lower(1.28, 20),
    "skipped share": skipped_share,
}


def fire_step(score: np.ndarray, threshold: float, start: int = 0) -> int | None:
    """The first step (from ``start``) whose score reaches ``threshold``; ``None`` when none does."""
    hit = np.nonzero(np.nan_to_num(score[start:], nan=-np.inf) >= threshold)[0]
    return int(hit[0]) + start if hit.size else None


def evaluate(scores: Mapping[str, list[tuple[Run, np.ndarray]]], threshold: float) -> dict[str, Any]:
    """False alarms on healthy runs, detections of harmful ones and the median detection step (share of the run)."""
    fired = {k: [(r, fire_step(x, threshold)) for r, x in v] for k, v in scores.items()}
    fa = sum(t is not None for _, t in fired["healthy"])
    det = [(r, t) for r, t in fired["harmful"] if t is not None]
    shares = [(t + 1) / r.steps for r, t in det]
    return {
        "false_alarms": fa,
        "healthy": len(fired["healthy"]),
        "detected": len(det),
        "harmful": len(fired["harmful"]),
        "median_share": float(np.median(shares)) if shares else math.nan,
    }


def best_threshold(scores: Mapping[str, list[tuple[Run, np.ndarray]]], max_fa: float = 0.05) -> float:
    if not scores["healthy"]:
        return -np.inf
    """The lowest threshold (of the scores seen) with at most ``max_fa`` of the healthy runs alarmed: each healthy
    run's peak score, the alarm just above the ``floor(max_fa x n)``-th highest."""
    peaks = sorted((np.nanmax(x) if np.isfinite(x).any() else -np.inf for _, x in scores["healthy"]), reverse=True)
    allowed = int(math.floor(max_fa * len(peaks)))
    return float(np.nextafter(peaks[allowed], np.inf)) if allowed < len(peaks) else -np.inf


# -- the synthetic case -----------------------------------------------------------------------------------

SYNTHETIC_POOLS = (300, 1000)
SYNTHETIC_SEEDS = 5
"""The synthetic case is run on pools of these sizes, each with these many seeds; a candidate must fire in all."""


def _worst(steps: Sequence[int | None]) -> int | None:
    """The last of the steps at which an alarm fired in each case, ``None`` when it never fired in one of them."""
    return None if any(t is None for t in steps) else max(steps)  # type: ignore[type-var]


def synthetic_evidence(pass_rate: float = 0.8, pool: int = 1000, steps: int = 150, seed: int = 0) -> dict[str, Any]:
    """The issue's case: every prompt at ``pass_rate``, ``snooze.RECOMMENDED``, the default audit share, ``steps``
    steps; the per-step evidence as :func:`read_run` reads it from logs."""
    import snooze

    cfg = snooze.SchedulerConfig(**snooze.RECOMMENDED, guard=False)  # the evidence of a run nothing acted on
    sched = snooze.Scheduler({"d": [{"id": i} for i in range(pool)]}, cfg, seed=seed)
    rng = np.random.default_rng(seed + 1)
    lines, groups = [], []
    step = [0]

    def roll(cands: Any) -> np.ndarray:
        r = (rng.random((len(cands), cfg.group_size)) < pass_rate).astype(float)
        groups.extend((step[0], c.dataset, c.id, list(row)) for c, row in zip(cands, r))
        return r

    for t in range(steps):
        step[0] = t
        lines.append(dict(sched.step(roll).metrics))
    s = {k: np.array([float(x.get(key) or 0.0) for x in lines]) for k, key in _STEP_KEYS.items()}
    s["As"], s["Ds"] = s["A"] * s["a_rate"], s["D"] * s["d_rate"]
    s["Ap"], s["Dp"] = s["A"] * s["a_pass"], s["D"] * s["d_pass"]
    s["S"] = s["skipped"] + s["fskipped"]
    out = {k: np.zeros(steps) for k in _RETURN_KEYS}
    last: dict[Any, tuple[int, bool, bool]] = {}
    for t, ds, pid, r in groups:
        _add_group(out, last, t, (ds, pid), r)
    s.update(out)
    return s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("/work/runs/alarm"))
    parser.add_argument("--cells", action="store_true", help="print the labelled cells only")
    parser.add_argument("--synthetic", action="store_true", help="the pass-rate-0.8 case only")
    parser.add_argument("--seeds", default=None, help="FIRST-LAST: only these seeds (inclusive); default: every one")
    parser.add_argument("--max-fa", type=float, default=0.05)
    parser.add_argument("--guard", default=GUARD_CANDIDATE, help="the candidate the guard's estimate uses")
    args = parser.parse_args()
    if args.guard not in CANDIDATES and args.guard not in COMBINATIONS:
        parser.error(f"--guard {args.guard!r}: not a candidate; choose from {[*CANDIDATES, *COMBINATIONS]}")
    synth = [synthetic_evidence(pool=pool, seed=seed) for pool in SYNTHETIC_POOLS for seed in range(SYNTHETIC_SEEDS)]
    if args.synthetic:
        for name, fn in CANDIDATES.items():
            peaks = [np.nanmax(fn(x)) if np.isfinite(fn(x)).any() else math.nan for x in synth]
            print(f"{name}: peak score {min(peaks):.2f} to {max(peaks):.2f}")
        return
    try:
        seeds = tuple(int(x) for x in args.seeds.split("-")) if args.seeds else None
    except ValueError:
        parser.error(f"--seeds {args.seeds!r}: give FIRST-LAST, e.g. 100-102")
    if seeds is not None and (len(seeds) != 2 or seeds[0] > seeds[1]):
        parser.error(f"--seeds {args.seeds!r}: give FIRST-LAST with FIRST <= LAST, e.g. 100-102")
    runs = read_runs(args.runs, seeds)  # type: ignore[arg-type]
    if not runs:
        parser.error(f"--runs {args.runs}: no finished run there (research/alarm_runs.py --out {args.runs} runs them)")
    table = cells(runs)
    print(cells_markdown(table, runs))
    if args.cells:
        return
    by_label: dict[str, list[Run]] = {"healthy": [], "harmful": []}
    for c in table.values():
        if c["label"] in by_label:
            by_label[c["label"]].extend(c["runs"])
    print(f"\nhealthy runs {len(by_label['healthy'])}, harmful runs {len(by_label['harmful'])}")
    rec = {k: sum(r.arm == RECOMMENDED_ARM for r in v) for k, v in by_label.items()}
    print(f"of them the recommended setting's: healthy {rec['healthy']}, harmful {rec['harmful']}\n")
    print_candidates(by_label, synth, args.max_fa)
    factor1 = ("snooze-f1-carry", "snooze-f1")
    n = {k: sum(r.arm in factor1 for r in v) for k, v in by_label.items()}
    print(f"\nWithin the factor-1 arms ({n['healthy']} healthy runs, {n['harmful']} harmful), end-of-run AUC:\n")
    print("| candidate | AUC |\n|---|---|")
    for name, a in end_of_run_auc(by_label, factor1).items():
        print(f"| {name} | {a:.2f} |")
    print_guard(args.guard, by_label, runs, args.max_fa)


def print_candidates(
    by_label: Mapping[str, list[Run]], synth: Sequence[Mapping[str, np.ndarray]], max_fa: float
) -> None:
    """The table of candidates: each alone (:data:`CANDIDATES`), then in pairs (:data:`COMBINATIONS`)."""
    print(
        "| candidate | threshold (fitted: at most 1 in 20 healthy runs) | false alarms | detected | median detection "
        "step (share of run) | recommended's harmful runs detected | leave one regime out: false alarms, detected | "
        f"synthetic 0.8: fires by step (worst of {len(synth)}) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, fn in CANDIDATES.items():
        row = candidate_row(fn, by_label, synth, max_fa, {"current (audit/drawn, 50 groups)": 0.5}.get(name))
        for how, m in row.items():
            syn = "never" if m["synthetic"] is None else str(m["synthetic"])
            cv = m["cv"]
            print(
                f"| {name} | {m['threshold']:.3g} ({how}) | {m['false_alarms']}/{m['healthy']} | "
                f"{m['detected']}/{m['harmful']} | {m['median_share']:.2f} | {m['rec_detected']}/{m['rec_harmful']} | "
                f"{cv['false_alarms']}/{cv['healthy']}, {cv['detected']}/{cv['harmful']} | {syn} |"
            )
    for name, pair in COMBINATIONS.items():
        m = either_row(pair, by_label, synth, max_fa)
        syn = "never" if m["synthetic"] is None else str(m["synthetic"])
        cv = m["cv"]
        print(
            f"| {name} | {m['threshold'][0]:.3g}, {m['threshold'][1]:.3g} (fitted) | "
            f"{m['false_alarms']}/{m['healthy']} | {m['detected']}/{m['harmful']} | {m['median_share']:.2f} | "
            f"{m['rec_detected']}/{m['rec_harmful']} | "
            f"{cv['false_alarms']}/{cv['healthy']}, {cv['detected']}/{cv['harmful']} | {syn} |"
        )
    m = candidate_row(shipped_alarm(), by_label, synth, max_fa, 1.0)["as today"]
    syn = "never" if m["synthetic"] is None else str(m["synthetic"])
    print(
        f"| **the shipped alarm** (given up, lower bound, >= 0.45, or relapse rate >= 0.40) | fixed | "
        f"{m['false_alarms']}/{m['healthy']} | {m['detected']}/{m['harmful']} | {m['median_share']:.2f} | "
        f"{m['rec_detected']}/{m['rec_harmful']} | (fixed: as in-sample) | {syn} |"
    )


def auc(harmful: Sequence[float], healthy: Sequence[float]) -> float:
    """The chance a harmful run's score is above a healthy run's (ties count half): the area under the ROC curve."""
    pairs = [(h > g) + 0.5 * (h == g) for h in harmful for g in healthy]
    return float(np.mean(pairs)) if pairs else math.nan


def end_of_run_auc(by_label: Mapping[str, list[Run]], arms: Sequence[str]) -> dict[str, float]:
    """Per candidate, how well its last score (its last finite one) separates the harmful runs of ``arms`` from
    their healthy ones, as an AUC; runs where it never had a score are left out."""
    out = {}
    for name, fn in CANDIDATES.items():
        last = {}
        for label, runs in by_label.items():
            xs = [fn(r.s) for r in runs if r.arm in arms]
            last[label] = [float(x[np.isfinite(x)][-1]) for x in xs if np.isfinite(x).any()]
        out[name] = auc(last["harmful"], last["healthy"])
    return out


def print_guard(guard: str, by_label: Mapping[str, list[Run]], runs: Sequence[Run], max_fa: float) -> None:
    """The saving a guard falling back to DAPO when ``guard`` fires would keep, per arm (:func:`guarded_saving`)."""
    if guard in COMBINATIONS:
        fn_a, fn_b = (CANDIDATES[n] for n in COMBINATIONS[guard])
        t_a, thr = fit_either(fn_a, fn_b, by_label, max_fa)
        fn, shown = either(fn_a, t_a, fn_b), f"{t_a:.3g}, {thr:.3g}"
    else:
        fn = CANDIDATES[guard]
        thr = best_threshold({k: [(r, fn(r.s)) for r in v] for k, v in by_label.items()}, max_fa)
        shown = f"{thr:.3g}"
    print(f"\nA guard falling back to DAPO when {guard!r} fires ({shown}; every run, labelled or not):\n")
    print("| arm | runs | alarmed | saving unguarded | saving guarded (estimate) |\n|---|---|---|---|---|")
    for arm in sorted({r.arm for r in runs} - {DAPO}):
        g = guarded_saving(fn, thr, runs, arm)
        print(f"| {arm} | {g['runs']} | {g['fired']} | {g['plain']:.2f}x | {g['guarded']:.2f}x |")


RECOMMENDED_ARM = "snooze-f1-carry"
GUARD_CANDIDATE = "given up / found, or relapse rate"


def guarded_saving(
    fn: Callable[[Mapping[str, np.ndarray]], np.ndarray], threshold: float, runs: Sequence[Run], arm: str
) -> dict[str, float]:
    """The saving a guard that falls back to DAPO from the alarm's step would keep, estimated from the logs: the
    arm's generated groups up to the step the alarm fires, then the paired DAPO run's from that step on; as the
    geometric mean over the arm's runs of DAPO's groups over those (and over the arm's own, unguarded), with the
    share of runs alarmed. An estimate of generation only: what the fallback does to accuracy needs the runs."""
    dapo = {(r.regime, r.seed): r for r in runs if r.arm == DAPO}
    guarded, plain, fired = [], [], 0
    for r in runs:
        if r.arm != arm or (r.regime, r.seed) not in dapo:
            continue
        d = dapo[(r.regime, r.seed)]
        t = fire_step(fn(r.s), threshold)
        cost = r.s["gen"].sum() if t is None else r.s["gen"][: t + 1].sum() + d.s["gen"][t + 1 :].sum()
        fired += t is not None
        guarded.append(d.s["gen"].sum() / cost)
        plain.append(d.s["gen"].sum() / r.s["gen"].sum())
    if not plain:
        return {"runs": 0, "fired": 0, "plain": math.nan, "guarded": math.nan}
    geo = lambda x: float(np.exp(np.mean(np.log(x))))  # noqa: E731
    return {"runs": len(plain), "fired": fired, "plain": geo(plain), "guarded": geo(guarded)}


def candidate_row(
    fn: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    by_label: Mapping[str, list[Run]],
    synth: Sequence[Mapping[str, np.ndarray]],
    max_fa: float,
    fixed: float | None = None,
) -> dict[str, dict[str, Any]]:
    """One candidate's rates at its fitted threshold (or at ``fixed``, a threshold chosen before), with
    leave-one-regime-out rates: each regime's runs judged at the threshold fitted on the other regimes' healthy
    runs (at ``fixed``: the same as in-sample)."""
    scores = {k: [(r, fn(r.s)) for r in v] for k, v in by_label.items()}
    how, thr = ("as today", fixed) if fixed is not None else ("fitted", best_threshold(scores, max_fa))
    m = evaluate(scores, thr)
    rec = {k: [(r, x) for r, x in v if r.arm == RECOMMENDED_ARM] for k, v in scores.items()}
    mr = evaluate(rec, thr)
    m.update(
        threshold=thr,
        synthetic=_worst([fire_step(fn(x), thr) for x in synth]),
        rec_detected=mr["detected"],
        rec_harmful=mr["harmful"],
    )
    cv = {"false_alarms": 0, "healthy": 0, "detected": 0, "harmful": 0}
    for regime in sorted({r.regime for v in by_label.values() for r in v}):
        train = {k: [(r, x) for r, x in v if r.regime != regime] for k, v in scores.items()}
        test = {k: [(r, x) for r, x in v if r.regime == regime] for k, v in scores.items()}
        mt = evaluate(test, thr if fixed is not None else best_threshold(train, max_fa))
        for k in cv:
            cv[k] += mt[k]
    m["cv"] = cv
    out = {how: m}
    return out


def either(
    fn_a: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    t_a: float,
    fn_b: Callable[[Mapping[str, np.ndarray]], np.ndarray],
) -> Callable[[Mapping[str, np.ndarray]], np.ndarray]:
    """An alarm that fires when ``fn_a`` reaches ``t_a`` or ``fn_b`` reaches the alarm's threshold: ``fn_b``'s score,
    raised to infinity from the step ``fn_a`` reaches ``t_a`` on."""

    def score(s: Mapping[str, np.ndarray]) -> np.ndarray:
        a, b = fn_a(s), fn_b(s).astype(float).copy()
        t = fire_step(a, t_a)
        if t is not None:
            b[t:] = np.inf
        return b

    return score


def fit_either(
    fn_a: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    fn_b: Callable[[Mapping[str, np.ndarray]], np.ndarray],
    runs: Mapping[str, list[Run]],
    max_fa: float,
) -> tuple[float, float]:
    """``(t_a, t_b)`` of :func:`either` with at most ``max_fa`` of the healthy runs alarmed and the most harmful runs
    detected: ``t_a`` tried just above each healthy run's peak of ``fn_a`` (and never), ``t_b`` fitted for each."""
    peaks = [np.nanmax(x) for x in (fn_a(r.s) for r in runs["healthy"]) if np.isfinite(x).any()]
    best: tuple[int, float, float] = (-1, np.inf, np.inf)
    for t_a in sorted({float(np.nextafter(p, np.inf)) for p in peaks} | {np.inf}):
        fn = either(fn_a, t_a, fn_b)
        scores = {k: [(r, fn(r.s)) for r in v] for k, v in runs.items()}
        t_b = best_threshold(scores, max_fa)
        m = evaluate(scores, t_b)
        if m["false_alarms"] <= math.floor(max_fa * m["healthy"]) and m["detected"] > best[0]:
            best = (m["detected"], t_a, t_b)
    return best[1], best[2]


COMBINATIONS = {
    "given up / found, or audit fail ratio": ("given up / found", "audit fail ratio (10 groups)"),
    "given up / found, or return fail ratio": ("given up / found", "return fail ratio (30)"),
    "given up / found, or relapse rate": ("given up / found", "relapse rate"),
    "given up / found (lower bound), or relapse rate": ("given up / found, 90% lower bound", "relapse rate"),
    "skipped share, or return fail ratio": ("skipped share", "return fail ratio (30)"),
}
"""Two candidates, either of which fires the alarm: a measure of how much skipping gives up, and one of whether
what it skips still carries signal (the synthetic case, where little is skipped but all of it is worth drawing)."""


def either_row(
    names: tuple[str, str], by_label: Mapping[str, list[Run]], synth: Sequence[Mapping[str, np.ndarray]], max_fa: float
) -> dict[str, Any]:
    """:func:`candidate_row`'s numbers for an alarm of two candidates (:func:`fit_either`), refitted per fold for
    the leave-one-regime-out rates."""
    fn_a, fn_b = (CANDIDATES[n] for n in names)
    t_a, t_b = fit_either(fn_a, fn_b, by_label, max_fa)
    fn = either(fn_a, t_a, fn_b)
    scores = {k: [(r, fn(r.s)) for r in v] for k, v in by_label.items()}
    m = evaluate(scores, t_b)
    mr = evaluate({k: [(r, x) for r, x in v if r.arm == RECOMMENDED_ARM] for k, v in scores.items()}, t_b)
    m.update(
        threshold=(t_a, t_b),
        synthetic=_worst([fire_step(fn(x), t_b) for x in synth]),
        rec_detected=mr["detected"],
        rec_harmful=mr["harmful"],
    )
    cv = {"false_alarms": 0, "healthy": 0, "detected": 0, "harmful": 0}
    for regime in sorted({r.regime for v in by_label.values() for r in v}):
        train = {k: [r for r in v if r.regime != regime] for k, v in by_label.items()}
        test = {k: [r for r in v if r.regime == regime] for k, v in by_label.items()}
        fa, fb = fit_either(fn_a, fn_b, train, max_fa)
        f = either(fn_a, fa, fn_b)
        mt = evaluate({k: [(r, f(r.s)) for r in v] for k, v in test.items()}, fb)
        for k in cv:
            cv[k] += mt[k]
    m["cv"] = cv
    return m


if __name__ == "__main__":
    main()
