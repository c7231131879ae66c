"""What ``SnoozeGRPOTrainer``'s multi-process layout costs: pad groups generated, inert rows trained.

The real :class:`~snooze.Scheduler` and the real layout (``snooze.integrations.trl._dist``) on
synthetic rewards: each prompt has a pass rate drawn once from Beta(a, b), each completion passes
with it. Per configuration it prints, over the run:

- ``gen_pad``: inert groups generated / real groups generated (rounds that do not split evenly);
- ``train_pad``: rows all ranks train on / rows of kept groups (kept groups stay on the rank that
  generated them, and every rank is padded to the largest rank's rows);
- ``contiguous``: the same with candidates laid out in contiguous runs instead of dealt in turn
  (the same scheduler and rewards: only the layout differs).

    python benchmarks/trl_ranks.py                 # the default table
    python benchmarks/trl_ranks.py --steps 400 --world 8 --G 8 --batch 64
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np

import snooze
from snooze.integrations.trl import _dist as dist


def simulate(
    world: int, G: int, batch: int, steps: int, pool: int, beta: tuple[float, float], seed: int, contiguous: bool
) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    pass_rate = rng.beta(*beta, size=pool)
    cfg = snooze.SchedulerConfig(
        batch_size=batch, group_size=G, options=snooze.SnoozeOptions(factor=5), max_gen_rounds=8
    )
    sched = snooze.Scheduler({"d": snooze.Source.from_ids("d", np.arange(pool))}, cfg, seed=seed)
    real = pad = kept_rows = trained_rows = 0
    for _ in range(steps):
        spread: dict[int, np.ndarray] = {}
        while sched.wants_round():
            cands = sched.propose()
            if not cands:
                break
            layout = dist.round_layout(len(cands), G, world)
            if contiguous:
                layout = dataclasses.replace(layout, slots=np.arange(layout.slots.shape[0]))
            real, pad = real + len(cands), pad + layout.pad_groups
            spread.update((c.ticket, layout.spread(i)) for i, c in enumerate(cands))
            p = pass_rate[np.array([c.id for c in cands])]
            sched.report(cands, (rng.random((len(cands), G)) < p[:, None]).astype(np.float64))
        b = sched.finish_step()
        counts = sum((spread[c.ticket] for c in b.candidates), np.zeros(world, dtype=np.int64))
        kept_rows += int(counts.sum())
        trained_rows += world * dist.pad_rows_to(counts, 1, floor=G)
    return {"gen_pad": pad / real, "train_pad": trained_rows / max(kept_rows, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--pool", type=int, default=20_000)
    ap.add_argument("--beta", type=float, nargs=2, default=(0.5, 0.5), help="pass rates ~ Beta(a, b)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--world", type=int, nargs="*", default=[2, 4, 8])
    ap.add_argument("--G", type=int, nargs="*", default=[8, 16])
    ap.add_argument("--batch", type=int, nargs="*", default=[32, 128, 512])
    a = ap.parse_args()
    print(f"{'world':>5} {'G':>3} {'batch':>5}  {'gen_pad':>8} {'train_pad':>9} {'contiguous':>10}")
    for world in a.world:
        for G in a.G:
            for batch in a.batch:
                dealt, runs = (
                    simulate(world, G, batch, a.steps, a.pool, tuple(a.beta), a.seed, contiguous)
                    for contiguous in (False, True)
                )
                row = f"{world:>5} {G:>3} {batch:>5}  {dealt['gen_pad']:>8.3f} {dealt['train_pad']:>9.3f}"
                print(f"{row} {runs['train_pad']:>10.3f}", flush=True)


if __name__ == "__main__":
    main()
