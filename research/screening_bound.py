"""What screening rollouts could save on a run's own draws, from its reward logs (SPEED-RL's idea, arXiv 2506.09016).

Screening rolls a prompt out ``k`` times first and generates the other ``G - k`` rollouts only when
the ``k`` disagree (then the group surely has signal); when they agree the prompt is dropped after
``k`` rollouts. A group's rollouts are independent given the model, so the first ``k`` rewards of a
logged group are a valid screen of it: each logged group is replayed as ``k`` rollouts (screen
agreed) or ``G`` (screen disagreed, one signal group found). What is printed is the generation per
signal group, in groups of ``G`` rollouts, with and without the screen, and the saving against a
baseline run (DAPO's logs)::

    python research/screening_bound.py --baseline runs/compare/dynamic_sampling/seed*/rewards.jsonl \\
        -- runs/compare/dynamic_sampling/seed*/rewards.jsonl runs/compare/snooze/seed*/rewards.jsonl

Optimistic for screening in two ways, so it bounds it: rounds are sized to need (no round ends with
surplus: the cost of a signal group is what it takes on average to find one), and the draws are the
logged run's, so what the screen drops does not change which prompts come up later.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np

from snooze.logs import read_reward_log


def screened(rewards: np.ndarray, k: int) -> tuple[int, int]:
    """``(rollouts, signal groups found)`` of the groups ``rewards`` ``[N, G]`` replayed with a screen of
    their first ``k`` rollouts (``k = G``: no screen, every group generated in full)."""
    G = rewards.shape[1]
    if not 1 <= k <= G:
        raise ValueError(f"k={k}: must be in 1..{G}")
    screen = rewards[:, :k]
    kept = screen.max(axis=1) != screen.min(axis=1)  # disagreed: the rest is generated, the group has signal
    return int(np.where(kept, G, k).sum()), int(kept.sum())  # k = G: every group in full, its signal groups


def groups_per_signal(rewards: np.ndarray, k: int) -> float:
    """Generation per signal group found, in groups of ``G`` rollouts (infinite when none is found)."""
    rollouts, found = screened(rewards, k)
    return rollouts / rewards.shape[1] / found if found else math.inf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline", type=Path, nargs="+", required=True, help="the baseline's rewards.jsonl files (pooled)"
    )
    parser.add_argument("--screens", default="2,3,4", help="screen sizes k to replay (comma-separated)")
    parser.add_argument("logs", type=Path, nargs="+", help="rewards.jsonl files, each replayed on its own")
    args = parser.parse_args()
    base_rewards = np.concatenate([read_reward_log(p).rewards for p in args.baseline])
    G = base_rewards.shape[1]
    base = groups_per_signal(base_rewards, G)
    try:
        ks = [int(k) for k in args.screens.split(",")]
    except ValueError:
        parser.error(f"--screens {args.screens!r}: must be comma-separated whole numbers")
    if not all(2 <= k < G for k in ks):
        parser.error(
            f"--screens {args.screens!r}: each screen size must be in 2..{G - 1} "
            f"(one rollout never disagrees; the logs' groups have {G})"
        )
    print(f"baseline: {base:.2f} groups generated per signal group ({len(args.baseline)} logs)")
    print(
        "log | no screen | "
        + " | ".join(f"screen of {k}" for k in ks)
        + "   (baseline's groups per signal group / this one's)"
    )
    for path in args.logs:
        rewards = read_reward_log(path).rewards
        cols = [base / groups_per_signal(rewards, k) for k in [G, *ks]]
        print(f"{path} | " + " | ".join(f"{c:.2f}x" for c in cols))


if __name__ == "__main__":
    main()
