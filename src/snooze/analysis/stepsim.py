"""Rebuild the step loop (docs/concepts.md, "The step loop") over a replayed encounter stream.

A replay's skip mask says which logged encounters a policy would not have rolled out. In the real
run those skips are cheap: the stream moves on and the step keeps generating rounds of
``gen_batch_size`` until ``batch_size`` signal groups are in, discarding the last round's surplus.
Walking the *kept* lines of the log in order through that loop gives the generation the policy would
have spent for each step, surplus included, which the raw count of skipped groups cannot see.

Assumes the stream mode without carried surplus (the DAPO default) and that the log's line order is
the encounter order within each dataset (true for the scheduler's streams, where a skip is an
encounter). Across datasets the stream mode keeps each dataset's share of the *issued* candidates
at its weight and replaces a skipped prompt from the same dataset, so the kept lines are re-interleaved
by each dataset's share of the logged groups (:func:`interleave_kept`); dropping the skipped lines in
place would shift the mix toward the datasets that are skipped less.
"""

from __future__ import annotations

import math
from functools import reduce

import numpy as np

from snooze._kit.checks import as_int

__all__ = [
    "simulate_steps",
    "infer_gen_size",
    "interleave_kept",
    "expected_rounds",
    "dapo_rounds",
    "logged_rounds",
    "WINDOW",
]


def infer_gen_size(steps: np.ndarray) -> int:
    """Generation batch size of a DAPO log: the gcd of the groups logged per step (every round is full)."""
    _, per_step = np.unique(steps, return_counts=True)
    return int(reduce(math.gcd, per_step.tolist(), 0))


def simulate_steps(signal: np.ndarray, batch_size: int, gen_size: int, max_gen_rounds: int = 1_000_000) -> np.ndarray:
    """Cumulative generated groups after each complete step, ``int64 [S]``.

    ``signal``: ``bool [M]``, whether each kept line (in stream order) carries signal. A step ends
    when ``batch_size`` signal groups are in or after ``max_gen_rounds`` rounds; the walk stops when
    the lines run out before a step completes. Sizes below 1 are a :class:`~snooze.ConfigError`: with
    them a step would take no line and the walk would never end.
    """
    for name, value in (("batch_size", batch_size), ("gen_size", gen_size), ("max_gen_rounds", max_gen_rounds)):
        as_int(value, name, 1)
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
        if rounds == 0:  # pragma: no cover - the checks above make every step take a round
            break
        spent += rounds * gen_size
        cumulative.append(spent)
    return np.asarray(cumulative, dtype=np.int64)


def interleave_kept(dataset: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """Order of the kept lines as the stream mode would issue them: ``int64 [K]`` indices into the log.

    ``dataset``: ``int [N]`` dataset index of each logged line; ``kept``: ``bool [N]``. Each dataset's
    kept lines stay in log order; datasets are merged so each holds its share of the logged lines
    (line ``r`` of a dataset with share ``s`` goes at virtual position ``(r + 1) / s``).
    """
    counts = np.bincount(dataset)  # [D] logged lines per dataset
    share = counts / counts.sum()  # [D]
    idx = np.flatnonzero(kept)  # [K]
    d = dataset[idx]
    one_hot = np.zeros((idx.shape[0], counts.shape[0]), dtype=np.int64)
    one_hot[np.arange(idx.shape[0]), d] = 1
    rank = (np.cumsum(one_hot, axis=0) - 1)[np.arange(idx.shape[0]), d]  # [K] rank within its dataset
    return idx[np.argsort((rank + 1) / share[d], kind="stable")]


WINDOW = 0.1
"""Share of the logged steps in each of the early and late windows (at least one step): the last 10% is the
window of the regime criterion "DAPO's rounds climb to at least 2" (docs/results.md)."""


def expected_rounds(p: float, batch_size: int, gen_size: int, max_gen_rounds: int) -> float:
    """Expected rounds of one DAPO step when each generated group has signal with probability ``p``.

    A step takes rounds of ``gen_size`` groups until ``batch_size`` of them have signal or ``max_gen_rounds``
    rounds are spent, so ``P(rounds > r) = P(Binomial(r * gen_size, p) < batch_size)`` for ``r <
    max_gen_rounds`` and ``E[rounds] = sum_r P(rounds > r)``. Computed exactly, in log space (no underflow
    at thousands of groups)."""
    total = 1.0  # P(rounds > 0)
    k = np.arange(batch_size, dtype=np.float64)  # [B] counts below the batch
    for r in range(1, max_gen_rounds):
        n = r * gen_size
        if p <= 0.0 or n < batch_size:
            total += 1.0
            continue
        if p >= 1.0:
            break  # every round from here on fills the batch
        kk = k[k <= n]
        steps = np.log((n - kk[:-1]) / (kk[:-1] + 1)) + math.log(p / (1.0 - p))  # log pmf(k + 1) - log pmf(k)
        log_pmf = n * math.log1p(-p) + np.concatenate([[0.0], np.cumsum(steps)])
        total += float(min(1.0, np.exp(log_pmf).sum()))
    return total


def dapo_rounds(
    steps: np.ndarray, signal: np.ndarray, batch_size: int, gen_size: int, max_gen_rounds: int
) -> dict[str, dict[str, float | int]]:
    """DAPO's rounds per step early and late in a logged run, from each window's share of groups with signal.

    ``steps``: ``int [N]`` step of each logged group (in log order); ``signal``: ``bool [N]``. The early window
    is the first :data:`WINDOW` of the logged steps, the late one the last (at least one step each); in each,
    the share ``p`` of groups with signal is pooled over the window, and DAPO's rounds are
    :func:`expected_rounds` at ``p``. For a plain GRPO log this is DAPO's rounds on that run's model: a DAPO
    run of as many steps trains further and wastes more late (``docs/offline-analysis.md`` measures how much),
    so it is a floor there; for a log of a run that skipped prompts it is a floor too (its skipped
    encounters, mostly too easy, are not in it).
    Returns ``{"early": ..., "late": ...}``, each ``first_step``, ``last_step``, ``groups``, ``signal_share``,
    ``rounds``."""
    for name, value in (("batch_size", batch_size), ("gen_size", gen_size), ("max_gen_rounds", max_gen_rounds)):
        as_int(value, name, 1)
    labels, index = np.unique(steps, return_inverse=True)  # [S], [N]
    width = max(1, round(WINDOW * labels.shape[0]))
    out: dict[str, dict[str, float | int]] = {}
    for name, lo, hi in (("early", 0, width), ("late", labels.shape[0] - width, labels.shape[0])):
        mine = (index >= lo) & (index < hi)
        groups = int(np.count_nonzero(mine))
        p = float(np.count_nonzero(signal & mine)) / groups
        out[name] = {
            "first_step": int(labels[lo]),
            "last_step": int(labels[hi - 1]),
            "groups": groups,
            "signal_share": p,
            "rounds": expected_rounds(p, batch_size, gen_size, max_gen_rounds),
        }
    return out


def logged_rounds(steps: np.ndarray, gen_size: int, window: dict[str, float | int]) -> float:
    """Mean rounds a step of a DAPO log took in ``window`` (a :func:`dapo_rounds` entry): groups per step over
    ``gen_size``, rounded up (every round of a DAPO step is full)."""
    labels, per_step = np.unique(steps, return_counts=True)
    mine = (labels >= window["first_step"]) & (labels <= window["last_step"])
    return float(np.mean(-(-per_step[mine] // gen_size)))
