"""How well a prompt's own past predicts its next group, from reward logs: the ceiling of history-based skipping.

A skip rule that decides from a prompt's past groups (the design note's snooze, GRESO, ``predictive``, a
Beta posterior over its pass rate) can only be as precise as the past is informative. This reads
reward logs and, for every group of a prompt that had an earlier group, records what the rule could
have known: the earlier group's count of correct rollouts (0..G) and how many training steps ago it
was generated. It prints the share of such groups with signal per cell of those two, then the
*ceiling*: keeping the cells best first (chosen after seeing the outcomes, so optimistic), the
precision (signal share) of the groups kept against the share of encounters kept.

It also prints the precision a step needs for a target saving. With DAPO's rounds (``gen_batch_size``
= ``batch_size`` = B prompts a round, surplus discarded, at most R rounds) a step costs B x its
rounds, and the rounds needed depend on the chance ``r`` that a generated group has signal (computed
exactly, groups independent); with the surplus carried to the next step (``carry_surplus``) a step
costs about B / r groups::

    python research/history_ceiling.py /tmp/fresh-main/runs/compare/dynamic_sampling/seed*/rewards.jsonl
    python research/history_ceiling.py --needed --dapo-groups 21664 --steps 300
    python research/history_ceiling.py --by-level default \
        /tmp/fresh-main/runs/compare/dynamic_sampling/seed*/rewards.jsonl

``--by-level PROFILE`` asks the same of evidence shared between prompts instead: each group's feature is
the signal share of the groups of its task *level* (the built-in tasks' difficulty, rebuilt from the
profile's pools) generated in the ``--window`` steps before, bucketed by tenths; every group counts,
first looks too. It is what a rule that pooled fresh evidence over prompts of one difficulty could know.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from snooze.core.classify import SIGNAL, classify_groups
from snooze.logs import read_reward_log

AGE_EDGES = (0, 5, 15, 35, 10**9)
"""Steps since the prompt's previous group: [0, 5), [5, 15), [15, 35), [35, ...)."""


def previous_group(index: np.ndarray) -> np.ndarray:
    """For each group (log order), the position of the same prompt's group before it; -1 for a first look."""
    order = np.argsort(index, kind="stable")  # each prompt's groups together, in log order
    prev = np.full(index.shape[0], -1)
    same = index[order][1:] == index[order][:-1]
    prev[order[1:][same]] = order[:-1][same]
    return prev


def encounters(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(previous correct count, steps since it, signal)`` for every group whose prompt had an earlier one."""
    log = read_reward_log(path)
    index, _ = log.prompt_index()
    correct = np.rint(log.rewards.sum(axis=1)).astype(int)
    signal = classify_groups(log.rewards, (0.0, 1.0)) == SIGNAL
    prev = previous_group(index)
    seen = np.flatnonzero(prev >= 0)
    return correct[prev[seen]], log.steps[seen] - log.steps[prev[seen]], signal[seen]


def cells(prev: np.ndarray, age: np.ndarray, sig: np.ndarray, group_size: int) -> list[tuple[int, int, int, float]]:
    """``(previous count, age bucket, encounters, signal share)`` per non-empty cell."""
    bucket = np.searchsorted(AGE_EDGES, age, side="right") - 1
    out = []
    for k in range(group_size + 1):
        for b in range(len(AGE_EDGES) - 1):
            m = (prev == k) & (bucket == b)
            if m.any():
                out.append((k, b, int(m.sum()), float(sig[m].mean())))
    return out


def ceiling(table: list[tuple[int, int, int, float]]) -> list[tuple[float, float]]:
    """``(share of encounters kept, precision of the kept)``, keeping the cells best first."""
    order = sorted(table, key=lambda c: -c[3])
    total = sum(c[2] for c in order)
    kept = hits = 0.0
    out = []
    for _, _, n, rate in order:
        kept, hits = kept + n, hits + n * rate
        out.append((kept / total, hits / kept))
    return out


def expected_rounds(r: float, batch: int, max_rounds: int) -> float:
    """Expected rounds of ``batch`` groups until ``batch`` have signal (each with chance ``r``), capped."""
    from math import comb

    pmf = np.array([comb(batch, k) * r**k * (1 - r) ** (batch - k) for k in range(batch + 1)])
    state = np.zeros(batch + 1)  # signal groups collected so far (capped at batch)
    state[0] = 1.0
    rounds = 0.0
    for _ in range(max_rounds):
        rounds += state[:batch].sum()
        nxt = np.zeros(batch + 1)
        nxt[batch] = state[batch]
        for have in range(batch):
            for k, pk in enumerate(pmf):
                nxt[min(batch, have + k)] += state[have] * pk
        state = nxt
    return rounds


def level_encounters(path: Path, level_of: dict[str, int], window: int) -> tuple[np.ndarray, np.ndarray]:
    """``(recent signal share of the group's level, bucketed 0..9, or -1 with no recent group; signal)`` per group."""
    log = read_reward_log(path)
    signal = classify_groups(log.rewards, (0.0, 1.0)) == SIGNAL
    key = np.array([hash((d, level_of[str(i)])) for d, i in zip(log.datasets, log.ids)])
    feature = np.full(len(signal), -1)
    steps = log.steps
    for s in np.unique(steps):
        now = np.flatnonzero(steps == s)
        recent = (steps >= s - window) & (steps < s)
        if not recent.any():
            continue
        for k in np.unique(key[now]):
            m = recent & (key == k)
            if m.any():
                feature[now[key[now] == k]] = min(int(signal[m].mean() * 10), 9)
    return feature, signal


def _levels(profile_name: str) -> dict[str, int]:
    from snooze.experiments.compare import _data
    from snooze.experiments.profiles import PROFILES

    pools, _, _ = _data(PROFILES[profile_name], PROFILES[profile_name].tasks)
    return {str(r["id"]): int(r["level"]) for recs in pools.values() for r in recs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("logs", type=Path, nargs="*", help="rewards.jsonl files (pooled)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--needed", action="store_true", help="print the precision needed per saving instead")
    parser.add_argument("--dapo-groups", type=float, default=21664, help="DAPO's generated groups (for --needed)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-rounds", type=int, default=8)
    parser.add_argument(
        "--by-level",
        metavar="PROFILE",
        default=None,
        help="evidence pooled by task level (the profile the logs come from)",
    )
    parser.add_argument("--window", type=int, default=3, help="with --by-level: steps of evidence before each group")
    args = parser.parse_args()
    if args.by_level:
        level_of = _levels(args.by_level)
        parts = [level_encounters(p, level_of, args.window) for p in args.logs]
        feature, sig = (np.concatenate([x[i] for x in parts]) for i in range(2))
        table = [(int(f), 0, int((feature == f).sum()), float(sig[feature == f].mean())) for f in np.unique(feature)]
        print(
            f"{len(sig):,} groups, signal share {sig.mean():.3f}; "
            f"by the level's signal share over the {args.window} steps before:"
        )
        for f, _, n, rate in table:
            print(f"  {'none' if f < 0 else f'{f / 10:.1f}-{(f + 1) / 10:.1f}'}: {n} groups, {rate:.3f} with signal")
        print("ceiling: share of groups kept -> precision of the kept (best cells first)")
        for share, precision in ceiling(table):
            print(f"  {share:.3f} -> {precision:.3f}")
        return
    if args.needed:
        print("signal chance r | groups, DAPO's rounds | DAPO/arm | groups, surplus carried | DAPO/arm")
        for r in (0.4, 0.5, 0.6, 0.665, 0.7, 0.8, 0.83, 0.9, 0.95, 0.957, 0.98):
            fixed = args.steps * args.batch_size * expected_rounds(r, args.batch_size, args.max_rounds)
            carried = args.steps * args.batch_size / r
            print(
                f"{r:.3f} | {fixed:,.0f} | {args.dapo_groups / fixed:.2f}x | "
                f"{carried:,.0f} | {args.dapo_groups / carried:.2f}x"
            )
        return
    parts = [encounters(p) for p in args.logs]
    prev, age, sig = (np.concatenate([x[i] for x in parts]) for i in range(3))
    table = cells(prev, age, sig, args.group_size)
    print(f"{len(sig):,} repeat encounters, signal share {sig.mean():.3f}")
    names = [
        f"{AGE_EDGES[b]}-{AGE_EDGES[b + 1] - 1}" if AGE_EDGES[b + 1] < 10**9 else f"{AGE_EDGES[b]}+"
        for b in range(len(AGE_EDGES) - 1)
    ]
    print("previous correct | " + " | ".join(f"{n} steps ago" for n in names))
    for k in range(args.group_size + 1):
        row = {b: (n, rate) for kk, b, n, rate in table if kk == k}
        print(f"{k} | " + " | ".join(f"{row[b][1]:.2f} ({row[b][0]})" if b in row else "-" for b in range(len(names))))
    print("ceiling: share of encounters kept -> precision of the kept (best cells first)")
    for share, precision in ceiling(table):
        print(f"  {share:.3f} -> {precision:.3f}")


if __name__ == "__main__":
    main()
