"""``snooze/saved/*`` against the truth: what a run estimated DAPO would have generated for its batches
(``total/saved_dapo_groups``, logged online from its own draws and the audit) beside the groups the paired
DAPO run of the same regime and seed really generated.

    PYTHONPATH=src .venv/bin/python benchmarks/saved_truth.py --runs runs/family --arm snooze-f1-carry

Reads the runs of ``benchmarks/family.py`` (nothing is trained). Per regime: the estimate over the truth per
seed, their mean, and whether every seed is within ``--tolerance`` (default 10%); the arm's own groups and
DAPO's, so the estimated saving (estimate / own) sits beside the true one (DAPO / own). The estimate needs the
audit: an arm run with ``audit=0`` claims no saving from what it skipped (its skipped encounters are taken at
the drawn rate). The last line is one JSON object.

``--recompute``: the estimate replayed from each run's per-step metrics by this version's estimator
(``snooze.analysis.saved_dapo_groups``) instead of the value the run logged. The estimate decides nothing
in a run, so this is what the run would log if it were trained again now (the same to the last digit:
checked on a development run); it checks a new estimator on runs trained before it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

DAPO = "dynamic_sampling"


def _recomputed(run: Path) -> float:
    """The run's ``total/saved_dapo_groups`` by this version's estimator, from its per-step metrics."""
    from snooze import SchedulerConfig
    from snooze.analysis import saved_dapo_groups

    cfg = SchedulerConfig.from_dict(json.loads((run / "config.json").read_text(encoding="utf-8"))["scheduler"])
    return saved_dapo_groups(run / "metrics.jsonl", cfg)


def _last(path: Path) -> dict[str, Any]:
    """The last line of a run's ``metrics.jsonl``: its run totals."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads(lines[-1])


def compare(runs: Path, arm: str, tolerance: float, recompute: bool = False) -> dict[str, Any]:
    """Per regime under ``runs``: the paired seeds' estimate / truth, and the arm's and DAPO's groups
    (``recompute``: the estimate by this version's estimator, from the per-step metrics)."""
    out: dict[str, Any] = {}
    done = [p for p in runs.iterdir() if (p / "summary.json").exists()]  # a regime still running is left out
    for regime in sorted(p for p in done if (p / arm).is_dir() and (p / DAPO).is_dir()):
        rows = []
        for run in sorted((regime / arm).glob("seed*")):
            dapo = regime / DAPO / run.name / "metrics.jsonl"
            mine = run / "metrics.jsonl"
            if not (dapo.exists() and mine.exists()):
                continue
            own, truth = _last(mine), _last(dapo)
            est, true, gen = own["total/saved_dapo_groups"], truth["total/gen_groups"], own["total/gen_groups"]
            if recompute:
                est = _recomputed(run)
            rows.append({"seed": run.name, "estimate": est, "dapo": true, "own": gen, "ratio": est / true})
        if rows:
            ratios = [r["ratio"] for r in rows]
            out[regime.name] = {
                "seeds": rows,
                "mean_ratio": sum(ratios) / len(ratios),
                "within": all(abs(r - 1.0) <= tolerance for r in ratios),
                "est_saving": sum(r["estimate"] / r["own"] for r in rows) / len(rows),
                "true_saving": sum(r["dapo"] / r["own"] for r in rows) / len(rows),
            }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=Path("runs/family"), help="benchmarks/family.py's --out")
    parser.add_argument("--arm", default="snooze-f1-carry", help="the arm whose estimate is checked")
    parser.add_argument("--tolerance", type=float, default=0.10, help="|estimate / truth - 1| allowed per seed")
    parser.add_argument(
        "--recompute", action="store_true", help="replay each run's per-step metrics through this version's estimator"
    )
    args = parser.parse_args()
    if not args.runs.is_dir():
        parser.error(f"{args.runs}: not a folder of family runs (run benchmarks/family.py --out {args.runs})")
    if not (math.isfinite(args.tolerance) and args.tolerance > 0):
        parser.error(f"--tolerance {args.tolerance}: must be a finite number > 0")
    result = compare(args.runs, args.arm, args.tolerance, args.recompute)
    if not result:
        parser.error(f"{args.runs}: no regime has both {args.arm!r} and {DAPO!r} runs")
    within = f"within {args.tolerance:.0%}"
    print(f"| regime | estimate / DAPO's groups, by seed | mean | {within} | saving, estimated / true |")
    print("|---|---|---|---|---|")
    for name, r in result.items():
        by_seed = ", ".join(f"{s['ratio']:.3f}" for s in r["seeds"])
        ok = "yes" if r["within"] else "**no**"
        saving = f"{r['est_saving']:.2f}x / {r['true_saving']:.2f}x"
        print(f"| `{name}` | {by_seed} | {r['mean_ratio']:.3f} | {ok} | {saving} |")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
