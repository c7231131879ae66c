"""Synthetic ``snooze compare`` runs: metrics.jsonl files shaped like the design note's figures 1-3."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

B = 16  # signal groups per training batch
MAX_ROUNDS = 8

# Signal rate (share of generated groups with signal) at the start and end of training, per policy.
SIGNAL_RATE = {"grpo": (0.8, 0.3), "dynamic_sampling": (0.8, 0.15), "filter": (0.8, 0.6), "snooze": (0.8, 0.5)}
# Late share of the hard stratum in the batch, per fig3 arm (quota holds the 0.5 target).
HARD_SHARE = {"fig3-filter": 0.8, "fig3-snooze": 0.6, "fig3-snooze-quota": 0.5}


def _step_gen(rng: np.random.Generator, rate: float, policy: str) -> tuple[int, int]:
    """(rounds, signal groups kept) of one step: roll out B groups per round until B have signal."""
    if policy == "grpo":
        return 1, int(rng.binomial(B, rate))
    signal, rounds = 0, 0
    while signal < B and rounds < MAX_ROUNDS:
        signal += int(rng.binomial(B, rate))
        rounds += 1
    return rounds, min(signal, B)


def write_run(run_dir: Path, arm: str, seed: int, steps: int = 60, eval_every: int = 10) -> Path:
    """Write a plausible metrics.jsonl for ``arm`` into ``run_dir`` and return the directory."""
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    policy = arm.removeprefix("fig3-").removesuffix("-quota")
    start, end = SIGNAL_RATE.get(policy, (0.8, 0.5))
    totals = {"total/gen_groups": 0, "total/rollouts": 0, "total/train_groups": 0, "total/rounds": 0}
    lines = [{"step": 0, "eval/accuracy": 0.40 + 0.01 * seed}]
    for t in range(1, steps + 1):
        rate = start + (end - start) * t / steps
        rounds, kept = _step_gen(rng, rate, policy)
        totals["total/gen_groups"] += rounds * B
        totals["total/rollouts"] += rounds * B * 8
        totals["total/train_groups"] += kept
        totals["total/rounds"] += rounds
        rec = {
            "step": t,
            "gen/groups": rounds * B,
            "gen/rollouts": rounds * B * 8,
            "gen/rounds": rounds,
            "train/groups": kept,
            "efficiency": kept / (rounds * B),
            "train/loss": float(rng.normal()),
            "time/elapsed_s": 0.2 * t,
            **totals,
        }
        if arm in HARD_SHARE:
            hard = 0.5 + (HARD_SHARE[arm] - 0.5) * t / steps + (rng.normal(0, 0.06) if "quota" not in arm else 0.0)
            hard = float(np.clip(hard, 0.0, 1.0))
            rec |= {"dataset/add-hard/batch_frac": hard, "dataset/add-easy/batch_frac": 1.0 - hard}
        if t % eval_every == 0:
            rec["eval/accuracy"] = 0.40 + 0.25 * (1 - np.exp(-t / 25)) + float(rng.normal(0, 0.01))
        lines.append(rec)
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in lines) + "\n", encoding="utf-8")
    return run_dir


@pytest.fixture
def make_runs(tmp_path: Path) -> Callable[..., dict[str, list[Path]]]:
    """Factory: ``make_runs(arms, seeds=2)`` -> {arm: [run dir per seed]} under tmp_path."""

    def make(arms: tuple[str, ...], seeds: int = 2, steps: int = 60) -> dict[str, list[Path]]:
        return {a: [write_run(tmp_path / "runs" / a / f"seed{s}", a, s, steps) for s in range(seeds)] for a in arms}

    return make
