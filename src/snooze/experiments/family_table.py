"""The regime family's table and figure, rebuilt from the run folders ``snooze.experiments.family`` wrote.

For each regime and arm, paired by seed against DAPO (``dynamic_sampling``) on the same seed:

- ``ratio``: DAPO's generated groups over the arm's (above 1: the arm generated less);
- ``rollout_ratio``, ``token_ratio``: the same in rollouts (every rollout and scoring pass, ``total/cost_rollouts``)
  and in generated tokens (``total/cost_tokens``), where the summary has them (a summary written before costs
  were recorded has neither: its rollout ratio is its group ratio, every group being whole);
- ``gap``: the arm's late accuracy minus DAPO's, in points (late: the mean of the last
  :data:`~snooze.logs.LATE_EVALS` evaluations of avg@k at the rollout temperature, the headline accuracy);
- ``reach``: Pilot-Commit's measure (arXiv 2605.26606), the peers' scale: the cumulative rollouts the arm had
  spent when one of its evaluations first reached :data:`REACH` (95%, 99%) of its paired DAPO run's late accuracy
  (the same held-out evaluations), ``None`` for a seed that never did, and DAPO's own over the arm's (:func:`reach`).

Each as the mean over seeds with the range (min, max). ``worst`` per arm is its lowest mean gap over
the family's regimes: the number the recommended setting is held to (within 1 point of DAPO everywhere).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from snooze.core.errors import DataError
from snooze.experiments.summary import headline, stat
from snooze.experiments.summary_file import DAPO, RECOMMENDED_ARM, read_regime, read_summary

__all__ = [
    "paired",
    "family_rows",
    "family_markdown",
    "pooled_markdown",
    "write_family",
    "pooled",
    "mean_interval",
    "qualifies",
    "reach",
    "reach_markdown",
    "cost_markdown",
    "DAPO",
    "BAR",
    "ROLLOUT_BAR",
    "meets_rollout_bar",
    "REACH",
]

BAR = {"mean_gap": -0.5, "interval_low": -1.0, "regime_gap": -1.5, "saving": 1.2}
"""What a candidate default is held to (issue 49's bar; issue 40's asked 1.3x), over every regime and seed paired
with DAPO: a mean late gap of at least -0.5 points with its 90% interval's lower end at -1.0 or above, no regime's
mean gap below -1.5, and at least 1.2x fewer rollouts than DAPO, every rollout and scoring pass counted (the
geometric mean over the regimes of each regime's mean ratio; a summary without rollouts gives its groups ratio, the
same when every group is whole)."""
ROLLOUT_BAR = {**BAR, "saving": 1.6}
"""Issue 52's bar: :data:`BAR`'s accuracy terms, at least 1.6x fewer rollouts than DAPO (the same geometric mean),
and fewer generated tokens than the recommended setting (a token saving over DAPO above that arm's, when the table
has it)."""
_T90 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 8: 1.860, 10: 1.812, 15: 1.753, 20: 1.725}
"""Two-sided 90% Student t quantiles by degrees of freedom (beyond the table: :func:`_t90`)."""

REACH = (0.95, 0.99)
"""The shares of the paired DAPO run's late accuracy whose cost :func:`reach` reads (Pilot-Commit's targets)."""

_REDO = "rerun the regime (benchmarks/family.py --regimes NAME) to rewrite it"


def _late(entry: Mapping[str, Any]) -> list[float]:
    return [float(x) for x in entry["accuracy"][headline(entry)]["late"]["by_seed"]]


def _ratios(dapo: Sequence[float], arm: Sequence[float]) -> dict[str, Any]:
    return stat([d / a if a else math.nan for d, a in zip(dapo, arm)])


def paired(summary: Mapping[str, Mapping[str, Any]], arm: str) -> dict[str, Any]:
    """``{"ratio", "gap", "gen", "late"}`` of ``arm`` against DAPO in one regime's ``summary.json``, with
    ``"rollout_ratio"``, ``"token_ratio"``, ``"rollouts"``, ``"tokens"`` and ``"reach"`` (:func:`reach`) where the
    summary records costs (``None`` where it does not)."""
    dapo, this = summary[DAPO], summary[arm]
    gen_d, gen_a = dapo["gen_groups"]["by_seed"], this["gen_groups"]["by_seed"]
    late_d, late_a = _late(dapo), _late(this)
    out: dict[str, Any] = {
        "ratio": _ratios(gen_d, gen_a),
        "gap": stat([100.0 * (a - d) for d, a in zip(late_d, late_a)]),
        "gen": stat(gen_a),
        "late": stat(late_a),
    }
    for key, ratio, cost in (("rollouts", "rollout_ratio", "rollouts"), ("gen_tokens", "token_ratio", "tokens")):
        known = key in dapo and key in this
        out[ratio] = _ratios(dapo[key]["by_seed"], this[key]["by_seed"]) if known else None
        out[cost] = stat(this[key]["by_seed"]) if known else None
    known = "curve" in dapo and "curve" in this
    out["reach"] = reach(late_d, this["curve"]["by_seed"], dapo["curve"]["by_seed"]) if known else None
    return out


def _first(curve: Sequence[Mapping[str, float]], target: float) -> float | None:
    """The rollouts spent at the first evaluation of ``curve`` at or above ``target`` (``None``: never; an
    evaluation whose accuracy or cost was not measured does not count)."""
    for point in curve:
        acc, spent = point["accuracy"], point["rollouts"]
        if not (math.isnan(acc) or math.isnan(spent)) and acc >= target:
            return float(spent)
    return None


def reach(
    dapo_late: Sequence[float],
    curves: Sequence[Sequence[Mapping[str, float]]],
    dapo_curves: Sequence[Sequence[Mapping[str, float]]],
) -> dict[str, Any]:
    """Pilot-Commit's measure for one arm in one regime, per share ``q`` of :data:`REACH` (keys ``"95"``,
    ``"99"``): over the seeds, paired by seed with DAPO, the rollouts the arm had spent when its headline accuracy
    first reached ``q x`` DAPO's late accuracy (``rollouts``: mean and range over the seeds that reached it;
    ``by_seed`` with ``None`` for a seed that never did; ``never``: how many), and ``ratio``: DAPO's own rollouts to
    the same target over the arm's (above 1: the arm got there on fewer), over the seeds where both did and the arm
    spent some. A seed whose DAPO late accuracy was not measured counts as neither."""
    out: dict[str, Any] = {}
    for q in REACH:
        arm, ratios, never = [], [], 0
        for late, curve, own in zip(dapo_late, curves, dapo_curves):
            if math.isnan(late):
                arm.append(None)
                continue
            spent, theirs = _first(curve, q * late), _first(own, q * late)
            arm.append(spent)
            never += spent is None
            if spent and theirs is not None:
                ratios.append(theirs / spent)
        reached = stat([x for x in arm if x is not None])
        out[f"{round(100 * q)}"] = {
            "rollouts": {**reached, "by_seed": arm},
            "never": never,
            "ratio": stat(ratios),
        }
    return out


def _summaries(out: Path, regimes: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each regime's checked ``summary.json`` found under ``out`` (a regime not run yet is left out); a
    :class:`DataError` when ``out`` is not a folder or holds none of them (an empty table says nothing)."""
    if not out.is_dir():
        what = "is not a folder" if out.exists() else "does not exist"
        raise DataError(f"{out}: {what}; run the family into a folder first (benchmarks/family.py --out FOLDER)")
    found = {name: read_summary(out / name / "summary.json", _REDO) for name in regimes if _has_summary(out, name)}
    if not found:
        raise DataError(
            f"{out}: none of the regimes {list(regimes)} has a summary.json there; run them first "
            f"(benchmarks/family.py --out {out} --regimes NAME), or pass the --out they were run into"
        )
    return found


def _has_summary(out: Path, name: str) -> bool:
    path = out / name / "summary.json"
    return path.exists() or path.is_symlink()  # (a folder or a FIFO there is the reader's error, not "not run")


def family_rows(out: Path, regimes: Sequence[str], summaries: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every regime's paired numbers per arm, and each arm's worst and mean over the regimes found
    (``summaries``: the regimes' checked summaries, when already read)."""
    summaries = _summaries(out, regimes) if summaries is None else summaries
    table: dict[str, dict[str, Any]] = {}
    for name, summary in summaries.items():
        if DAPO not in summary:
            raise DataError(f"{out / name / 'summary.json'}: has no {DAPO} arm, which the other arms are paired with")
        table[name] = {arm: paired(summary, arm) for arm in summary}
        regime = out / name / "regime.json"
        if regime.exists() or regime.is_symlink():
            table[name]["_criteria"] = read_regime(regime, _REDO)
    arms = sorted({a for rows in table.values() for a in rows if not a.startswith("_")}, key=_arm_order)
    overall = {}
    for arm in arms:
        gaps = [rows[arm]["gap"]["mean"] for rows in table.values() if arm in rows]
        ratios = [rows[arm]["ratio"]["mean"] for rows in table.values() if arm in rows]
        pairs = max(len(rows[arm]["gap"]["by_seed"]) for rows in table.values() if arm in rows)
        overall[arm] = {
            "worst_gap": min(gaps),
            "mean_ratio": sum(ratios) / len(ratios),
            "regimes": len(gaps),
            "seeds": pairs,
        }
    return {"regimes": table, "arms": arms, "overall": overall}


def _arm_order(arm: str) -> tuple[int, str]:
    order = (DAPO, "snooze-f1-carry", "grpo", "one-round", "snooze-f1", "snooze-f2", "snooze", "predictive")
    return (order.index(arm) if arm in order else len(order), arm)


def _cell(paired_: Mapping[str, Any], key: str) -> str:
    r, g = paired_[key], paired_["gap"]
    return f"{r['mean']:.2f}x ({r['min']:.2f}-{r['max']:.2f}), {g['mean']:+.1f} ({g['min']:+.1f} to {g['max']:+.1f})"


def family_markdown(rows: Mapping[str, Any]) -> str:
    """The family's table: one row per regime, one column per arm ("ratio (range), gap (range)"),
    DAPO's own late accuracy and generated rollouts in the first column, then each arm's worst gap. The ratio is
    DAPO's rollouts over the arm's (the bar's unit: with partial groups a stopped screen is a group of k rollouts,
    so groups would not compare); groups where a summary records no rollouts."""
    arms = [a for a in rows["arms"] if a != DAPO]
    seeds = max((len(t[DAPO]["gap"]["by_seed"]) for t in rows["regimes"].values()), default=0)
    costed = all(t[a]["rollout_ratio"] is not None for t in rows["regimes"].values() for a in [DAPO, *arms] if a in t)
    unit, key, spent = ("rollouts", "rollout_ratio", "rollouts") if costed else ("groups", "ratio", "gen")
    named = [f"{a} ({rows['overall'][a]['seeds']} seeds)" for a in arms]
    head = f"| regime | DAPO ({seeds} seeds): late avg@k, {unit} | " + " | ".join(named) + " |"
    lines = [head, "|" + "---|" * (len(arms) + 2)]
    for name, table in rows["regimes"].items():
        d = table[DAPO]
        cells = [_cell(table[a], key) if a in table else "-" for a in arms]
        lines.append(f"| {name} | {d['late']['mean']:.3f}, {d[spent]['mean']:.0f} | " + " | ".join(cells) + " |")
    worst = [f"{rows['overall'][a]['worst_gap']:+.1f}" for a in arms]
    lines.append("| **worst regime's gap** | | " + " | ".join(worst) + " |")
    return "\n".join(lines)


def _times(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}x"


def pooled_markdown(rows: Mapping[str, Any]) -> str:
    """Each arm pooled over the regimes (:func:`pooled`) against :data:`BAR`: the geometric-mean saving in rollouts
    (the bar's), in groups and in tokens, the same for the rollouts to 95% and 99% of DAPO's late accuracy
    (:func:`reach`), the mean late gap with its 90% interval, the worst regime's gap, and whether the arm meets the
    bar and :data:`ROLLOUT_BAR` (issue 52's)."""
    lines = [
        "| arm | pairs | saving in rollouts (geometric mean) | in groups | in tokens | to 95% of DAPO | to 99% of DAPO "
        "| mean late gap (90% interval) | worst regime | meets the bar | meets the 1.6x bar |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, p in pooled(rows).items():
        low, high = p["interval"]
        savings = " | ".join(
            _times(x) for x in (p["saving_groups"], p["saving_tokens"], p["reach_ratio"]["95"], p["reach_ratio"]["99"])
        )
        lines.append(
            f"| {arm} | {p['pairs']} | {p['saving']:.2f}x | {savings} | {p['mean_gap']:+.2f} ({low:+.2f} to "
            f"{high:+.2f}) | {p['worst_regime_gap']:+.1f} | {'yes' if p['qualifies'] else 'no'} | "
            f"{'yes' if p['qualifies_rollouts'] else 'no'} |"
        )
    return "\n".join(lines)


def _range(s: Mapping[str, Any] | None, fmt: str, unit: str = "") -> str:
    if s is None or math.isnan(s["mean"]):
        return "-"
    return f"{fmt.format(s['mean'])}{unit} ({fmt.format(s['min'])}-{fmt.format(s['max'])})"


def cost_markdown(rows: Mapping[str, Any]) -> str:
    """The family's cost table: one row per regime, DAPO's rollouts and tokens (means over seeds) in the first
    column, then per arm DAPO's rollouts and tokens over the arm's (mean and range over the seeds; ``-`` where the
    summary records no costs)."""
    arms = [a for a in rows["arms"] if a != DAPO]
    lines = ["| regime | DAPO: rollouts, tokens | " + " | ".join(arms) + " |", "|" + "---|" * (len(arms) + 2)]
    for name, table in rows["regimes"].items():
        d = table[DAPO]
        cells = [
            f"rollouts {_range(table[a]['rollout_ratio'], '{:.2f}', 'x')}, "
            f"tokens {_range(table[a]['token_ratio'], '{:.2f}', 'x')}"
            if a in table
            else "-"
            for a in arms
        ]
        first = f"{_range(d['rollouts'], '{:.0f}')}, {_range(d['tokens'], '{:.0f}')}"
        lines.append(f"| {name} | {first} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _reach_cell(r: Mapping[str, Any] | None) -> str:
    if r is None:
        return "-"
    parts = []
    for key, p in r.items():
        n = len(p["rollouts"]["by_seed"])
        spent = _range(p["rollouts"], "{:.0f}") if p["never"] < n else "never"
        never = f", never on {p['never']}/{n}" if 0 < p["never"] < n else ""
        parts.append(f"{key}%: {spent}{never} [{_times(p['ratio']['mean'])}]")
    return "; ".join(parts)


def reach_markdown(rows: Mapping[str, Any]) -> str:
    """Pilot-Commit's measure (:func:`reach`): per regime and arm (DAPO first), the rollouts spent when the arm first
    reached 95% and 99% of its paired DAPO run's late accuracy (mean and range over the seeds that did; how many
    never did), and in brackets DAPO's rollouts to the same target over the arm's (mean over the seeds)."""
    arms = list(rows["arms"])
    lines = ["| regime | " + " | ".join(arms) + " |", "|" + "---|" * (len(arms) + 1)]
    for name, table in rows["regimes"].items():
        cells = [_reach_cell(table[a]["reach"]) if a in table else "-" for a in arms]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_family(out: Path, regimes: Sequence[str]) -> str:
    """Write ``family.json``, ``family.md`` and the frontier figure under ``out``; return the table. A
    :class:`DataError` (nothing written) when ``out`` holds no regime's summary or a damaged one."""
    summaries = _summaries(out, regimes)
    rows = family_rows(out, regimes, summaries)
    (out / "family.json").write_text(json.dumps(rows, indent=1))
    text = "\n\n".join((family_markdown(rows), cost_markdown(rows), reach_markdown(rows), pooled_markdown(rows)))
    (out / "family.md").write_text(text + "\n")
    try:
        from snooze.plots.family import figure_family

        figure_family(summaries, out / "family_frontier.png")
    except ImportError:
        pass
    return text


def _t90(df: int) -> float:
    """The table's quantile at the largest tabled df not above ``df`` (never smaller than the true one); beyond
    the table the Cornish-Fisher expansion of the t quantile around the normal one (within 1e-3 from df 20)."""
    if df <= max(_T90):
        return _T90[max(k for k in _T90 if k <= df)]
    z = 1.6448536
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def mean_interval(gaps: Sequence[float]) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean of paired gaps with its two-sided 90% t interval (``nan`` ends with one gap)."""
    n, mean = len(gaps), sum(gaps) / len(gaps)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (n - 1)) if n > 1 else math.nan
    half = _t90(n - 1) * sd / math.sqrt(n) if n > 1 else math.nan
    return mean, mean - half, mean + half


def pooled(rows: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per arm, over every regime and seed paired with DAPO: the mean late gap (points) with its 90% interval (a
    t interval over the pairs), each regime's mean gap, the worst of them, the geometric mean over the regimes of
    the mean ratio of rollouts (``saving``, the bar's), of groups (``saving_groups``) and of tokens
    (``saving_tokens``), the same of DAPO's rollouts to 95% and 99% of its late accuracy over the arm's
    (``reach_ratio``), and whether :data:`BAR` is met (:func:`qualifies`)."""
    out: dict[str, dict[str, Any]] = {}
    for arm in rows["arms"]:
        if arm == DAPO:
            continue
        regimes = {name: table[arm] for name, table in rows["regimes"].items() if arm in table}
        gaps = [g for p in regimes.values() for g in p["gap"]["by_seed"] if g is not None and not math.isnan(g)]
        ratios = [(p["rollout_ratio"] or p["ratio"])["mean"] for p in regimes.values()]
        if not gaps or not ratios:
            continue
        mean, low, high = mean_interval(gaps)
        entry = {
            "pairs": len(gaps),
            "mean_gap": mean,
            "interval": [low, high],
            "regime_gaps": {name: p["gap"]["mean"] for name, p in regimes.items()},
            "worst_regime_gap": min(p["gap"]["mean"] for p in regimes.values()),
            "saving": _geomean(ratios),
            "saving_groups": _geomean([p["ratio"]["mean"] for p in regimes.values()]),
            "saving_tokens": _geomean([(p["token_ratio"] or {"mean": math.nan})["mean"] for p in regimes.values()]),
            "reach_ratio": {
                f"{round(100 * q)}": _geomean(
                    [p["reach"][f"{round(100 * q)}"]["ratio"]["mean"] for p in regimes.values() if p["reach"]]
                )
                for q in REACH
            },
        }
        entry["qualifies"] = qualifies(entry)
        out[arm] = entry
    recommended = out.get(RECOMMENDED_ARM)
    for arm, entry in out.items():
        entry["qualifies_rollouts"] = arm != RECOMMENDED_ARM and meets_rollout_bar(entry, recommended)
    return out


def meets_rollout_bar(entry: Mapping[str, Any], recommended: Mapping[str, Any] | None) -> bool:
    """Whether a :func:`pooled` entry meets :data:`ROLLOUT_BAR`: its terms, and fewer tokens than ``recommended``
    (the recommended setting's entry: a larger token saving over DAPO; ``None``, not in the table: not judged)."""
    fewer = recommended is None or entry["saving_tokens"] > recommended["saving_tokens"]
    return bool(fewer and qualifies(entry, ROLLOUT_BAR))


def _geomean(xs: Sequence[float]) -> float:
    """The geometric mean of ``xs`` (NaN when empty or when one is not a finite number above 0: a pooled number
    that leaves a regime out would not say so)."""
    if not xs or any(math.isnan(x) or not 0 < x < math.inf for x in xs):
        return math.nan
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def qualifies(entry: Mapping[str, Any], bar: Mapping[str, float] = BAR) -> bool:
    """Whether a :func:`pooled` entry meets ``bar``'s accuracy and rollout terms (:data:`BAR` by default)."""
    return bool(
        entry["mean_gap"] >= bar["mean_gap"]
        and entry["interval"][0] >= bar["interval_low"]
        and entry["worst_regime_gap"] >= bar["regime_gap"]
        and entry["saving"] >= bar["saving"]
    )
