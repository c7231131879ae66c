"""The regime family's table and figure, rebuilt from the run folders ``snooze.experiments.family`` wrote.

For each regime and arm, paired by seed against DAPO (``dynamic_sampling``) on the same seed:

- ``ratio``: DAPO's generated groups over the arm's (above 1: the arm generated less);
- ``gap``: the arm's late accuracy minus DAPO's, in points (late: the mean of the last
  :data:`~snooze.logs.LATE_EVALS` evaluations of avg@k at the rollout temperature, the headline accuracy).

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
from snooze.experiments.summary_file import DAPO, read_regime, read_summary

__all__ = [
    "paired",
    "family_rows",
    "family_markdown",
    "pooled_markdown",
    "write_family",
    "pooled",
    "qualifies",
    "DAPO",
    "BAR",
]

BAR = {"mean_gap": -0.5, "interval_low": -1.0, "regime_gap": -1.5, "saving": 1.3}
"""What a candidate default is held to, over every regime and seed paired with DAPO: a mean late gap of at least
-0.5 points with its 90% interval's lower end at -1.0 or above, no regime's mean gap below -1.5, and at least
1.3x fewer generated groups than DAPO (the geometric mean over the regimes of each regime's mean ratio)."""
_T90 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 8: 1.860, 10: 1.812, 15: 1.753, 20: 1.725}
"""Two-sided 90% Student t quantiles by degrees of freedom (beyond the table: :func:`_t90`)."""

_REDO = "rerun the regime (benchmarks/family.py --regimes NAME) to rewrite it"


def _late(entry: Mapping[str, Any]) -> list[float]:
    return [float(x) for x in entry["accuracy"][headline(entry)]["late"]["by_seed"]]


def paired(summary: Mapping[str, Mapping[str, Any]], arm: str) -> dict[str, Any]:
    """``{"ratio", "gap", "gen", "late"}`` of ``arm`` against DAPO in one regime's ``summary.json``."""
    dapo, this = summary[DAPO], summary[arm]
    gen_d, gen_a = dapo["gen_groups"]["by_seed"], this["gen_groups"]["by_seed"]
    late_d, late_a = _late(dapo), _late(this)
    return {
        "ratio": stat([d / a if a else math.nan for d, a in zip(gen_d, gen_a)]),
        "gap": stat([100.0 * (a - d) for d, a in zip(late_d, late_a)]),
        "gen": stat(gen_a),
        "late": stat(late_a),
    }


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


def _cell(paired_: Mapping[str, Any]) -> str:
    r, g = paired_["ratio"], paired_["gap"]
    return f"{r['mean']:.2f}x ({r['min']:.2f}-{r['max']:.2f}), {g['mean']:+.1f} ({g['min']:+.1f} to {g['max']:+.1f})"


def family_markdown(rows: Mapping[str, Any]) -> str:
    """The family's table: one row per regime, one column per arm ("ratio (range), gap (range)"),
    DAPO's own late accuracy and generated groups in the first column, then each arm's worst gap."""
    arms = [a for a in rows["arms"] if a != DAPO]
    seeds = max((len(t[DAPO]["gap"]["by_seed"]) for t in rows["regimes"].values()), default=0)
    named = [f"{a} ({rows['overall'][a]['seeds']} seeds)" for a in arms]
    head = f"| regime | DAPO ({seeds} seeds): late avg@k, groups | " + " | ".join(named) + " |"
    lines = [head, "|" + "---|" * (len(arms) + 2)]
    for name, table in rows["regimes"].items():
        d = table[DAPO]
        cells = [_cell(table[a]) if a in table else "-" for a in arms]
        lines.append(f"| {name} | {d['late']['mean']:.3f}, {d['gen']['mean']:.0f} | " + " | ".join(cells) + " |")
    worst = [f"{rows['overall'][a]['worst_gap']:+.1f}" for a in arms]
    lines.append("| **worst regime's gap** | | " + " | ".join(worst) + " |")
    return "\n".join(lines)


def pooled_markdown(rows: Mapping[str, Any]) -> str:
    """Each arm pooled over the regimes (:func:`pooled`) against :data:`BAR`: the geometric-mean saving, the mean
    late gap with its 90% interval, the worst regime's gap, and whether the arm meets the bar."""
    lines = [
        "| arm | pairs | saving (geometric mean) | mean late gap (90% interval) | worst regime | meets the bar |",
        "|---|---|---|---|---|---|",
    ]
    for arm, p in pooled(rows).items():
        low, high = p["interval"]
        lines.append(
            f"| {arm} | {p['pairs']} | {p['saving']:.2f}x | {p['mean_gap']:+.2f} ({low:+.2f} to {high:+.2f}) | "
            f"{p['worst_regime_gap']:+.1f} | {'yes' if p['qualifies'] else 'no'} |"
        )
    return "\n".join(lines)


def write_family(out: Path, regimes: Sequence[str]) -> str:
    """Write ``family.json``, ``family.md`` and the frontier figure under ``out``; return the table. A
    :class:`DataError` (nothing written) when ``out`` holds no regime's summary or a damaged one."""
    summaries = _summaries(out, regimes)
    rows = family_rows(out, regimes, summaries)
    (out / "family.json").write_text(json.dumps(rows, indent=1))
    text = family_markdown(rows) + "\n\n" + pooled_markdown(rows)
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


def pooled(rows: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per arm, over every regime and seed paired with DAPO: the mean late gap (points) with its 90% interval (a
    t interval over the pairs), each regime's mean gap, the worst of them, the geometric mean over the regimes of
    the mean ratio of generated groups, and whether :data:`BAR` is met (:func:`qualifies`)."""
    out: dict[str, dict[str, Any]] = {}
    for arm in rows["arms"]:
        if arm == DAPO:
            continue
        regimes = {name: table[arm] for name, table in rows["regimes"].items() if arm in table}
        gaps = [g for p in regimes.values() for g in p["gap"]["by_seed"] if g is not None and not math.isnan(g)]
        ratios = [p["ratio"]["mean"] for p in regimes.values()]
        if not gaps or not ratios:
            continue
        n, mean = len(gaps), sum(gaps) / len(gaps)
        sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (n - 1)) if n > 1 else math.nan
        half = _t90(n - 1) * sd / math.sqrt(n) if n > 1 else math.nan
        entry = {
            "pairs": n,
            "mean_gap": mean,
            "interval": [mean - half, mean + half],
            "regime_gaps": {name: p["gap"]["mean"] for name, p in regimes.items()},
            "worst_regime_gap": min(p["gap"]["mean"] for p in regimes.values()),
            "saving": math.exp(sum(math.log(r) for r in ratios) / len(ratios)),
        }
        entry["qualifies"] = qualifies(entry)
        out[arm] = entry
    return out


def qualifies(entry: Mapping[str, Any]) -> bool:
    """Whether a :func:`pooled` entry meets :data:`BAR`."""
    return bool(
        entry["mean_gap"] >= BAR["mean_gap"]
        and entry["interval"][0] >= BAR["interval_low"]
        and entry["worst_regime_gap"] >= BAR["regime_gap"]
        and entry["saving"] >= BAR["saving"]
    )
