"""The replay's estimate of DAPO's rounds per step from a plain GRPO log, against a paired DAPO run.

    nice -n 19 snooze compare --out runs/dapo-rounds --profile default --seeds 3 \\
        --arms grpo,dynamic_sampling --jobs 1 --threads 1
    PYTHONPATH=src python benchmarks/dapo_rounds_truth.py runs/dapo-rounds

For each seed: the verdict's estimate from the ``grpo`` arm's reward log (each window's share of groups with
signal, :func:`snooze.analysis.stepsim.dapo_rounds`, at the run's batch and round limit), against the rounds the
``dynamic_sampling`` arm of the same seed took in the same steps (its reward log: groups per step over the
generation batch). Early and late are the first and last 10% of the steps. Prints one row per seed and window,
the estimate over the truth, and the mean of the ratios.

A diagnostic beside it, ``DAPO at equal training``: DAPO's rounds over its steps that had trained on as many signal
groups as the GRPO run had in the window (GRPO trains on every group, so it reaches a DAPO run's model state
later, in steps). It asks whether the estimate holds on a model trained as far, where the paired step cannot.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from snooze.analysis.logrun import logged_run
from snooze.analysis.verdict import dapo_rounds_of
from snooze.core.classify import SIGNAL, classify
from snooze.core.config import SchedulerConfig
from snooze.logs import REWARDS_FILE, read_reward_log


def _estimate(path: Path) -> dict:
    log = read_reward_log(path)
    cfg = SchedulerConfig(group_size=log.group_size, reward_range=log.header.reward_range)
    return dapo_rounds_of(log, logged_run(log), cfg)


def _signal_per_step(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Steps, groups and signal groups per step of a log."""
    log = read_reward_log(path)
    cfg = SchedulerConfig(group_size=log.group_size, reward_range=log.header.reward_range)
    signal = classify(log.rewards, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol) == SIGNAL
    steps, index = np.unique(log.steps, return_inverse=True)
    return steps, np.bincount(index), np.bincount(index, weights=signal)


def _at_equal_training(grpo: Path, dapo: Path, first: int, last: int) -> float:
    """DAPO's mean rounds over the steps whose trained signal groups lie in GRPO's over steps first..last."""
    g_steps, _, g_signal = _signal_per_step(grpo)
    d_steps, d_groups, d_signal = _signal_per_step(dapo)
    log = read_reward_log(dapo)
    batch, gen = log.header.batch_size, log.header.gen_batch_size
    g_cum = np.cumsum(g_signal)  # signal groups GRPO trained on by the end of each step
    lo, hi = g_cum[g_steps < first][-1] if (g_steps < first).any() else 0.0, g_cum[g_steps <= last][-1]
    d_cum = np.cumsum(np.minimum(d_signal, batch))  # DAPO trains on batch_size of them a step
    mine = (d_cum > lo) & (d_cum <= hi)
    return float(np.mean(-(-d_groups[mine] // gen))) if mine.any() else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, help="a snooze compare output folder with grpo and dynamic_sampling arms")
    args = parser.parse_args()
    rows = []
    for seed_dir in sorted((args.runs / "grpo").glob("seed*")):
        est = _estimate(seed_dir / REWARDS_FILE)
        dapo = args.runs / "dynamic_sampling" / seed_dir.name / REWARDS_FILE
        truth = _estimate(dapo)
        for window in ("early", "late"):
            e, t = est[window]["rounds"], truth[window]["logged_rounds"]
            first, last = est[window]["first_step"], est[window]["last_step"]
            equal = _at_equal_training(seed_dir / REWARDS_FILE, dapo, first, last)
            rows.append({"seed": seed_dir.name, "window": window, "steps": [first, last],
                         "grpo_signal_share": est[window]["signal_share"], "estimate": e, "dapo_rounds": t,
                         "ratio": e / t, "dapo_at_equal_training": equal, "ratio_equal": e / equal})  # fmt: skip
    print(
        f"{'seed':<7}{'window':<8}{'steps':>10}{'GRPO signal':>13}{'estimate':>10}{'DAPO ran':>10}{'ratio':>8}"
        f"{'DAPO at equal training':>24}{'ratio':>8}"
    )
    for r in rows:
        steps = f"{r['steps'][0]}..{r['steps'][1]}"
        print(
            f"{r['seed']:<7}{r['window']:<8}{steps:>10}{r['grpo_signal_share']:>13.3f}{r['estimate']:>10.2f}"
            f"{r['dapo_rounds']:>10.2f}{r['ratio']:>8.3f}{r['dapo_at_equal_training']:>24.2f}{r['ratio_equal']:>8.3f}"
        )
    for window in ("early", "late"):
        ratios = [r["ratio"] for r in rows if r["window"] == window]
        equal = [r["ratio_equal"] for r in rows if r["window"] == window]
        print(
            f"{window}: mean ratio {np.mean(ratios):.3f} (seeds {min(ratios):.3f} to {max(ratios):.3f}); "
            f"at equal training {np.mean(equal):.3f} ({min(equal):.3f} to {max(equal):.3f})"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
