"""Rebuild the step loop (SPEC section 4) over a replayed encounter stream.

A replay's skip mask says which logged encounters a policy would not have rolled out. In the real
run those skips are cheap: the stream moves on and the step keeps generating rounds of
``gen_batch_size`` until ``batch_size`` signal groups are in, discarding the last round's surplus.
Walking the *kept* lines of the log in order through that loop gives the generation the policy would
have spent for each step, surplus included, which the raw count of skipped groups cannot see.

Assumes the stream mode without carried surplus (the DAPO default) and that the log's line order is
the encounter order (true for the scheduler's streams, where a skip is an encounter).
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np

__all__ = ["simulate_steps", "infer_gen_size"]


def infer_gen_size(steps: np.ndarray) -> int:
    """Generation batch size of a DAPO log: the gcd of the groups logged per step (every round is full)."""
    _, per_step = np.unique(steps, return_counts=True)
    return int(reduce(math.gcd, per_step.tolist(), 0))


def simulate_steps(signal: np.ndarray, batch_size: int, gen_size: int, max_gen_rounds: int = 1_000_000) -> np.ndarray:
    """Cumulative generated groups after each complete step, ``int64 [S]``.

    ``signal``: ``bool [M]``, whether each kept line (in stream order) carries signal. A step ends
    when ``batch_size`` signal groups are in or after ``max_gen_rounds`` rounds; the walk stops when
    the lines run out before a step completes.
    """
    n_rounds = signal.shape[0] // gen_size  # a trailing partial round cannot complete a step
    per_round = signal[: n_rounds * gen_size].reshape(n_rounds, gen_size).sum(axis=1)  # [R]
    cumulative: list[int] = []
    r, spent = 0, 0
    while r < n_rounds:
        got = rounds = 0
        while got < batch_size and rounds < max_gen_rounds and r < n_rounds:
            got += int(per_round[r])
            r += 1
            rounds += 1
        if got < batch_size and rounds < max_gen_rounds:
            break  # ran out of log mid-step
        spent += rounds * gen_size
        cumulative.append(spent)
    return np.asarray(cumulative, dtype=np.int64)
