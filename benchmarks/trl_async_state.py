"""What ``SnoozeAsyncGRPOTrainer`` pays to keep the scheduler's state at each step's close (for the checkpoint TRL
writes after its dataloader has read one step ahead): one ``state_dict()`` and a deep copy a step, three kept.

The real :class:`~snooze.Scheduler` (``policy="snooze"``, batch 64, G 8) over pools of 10k to 1M prompts, after a
few steps on synthetic rewards; it prints the time of one state and copy (mean of ``--reps``) and its size.

    python benchmarks/trl_async_state.py
    python benchmarks/trl_async_state.py --sizes 1000000 --reps 20
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np

import snooze


def measure(n: int, reps: int) -> tuple[float, float]:
    """Seconds per state and copy, and the megabytes of its arrays, for a pool of ``n`` prompts."""
    config = snooze.SchedulerConfig(batch_size=64, group_size=8, policy="snooze", options={"factor": 1})
    sched = snooze.Scheduler({"d": snooze.Source.from_ids("d", np.arange(n))}, config)
    rng = np.random.default_rng(0)
    for _ in range(3):
        cands = sched.propose()
        sched.report(cands, (rng.random((len(cands), 8)) < 0.5).astype(np.float64))
        sched.finish_step()
    start = time.perf_counter()
    for _ in range(reps):
        state = copy.deepcopy(sched.state_dict())
    took = (time.perf_counter() - start) / reps
    return took, sum(a.nbytes for a in state["arrays"].values()) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 1_000_000], help="pool sizes")
    ap.add_argument("--reps", type=int, default=5, help="states taken per size (the mean is printed)")
    a = ap.parse_args()
    print(f"{'prompts':>9} {'ms':>7} {'MB':>6}")
    for n in a.sizes:
        took, mb = measure(n, a.reps)
        print(f"{n:>9} {took * 1000:>7.1f} {mb:>6.1f}")


if __name__ == "__main__":
    main()
