"""A first development look at partial groups (issue 52): what screening alone saves in rollouts at G=8, and
whether it costs accuracy, on development regimes (never the family's) and seeds 100 and up.

    nice -n 19 .venv/bin/python research/screening_dev.py --out /work/runs/screen_dev --regimes al-rev,al-sort,al-mix \
        --seeds 3 --jobs 1 --threads 1
    .venv/bin/python research/screening_dev.py --list
    .venv/bin/python research/screening_dev.py --out /work/runs/screen_dev --table-only

The arms are ``snooze compare``'s: DAPO (``dynamic_sampling``, every ratio's and gap's reference), the recommended
setting (``snooze-f1-carry``) and both with ``screen_size=2`` (``dynamic_sampling-screen2``,
``snooze-f1-carry-screen2``: two screening rollouts of a prompt first, the other six only when they disagree). The
work runs seed by seed over the regimes, so a killed invocation leaves whole seeds; a rerun resumes. The table: per
arm and regime, DAPO's rollouts over the arm's and DAPO's generated tokens over the arm's (the runs' own counts,
``total/cost_rollouts`` and ``total/cost_tokens``: a stopped screen's two rollouts are in them), the late avg@8 gap
to DAPO in points (paired by seed: mean and range), and the share of screens stopped; then each arm pooled over
the regimes (geometric mean of the ratios, the gap over every regime and seed). Beside them, the arm's groups
trained on over DAPO's, DAPO's rollouts per group trained on over the arm's ("per trained": the cost of a signal
group, which ``research/screening_bound.py`` bounds on DAPO's own draws), and the generation rounds over DAPO's: a
screening arm finds its signal groups in smaller rounds (k rollouts a fresh prompt) under the same
``max_gen_rounds``, so it may train on fewer groups and take more rounds.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from snooze.experiments.compare import ARMS as COMPARE_ARMS
from snooze.experiments.compare import RECOMMENDED_ARM, SCREEN_ARMS, Arm, run_compare

sys.path.insert(0, str(Path(__file__).resolve().parent))
from alarm_runs import ALARM_REGIMES as _ALARM_REGIMES  # noqa: E402  (research/ is not a package)

ALARM_REGIMES = {
    **_ALARM_REGIMES,
    # al-mix at G=16 (8 groups of 16 a step: 128 rollouts, as the family's g16): where a screen of k is a smaller
    # share of a group, screening should be worth more (issue 52)
    "al-mix-g16": replace(_ALARM_REGIMES["al-mix"], group_size=16),
}
"""The alarm's development regimes and one at G=16."""

DAPO = "dynamic_sampling"
ARMS = {
    **{n: COMPARE_ARMS[n] for n in (DAPO, RECOMMENDED_ARM, *SCREEN_ARMS)},
    # DAPO's screening arm with rounds of 32 prompts, for the al-* regimes (batch 8): a round of fresh screens then
    # holds 64 rollouts, as DAPO's round of 8 whole groups does, so max_gen_rounds bounds the same rollouts
    "dynamic_sampling-screen2-gb32": Arm("dynamic_sampling-screen2-gb32", "dynamic_sampling", {"screen_size": 2,
                                         "gen_batch_size": 32}),
    # at G=16 (al-mix-g16, batch 8): a round of 64 fresh screens of 2, or of 32 screens of 4, holds 128 rollouts, as
    # DAPO's round of 8 whole groups of 16 does
    "dynamic_sampling-screen2-gb64": Arm("dynamic_sampling-screen2-gb64", "dynamic_sampling", {"screen_size": 2,
                                         "gen_batch_size": 64}),
    "dynamic_sampling-screen4-gb32": Arm("dynamic_sampling-screen4-gb32", "dynamic_sampling", {"screen_size": 4,
                                         "gen_batch_size": 32}),
    # the same screen on the recommended setting (guarded, the audit at its default): do the two savings compose?
    f"{RECOMMENDED_ARM}-screen4-gb32": Arm(f"{RECOMMENDED_ARM}-screen4-gb32", "snooze",
                                           {**COMPARE_ARMS[RECOMMENDED_ARM].settings, "screen_size": 4,
                                            "gen_batch_size": 32}),
    # at G=8 (the al-* regimes, batch 8: 64 rollouts a round): the recommended setting with a screen of 4 of 8 in
    # rounds of 16, or of 2 of 8 in rounds of 32 (does the composition seen at G=16 hold where groups are small?)
    f"{RECOMMENDED_ARM}-screen4-gb16": Arm(f"{RECOMMENDED_ARM}-screen4-gb16", "snooze",
                                           {**COMPARE_ARMS[RECOMMENDED_ARM].settings, "screen_size": 4,
                                            "gen_batch_size": 16}),
    f"{RECOMMENDED_ARM}-screen2-gb32": Arm(f"{RECOMMENDED_ARM}-screen2-gb32", "snooze",
                                           {**COMPARE_ARMS[RECOMMENDED_ARM].settings, "screen_size": 2,
                                            "gen_batch_size": 32}),
    # a screen of 3 of 8, its rounds at SchedulerConfig's default with screening: 22 screens hold 64 rollouts
    f"{RECOMMENDED_ARM}-screen3": Arm(f"{RECOMMENDED_ARM}-screen3", "snooze",
                                      {**COMPARE_ARMS[RECOMMENDED_ARM].settings, "screen_size": 3}),
    # the screen of 4 with snoozing at factor 2 (a screen's accuracy back, spent on more skipping?)
    "snooze-f2-carry-screen4": Arm("snooze-f2-carry-screen4", "snooze",
                                   {**COMPARE_ARMS[RECOMMENDED_ARM].settings, "options": {"factor": 2},
                                    "screen_size": 4}),
    # the ablation of issue 52's candidate (snooze-f1-carry-screen4): the screen alone on DAPO, and the candidate
    # without its carried surplus
    "dynamic_sampling-screen4": Arm("dynamic_sampling-screen4", "dynamic_sampling", screen=4),
    "snooze-f1-screen4": Arm("snooze-f1-screen4", "snooze", {"options": {"factor": 1}, "audit": 0.05}, screen=4),
}  # fmt: skip
"""DAPO, the recommended setting, the screening arms of ``snooze compare``, and one with larger rounds (here only)."""


def _read(run_dir: Path) -> dict[str, float] | None:
    """A finished run's rollouts, tokens, late avg@k and screens (``None`` when it has not finished)."""
    from snooze.trainer.loop import read_result

    if not (run_dir / "metrics.jsonl").exists():
        return None
    r = read_result(run_dir)
    t = r.totals
    return {
        "rollouts": t.get("total/cost_rollouts", math.nan),
        "tokens": math.nan if t.get("total/tokens_missing", 1) else t.get("total/cost_tokens", math.nan),
        "late": r.sampled_late if not math.isnan(r.sampled_late) else r.late_accuracy,
        "screened": t.get("total/screened", 0.0),
        "stopped": t.get("total/screen_stopped", 0.0),
        "trained": t.get("total/train_groups", math.nan),
        "rounds": t.get("total/rounds", math.nan),
    }


def cells(
    runs: Mapping[tuple[str, str, int], Mapping[str, float]], regimes: Sequence[str], arms: Sequence[str]
) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (regime, arm): DAPO's rollouts and tokens over the arm's (totals over the seeds both finished), the late
    gaps in points paired by seed, the share of screens stopped, the arm's groups trained on over DAPO's, DAPO's
    rollouts per group trained on over the arm's, and the arm's generation rounds over DAPO's. ``runs``:
    ``(regime, arm, seed) -> _read``."""
    out = {}
    for regime in regimes:
        for arm in arms:
            seeds = sorted(s for (g, a, s) in runs if g == regime and a == arm and (g, DAPO, s) in runs)
            if not seeds:
                continue
            mine, ref = [runs[regime, arm, s] for s in seeds], [runs[regime, DAPO, s] for s in seeds]

            def total(rows: Sequence[Mapping[str, float]], key: str) -> float:
                return sum(x[key] for x in rows)

            screened = total(mine, "screened")
            out[regime, arm] = {
                "seeds": seeds,
                "rollout_ratio": total(ref, "rollouts") / total(mine, "rollouts"),
                "token_ratio": total(ref, "tokens") / total(mine, "tokens"),
                "gaps": [100 * (m["late"] - r["late"]) for m, r in zip(mine, ref)],
                "stopped_share": total(mine, "stopped") / screened if screened else math.nan,
                "trained_ratio": total(mine, "trained") / total(ref, "trained"),
                "per_trained_ratio": (total(ref, "rollouts") / total(ref, "trained"))
                / (total(mine, "rollouts") / total(mine, "trained")),
                "rounds_ratio": total(mine, "rounds") / total(ref, "rounds"),
            }
    return out


def pooled(cell_map: Mapping[tuple[str, str], Mapping[str, Any]], arm: str) -> dict[str, Any]:
    """One arm over the regimes: geometric means of the ratios (trained groups and rounds too), the gap's mean and
    range over every regime and seed, the regimes' number."""
    mine = [c for (_, a), c in cell_map.items() if a == arm]
    gaps = [g for c in mine for g in c["gaps"]]

    def geo(key: str) -> float:
        xs = [c[key] for c in mine]
        return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan

    return {
        "regimes": len(mine),
        "runs": len(gaps),
        "rollout_ratio": geo("rollout_ratio"),
        "token_ratio": geo("token_ratio"),
        "trained_ratio": geo("trained_ratio"),
        "per_trained_ratio": geo("per_trained_ratio"),
        "rounds_ratio": geo("rounds_ratio"),
        "gap_mean": sum(gaps) / len(gaps) if gaps else math.nan,
        "gap_min": min(gaps, default=math.nan),
        "gap_max": max(gaps, default=math.nan),
    }


def table(cell_map: Mapping[tuple[str, str], Mapping[str, Any]], regimes: Sequence[str], arms: Sequence[str]) -> str:
    """The markdown table: one row per regime and arm, then one per arm pooled."""
    head = ["regime", "arm", "seeds", "DAPO/arm rollouts", "DAPO/arm tokens", "late gap, points: mean [min, max]"]
    head += ["stopped", "trained/DAPO", "per trained", "rounds/DAPO"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for regime in regimes:
        for arm in arms:
            c = cell_map.get((regime, arm))
            if c is None:
                continue
            g = c["gaps"]
            stopped = "-" if math.isnan(c["stopped_share"]) else f"{c['stopped_share']:.0%}"
            lines.append(
                f"| {regime} | {arm} | {len(c['seeds'])} | {c['rollout_ratio']:.2f}x | {c['token_ratio']:.2f}x | "
                f"{sum(g) / len(g):+.2f} [{min(g):+.2f}, {max(g):+.2f}] | {stopped} | {c['trained_ratio']:.2f} | "
                f"{c['per_trained_ratio']:.2f}x | {c['rounds_ratio']:.2f} |"
            )
    for arm in arms:
        p = pooled(cell_map, arm)
        if p["regimes"]:
            lines.append(
                f"| pooled ({p['regimes']} regimes) | {arm} | {p['runs']} runs | {p['rollout_ratio']:.2f}x | "
                f"{p['token_ratio']:.2f}x | {p['gap_mean']:+.2f} [{p['gap_min']:+.2f}, {p['gap_max']:+.2f}] | | "
                f"{p['trained_ratio']:.2f} | {p['per_trained_ratio']:.2f}x | {p['rounds_ratio']:.2f} |"
            )
    return "\n".join(lines)


def collect(out: Path, regimes: Sequence[str], arms: Sequence[str], seeds: Sequence[int]) -> dict[tuple, dict]:
    """Every finished run under ``out/<regime>/<arm>/seed<k>``."""
    runs = {}
    for regime in regimes:
        for arm in arms:
            for seed in seeds:
                got = _read(out / regime / arm / f"seed{seed}")
                if got is not None:
                    runs[regime, arm, seed] = got
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("/work/runs/screen_dev"))
    parser.add_argument("--regimes", default="al-rev,al-sort,al-mix")
    parser.add_argument("--arms", default=",".join([DAPO, RECOMMENDED_ARM, *SCREEN_ARMS]))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--table-only", action="store_true", help="print the table of the finished runs and exit")
    parser.add_argument("--list", action="store_true", help="print the regimes and arms and exit")
    args = parser.parse_args()
    if args.list:
        for name, p in ALARM_REGIMES.items():
            print(f"regime {name}: {p.tasks} pool {p.pool_size} batch {p.batch_size} G {p.group_size} steps {p.steps} "
                  f"lr {p.lr} T {p.temperature} rounds {p.max_gen_rounds} model {p.n_layer}x{p.d_model}")  # fmt: skip
        for name, arm in ARMS.items():
            print(f"arm {name}: {arm.policy} {dict(arm.settings)}")
        return
    if args.first_seed < 100:
        parser.error("--first-seed must be at least 100: seeds 0-4 are the report's, never the design's")
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    regimes, arms = args.regimes.split(","), args.arms.split(",")
    arms = [DAPO, *(a for a in arms if a != DAPO)]  # every ratio and gap pairs with DAPO
    unknown = sorted((set(regimes) - set(ALARM_REGIMES)) | (set(arms) - set(ARMS)))
    if unknown:
        parser.error(f"unknown regime(s) or arm(s): {unknown}; see --list")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    if not args.table_only:
        for seed in seeds:
            for name in regimes:
                profile = replace(ALARM_REGIMES[name], first_seed=seed)
                print(f"== {name} seed {seed}", flush=True)
                run_compare(args.out / name, profile, [ARMS[a] for a in arms], 1, jobs=args.jobs, threads=args.threads)
    print(table(cells(collect(args.out, regimes, arms, seeds), regimes, arms), regimes, arms))


if __name__ == "__main__":
    main()
