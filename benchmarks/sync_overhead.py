"""The synchronous step loop at the batch sizes of real runs, timed per step: what delayed feedback may not slow.

    python benchmarks/sync_overhead.py --steps 400                  # one tree: the JSON line of figures
    python benchmarks/versus.py --script benchmarks/sync_overhead.py --before /tmp/snooze-before --after . \\
        --runs 7 -- --steps 400                                     # two trees side by side, pairs interleaved

``sched.step(rollout_fn)`` over two datasets of 5,000 prompts, ``policy="snooze"`` (factor 5), batch 16, G 8,
the audit at its default, rewards looked up from a table made before the timer (a prompt's kind is fixed,
so snoozes, skips and refills happen as in a run). A few steps warm up first. Small batches are where the
scheduler's fixed cost per call shows (``benchmarks/scale.py`` measures 1,000 candidates a step).
The last line is one JSON object: ``us_per_step`` (median over steps; ``us_per_step_p10``, its 10th
percentile, moves least on a shared machine), ``us_per_round`` (median over steps of the step's time over its
rounds), ``total_s``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import snooze

G = 8
KINDS = np.array([[0.0, 1.0] * (G // 2), [1.0] * G, [0.0] * G])  # signal, too easy, too hard


def _scheduler(prompts: int, seed: int) -> tuple[snooze.Scheduler, list[np.ndarray]]:
    names = ("math", "code")
    data = {n: snooze.Source.from_ids(n, np.arange(prompts)) for n in names}
    cfg = snooze.SchedulerConfig(batch_size=16, group_size=G, options=snooze.SnoozeOptions(factor=5), max_gen_rounds=8)
    rng = np.random.default_rng(seed)
    kinds = [rng.choice(3, size=prompts, p=(0.35, 0.55, 0.10)) for _ in names]  # late in a run: mostly easy
    return snooze.Scheduler(data, cfg, seed=seed), kinds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=400, help="timed steps")
    p.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    p.add_argument("--prompts", type=int, default=5000, help="prompts per dataset (2 datasets)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    sched, kinds = _scheduler(args.prompts, args.seed)

    def rollout(c: snooze.Candidates) -> np.ndarray:
        return KINDS[np.where(c.ds == 0, kinds[0][c.row], kinds[1][c.row])]  # both datasets have every row

    per_step, per_round = [], []
    t0 = time.perf_counter()
    for i in range(args.warmup + args.steps):
        start = time.perf_counter()
        batch = sched.step(rollout)
        took = time.perf_counter() - start
        if i >= args.warmup:
            per_step.append(took)
            per_round.append(took / max(1, batch.metrics["gen/rounds"]))
    out = {
        "us_per_step": statistics.median(per_step) * 1e6,
        "us_per_step_p10": float(np.quantile(per_step, 0.1)) * 1e6,  # the least disturbed by a busy machine
        "us_per_round": statistics.median(per_round) * 1e6,
        "total_s": time.perf_counter() - t0,
        "steps": args.steps,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
