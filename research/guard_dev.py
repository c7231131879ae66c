"""Issue 49's guard, developed on the alarm's development runs: each skipping arm with the guard (the scheduler's
default since the guard exists) beside the same arm without it (the runs ``research/alarm_runs.py`` made before the
guard existed, the audit at 0.05 in both), each paired with DAPO on the same seed.

    nice -n 19 .venv/bin/python research/alarm_runs.py --out /work/runs/guard_dev --arms snooze-f1-carry,snooze-f5 \\
        --regimes al-mix,al-mix-lr,... --seeds 3 --jobs 2 --threads 1     # the guarded runs (DAPO's linked in)
    .venv/bin/python research/guard_dev.py --guarded /work/runs/guard_dev --unguarded /work/runs/alarm

Per arm and regime: DAPO's rollouts over the arm's (geometric mean over the paired seeds), the mean late gap to DAPO
in points (held-out avg@8, the last three evaluations), and how many runs the alarm fired in (the guard acts from the
next step); then the arm pooled over the regimes: the geometric mean saving, the mean gap with its 90% interval over
the pairs (t), and the worst regime. Only seeds present in all three runs (DAPO, guarded, unguarded) count.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

DAPO = "dynamic_sampling"


def read(run: Path) -> dict[str, Any] | None:
    """A finished run's rollouts, late accuracy and alarm step (``None``: never); ``None`` if unfinished."""
    cfg = run / "config.json"
    if not cfg.exists() or not (run / "metrics.jsonl").exists():
        return None
    steps = int(json.loads(cfg.read_text())["train"]["steps"])
    lines = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [x for x in lines if "gen/groups" in x]
    if len(train) < steps:
        return None
    g = int(json.loads(cfg.read_text())["scheduler"]["group_size"])
    rollouts = sum(x.get("gen/rollouts", x["gen/groups"] * g) for x in train[:steps])
    evals = [x["eval/sampled_accuracy"] for x in lines if x.get("eval/sampled_accuracy") is not None]
    alarm = [x.get("snooze/audit/alarm", 0) for x in train[:steps]]
    fired = alarm.index(1) if 1 in alarm else None
    guard = any(x.get("snooze/guard/on", 0) for x in train[:steps])
    return {"rollouts": rollouts, "late": float(np.mean(evals[-3:])), "fired": fired, "guarded": guard}


def cells(guarded: Path, unguarded: Path, arm: str) -> dict[str, list[tuple[dict, dict, dict]]]:
    """Per regime: (DAPO, unguarded, guarded) runs of the seeds all three finished."""
    out: dict[str, list[tuple[dict, dict, dict]]] = {}
    for regime_dir in sorted(p for p in guarded.iterdir() if (p / arm).is_dir()):
        for seed_dir in sorted((regime_dir / arm).glob("seed*")):
            runs = (
                read(regime_dir / DAPO / seed_dir.name),
                read(unguarded / regime_dir.name / arm / seed_dir.name),
                read(seed_dir),
            )
            if all(r is not None for r in runs):
                out.setdefault(regime_dir.name, []).append(runs)  # type: ignore[arg-type]
    return out


def _geo(x: list[float]) -> float:
    return float(np.exp(np.mean(np.log(x))))


def _t90(x: list[float]) -> tuple[float, float]:
    """The mean's 90% interval, t with the pairs' degrees of freedom (the family table's quantile)."""
    from snooze.experiments.family_table import _t90 as t90

    m, se = float(np.mean(x)), float(np.std(x, ddof=1) / math.sqrt(len(x)))
    h = t90(len(x) - 1) * se
    return m - h, m + h


def table(guarded: Path, unguarded: Path, arm: str) -> str:
    rows = cells(guarded, unguarded, arm)
    out = [
        f"\n{arm}: unguarded -> guarded\n",
        "| regime | pairs | alarm fired | saving (DAPO rollouts / arm's) | late gap to DAPO (points) |",
        "|---|---|---|---|---|",
    ]
    pooled: dict[str, list[float]] = {"s_u": [], "s_g": [], "g_u": [], "g_g": []}
    worst = {"u": math.inf, "g": math.inf}
    for regime, runs in rows.items():
        s_u = _geo([d["rollouts"] / u["rollouts"] for d, u, _ in runs])
        s_g = _geo([d["rollouts"] / g["rollouts"] for d, _, g in runs])
        gap_u = [100 * (u["late"] - d["late"]) for d, u, _ in runs]
        gap_g = [100 * (g["late"] - d["late"]) for d, _, g in runs]
        fired = [g["fired"] for _, _, g in runs if g["fired"] is not None]
        steps = ", ".join(str(f) for f in fired)
        out.append(
            f"| {regime} | {len(runs)} | {len(fired)}{f' (steps {steps})' if fired else ''} | {s_u:.2f}x -> {s_g:.2f}x "
            f"| {np.mean(gap_u):+.2f} -> {np.mean(gap_g):+.2f} |"
        )
        pooled["s_u"].append(s_u)
        pooled["s_g"].append(s_g)
        pooled["g_u"] += gap_u
        pooled["g_g"] += gap_g
        worst["u"], worst["g"] = min(worst["u"], float(np.mean(gap_u))), min(worst["g"], float(np.mean(gap_g)))
    if not rows:
        return "\n".join([*out, "(no finished runs)"])
    lo_u, hi_u = _t90(pooled["g_u"])
    lo_g, hi_g = _t90(pooled["g_g"])
    out.append(
        f"| **pooled** | {len(pooled['g_g'])} | | {_geo(pooled['s_u']):.2f}x -> {_geo(pooled['s_g']):.2f}x | "
        f"{np.mean(pooled['g_u']):+.2f} ({lo_u:+.1f} to {hi_u:+.1f}) -> {np.mean(pooled['g_g']):+.2f} "
        f"({lo_g:+.1f} to {hi_g:+.1f}); worst regime {worst['u']:+.2f} -> {worst['g']:+.2f} |"
    )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--guarded", type=Path, default=Path("/work/runs/guard_dev"))
    parser.add_argument("--unguarded", type=Path, default=Path("/work/runs/alarm"))
    parser.add_argument("--arms", default="snooze-f1-carry,snooze-f5")
    args = parser.parse_args()
    for arm in args.arms.split(","):
        print(table(args.guarded, args.unguarded, arm))


if __name__ == "__main__":
    main()
