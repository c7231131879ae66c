"""Is the comparison's regime like the design note's? The criteria of docs/results.md, measured.

The design note is the blog post this project implements: docs/concepts.md, "The design note".

Computed from the DAPO (``dynamic_sampling``) and plain ``grpo`` arms and the base model only, never
from a filtering or snoozing arm: the regime is chosen before any policy's result is looked at, and the
same regime serves every policy. ``snooze compare`` writes the result to ``regime.json``.

1. Every task learns: each task's base accuracy in a band where RL has room, and each task's held-out
   accuracy up by at least ``min_gain`` under DAPO.
2. Learning lasts: DAPO reaches 90% of its final gain no earlier than 40% of the way through the run.
3. A pool visited a few times: DAPO's encounters per prompt at most about 20.
4. Figure 1 holds: DAPO's rounds per step climb well above 1, its used fraction falls.
5. Figure 3 has real strata: the easy stratum's base accuracy at least 0.6, the hard one's at most 0.3.
6. Three paired seeds, the default profile within 15 minutes (wall time of the whole comparison).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from snooze.plots.metrics import aggregate_seeds, series

__all__ = ["Targets", "TARGETS", "regime_checks", "time_to_fraction", "regime_table"]

Records = list[dict[str, Any]]


@dataclass(frozen=True)
class Targets:
    """The numbers each criterion is checked against (fixed by the design note's setting, not by any policy)."""

    band: tuple[float, float] = (0.2, 0.6)
    """Each task's base accuracy must lie in this range (RL has room both ways)."""

    min_gain: float = 0.10
    """Each task's held-out accuracy must rise by at least this under DAPO."""

    late_fraction: float = 0.4
    """DAPO may reach 90% of its final gain no earlier than this share of the run."""

    max_encounters: float = 20.0
    """DAPO's mean encounters per prompt over the run, at most."""

    min_late_rounds: float = 2.0
    """DAPO's generation rounds per step over the last 10% of steps, at least ("well above 1")."""

    easy_base: float = 0.6
    """Figure 3's easy stratum: base accuracy at least this."""

    hard_base: float = 0.3
    """Figure 3's hard stratum: base accuracy at most this."""

    seeds: int = 3
    """Paired seeds of every main arm."""

    minutes: float = 15.0
    """The default profile's wall time on 2 CPU cores, warm-up included."""


TARGETS = Targets()

_EDGE = 0.1  # "early" / "late" = the first / last 10% of steps, as in figure 1's title


def time_to_fraction(steps: np.ndarray, values: np.ndarray, fraction: float = 0.9) -> float:
    """The first step at which ``values - values[0]`` reaches ``fraction`` of the final gain, as a share
    of the last step; NaN when there is no positive gain."""
    if steps.size < 2:
        return math.nan
    gain = values - values[0]
    final = gain[-1]
    if not final > 0:
        return math.nan
    first = int(np.argmax(gain >= fraction * final))
    return float(steps[first] / steps[-1])


def _mean_curve(seeds: Sequence[Records], key: str) -> tuple[np.ndarray, np.ndarray]:
    agg = aggregate_seeds([series(r, key) for r in seeds])
    return agg.steps, agg.mean


def _window(recs: Records, key: str, last: bool) -> float:
    _, v = series(recs, key)
    if v.size == 0:
        return math.nan
    n = max(1, int(round(v.size * _EDGE)))
    return float(np.mean(v[-n:] if last else v[:n]))


def _used(recs: Records, last: bool) -> float:
    """Share of the generated groups used for gradients over the first / last 10% of steps."""
    steps_t, train = series(recs, "train/groups")
    steps_g, gen = series(recs, "gen/groups")
    common, it, ig = np.intersect1d(steps_t, steps_g, return_indices=True)
    if common.size == 0:
        return math.nan
    n = max(1, int(round(common.size * _EDGE)))
    sl = slice(-n, None) if last else slice(0, n)
    return float(train[it][sl].sum() / max(gen[ig][sl].sum(), 1e-12))


def _check(name: str, value: Any, target: str, met: bool | None) -> dict[str, Any]:
    return {"criterion": name, "value": value, "target": target, "met": met}


def _task_checks(dapo: Mapping[str, Any], kind: str, t: Targets) -> list[dict[str, Any]]:
    lo, hi = t.band
    out = []
    for task, v in dapo["accuracy"][kind]["by_task"].items():
        base = v["base"]["mean"]
        gains = [f - b for b, f in zip(v["base"]["by_seed"], v["final"]["by_seed"])]
        out.append(_check(f"1. {task}: base accuracy", round(base, 3), f"in {lo}-{hi}", lo <= base <= hi))
        out.append(
            _check(
                f"1. {task}: DAPO gain (min over seeds)",
                round(min(gains), 3),
                f">= {t.min_gain}",
                min(gains) >= t.min_gain,
            )
        )
    return out


def regime_checks(
    runs: Mapping[str, Sequence[Records]],
    summary: Mapping[str, Mapping[str, Any]],
    strata_base: Mapping[str, float] | None = None,
    wall_seconds: float | None = None,
    targets: Targets = TARGETS,
    resumed_runs: int = 0,
) -> dict[str, Any]:
    """The criteria, each ``{"criterion", "value", "target", "met"}``, from the DAPO and GRPO arms.

    ``runs``: arm -> per-seed metrics records; ``summary``: ``summary.json``'s arms; ``strata_base``:
    the base model's headline accuracy on each figure-3 stratum (``easy:...``/``hard:...``);
    ``wall_seconds``: the whole comparison's wall time, not reported when ``resumed_runs`` of its runs had
    started in an earlier invocation (its time is then unknown). Criteria without their arm are left out.
    """
    t = targets
    checks: list[dict[str, Any]] = []
    dapo = summary.get("dynamic_sampling")
    kind = "sampled" if dapo is not None and "sampled" in dapo["accuracy"] else "greedy"
    key = "eval/sampled_accuracy" if kind == "sampled" else "eval/accuracy"
    detail: dict[str, Any] = {"accuracy": kind}
    if dapo is not None:
        seeds = runs["dynamic_sampling"]
        checks += _task_checks(dapo, kind, t)
        frac = time_to_fraction(*_mean_curve(seeds, key))
        per_seed = [time_to_fraction(*series(r, key)) for r in seeds]
        detail["t90_by_seed"] = per_seed
        tasks = dapo["accuracy"][kind]["by_task"]
        detail["t90_by_task"] = {t: time_to_fraction(*_mean_curve(seeds, f"{key}/{t}")) for t in tasks}
        checks.append(
            _check(
                "2. DAPO reaches 90% of its final gain at (share of the run, seed mean)",
                round(frac, 3),
                f">= {t.late_fraction}",
                frac >= t.late_fraction,
            )
        )
        enc = dapo["encounters_per_prompt"]["mean"]
        checks.append(
            _check("3. DAPO encounters per prompt", round(enc, 2), f"<= {t.max_encounters:g}", enc <= t.max_encounters)
        )
        early, late = (float(np.mean([_window(r, "gen/rounds", x) for r in seeds])) for x in (False, True))
        used_early, used_late = (float(np.mean([_used(r, x) for r in seeds])) for x in (False, True))
        checks.append(
            _check(
                "4. DAPO rounds per step, first -> last 10% of steps",
                [round(early, 2), round(late, 2)],
                f"late >= {t.min_late_rounds:g}",
                late >= t.min_late_rounds,
            )
        )
        checks.append(
            _check(
                "4. DAPO used fraction, first -> last 10% of steps",
                [round(used_early, 3), round(used_late, 3)],
                "falls (seed: below 0.15 late)",
                used_late < used_early,
            )
        )
        checks.append(_check("6. paired seeds", dapo["seeds"], f">= {t.seeds}", dapo["seeds"] >= t.seeds))
    if "grpo" in summary:
        detail["grpo_gain"] = summary["grpo"]["accuracy"][kind]["gain"]
    for name, base in (strata_base or {}).items():
        easy = name.startswith("easy:")
        checks.append(
            _check(
                f"5. figure-3 stratum {name}: base accuracy",
                round(base, 3),
                f">= {t.easy_base}" if easy else f"<= {t.hard_base}",
                base >= t.easy_base if easy else base <= t.hard_base,
            )
        )
    wall = None if wall_seconds is None else round(wall_seconds / 60, 2)
    if resumed_runs:
        wall = f"not measured: {resumed_runs} run(s) resumed from an earlier invocation"
    if wall is not None:
        checks.append(
            _check(
                "6. wall time of the comparison (minutes)", wall, f"<= {t.minutes:g} (default profile, 2 cores)", None
            )
        )
    checks.sort(key=lambda c: int(c["criterion"].split(".", 1)[0]))  # in the criteria's order (stable within one)
    return {"targets": asdict(t), "checks": checks, "detail": detail}


def regime_table(regime: Mapping[str, Any]) -> str:
    """The checks as a markdown table."""

    def mark(met: bool | None) -> str:
        return "-" if met is None else ("yes" if met else "**no**")

    lines = ["| criterion | measured | target | met |", "|---|---|---|---|"]
    lines += [f"| {c['criterion']} | {c['value']} | {c['target']} | {mark(c['met'])} |" for c in regime["checks"]]
    return "\n".join(lines)
