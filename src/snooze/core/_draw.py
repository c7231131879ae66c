"""The draw walk: which prompts come up next, and which of them are skipped before any rollout.

Datasets' encounters are interleaved into one mixed stream by stride scheduling: dataset ``d``'s
j-th next encounter is due at ``(drawn_d + j + 0.5) / p_d`` (``p`` the weights of the datasets in
the walk, normalised), so cumulative encounters per dataset never stray more than one from ``p_d``
times the total. The walk takes encounters in that order until it has met ``need`` awake prompts:
a prompt is *skipped* when its snooze counter is above 0 (the counter goes down by one) or the
policy's skip mask says so, and *passed over* when it is retired or excluded. Everything met on the
way is spent; the rest of the stream is untouched. ``mix="stream"`` walks every dataset by weight;
``mix="quota"`` walks one dataset at a time, for the candidates its open quota is allotted.

The walk works in chunks (one vectorised pass each, sized from the share of prompts awake); the
result never depends on the chunk sizes: within an epoch a chunk's rows are distinct, so spending
the first encounters of a chunk changes nothing about the later ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from snooze.core._memory import BLOCKED, PromptTable
from snooze.core._stream import DatasetStream
from snooze.core.policies import Policy

__all__ = ["Walk", "walk", "drawable"]

_MIN_CHUNK = 256  # encounters examined per vectorised pass at least; amortises numpy call overhead


class Walk(NamedTuple):
    """What a walk met: the awake prompts in mixed-stream order, and per dataset what it spent."""

    owners: np.ndarray  # [K] dataset of each awake prompt met
    rows: np.ndarray  # [K] its row
    encounters: np.ndarray  # [D] encounters spent
    skipped: np.ndarray  # [D] of them skipped: asleep (counter above 0, or the policy's mask)
    passed: np.ndarray  # [D] of them passed over: retired or excluded


class _Peek(NamedTuple):
    rows: np.ndarray  # [M] the next encounters of one dataset (one epoch)
    awake: np.ndarray  # [M] rolled out if reached
    counter: np.ndarray  # [M] their snooze counters
    masked: np.ndarray | None  # [M] skipped by the policy's mask (None: no mask)


def drawable(tables: Sequence[PromptTable], streams: Sequence[DatasetStream]) -> np.ndarray:
    """``[D]``: the dataset can still give a prompt (its stream is not exhausted, not all blocked)."""
    return np.array([not s.exhausted and t.n_blocked < len(t) for t, s in zip(tables, streams)])


def _encounters_for(table: PromptTable, k: int) -> int:
    """Encounters to examine at once to likely meet ``k`` awake prompts (10% headroom): a guess that
    makes a walk usually one pass; the result never depends on it."""
    n = len(table)
    awake = max(n - table.n_asleep - table.n_blocked, 1)
    return max(int(k * 1.1 * n / awake) + 16, _MIN_CHUNK)


def _peek(table: PromptTable, stream: DatasetStream, policy: Policy, m: int) -> _Peek:
    """The next (up to) ``m`` encounters of the current epoch; changes nothing."""
    rows = stream.peek(m)  # [m] rows, distinct within an epoch
    counter = table.counter[rows]
    awake = counter == 0
    if table.n_blocked:
        awake &= (table.flags[rows] & BLOCKED) == 0
    if policy.skip_mask is None:
        return _Peek(rows, awake, counter, None)
    masked = policy.skip_mask(table, stream, rows, awake)
    return _Peek(rows, awake & ~masked, counter, masked)


def _consume(table: PromptTable, stream: DatasetStream, peek: _Peek, used: int) -> tuple[int, int]:
    """Spend the first ``used`` encounters of a peek made just before: sleeping prompts' counters go
    down by one. Returns ``(skipped, passed)``."""
    seen, awake, counter = peek.rows[:used], peek.awake[:used], peek.counter[:used]
    asleep = counter > 0
    left = counter[asleep]
    table.counter[seen[asleep]] = left - 1  # rows are distinct within an epoch: a plain scatter
    table.n_asleep -= int(np.count_nonzero(left == 1))
    skipped = left.shape[0] + (int(np.count_nonzero(peek.masked[:used])) if peek.masked is not None else 0)
    stream.advance(used)
    return skipped, used - int(np.count_nonzero(awake)) - skipped


def walk(
    tables: Sequence[PromptTable],
    streams: Sequence[DatasetStream],
    policy: Policy,
    weights: np.ndarray,
    drawn: np.ndarray,
    need: int,
) -> Walk:
    """Walk the mixed stream of the datasets with a weight above 0 until ``need`` awake prompts are met
    (fewer when the data runs out). ``drawn``: their encounters so far (the stride schedule's start)."""
    D = len(tables)
    spent, skipped, passed = (np.zeros(D, dtype=np.int64) for _ in range(3))
    owners_out: list[np.ndarray] = []
    rows_out: list[np.ndarray] = []
    while need > 0:
        active = drawable(tables, streams) & (weights > 0)
        if not active.any():
            break
        p = np.where(active, weights, 0.0) / np.where(active, weights, 0.0).sum()
        # encounters to examine at once: sized from the share awake, so one pass usually does
        m = max(int(sum(p[d] * _encounters_for(tables[d], need) for d in np.flatnonzero(active))), 64)
        want = np.where(active, np.ceil(m * p).astype(np.int64) + 1, 0)
        peeks = {int(d): _peek(tables[d], streams[d], policy, int(want[d])) for d in np.flatnonzero(active)}
        owners, awake, rows = _merge(peeks, p, drawn + spent, want, m, D)
        hits = np.flatnonzero(awake)
        cut = int(hits[need - 1]) + 1 if hits.shape[0] >= need else owners.shape[0]
        if cut == 0:
            break
        used = np.bincount(owners[:cut], minlength=D)
        for d in np.flatnonzero(used):
            s, q = _consume(tables[d], streams[d], peeks[int(d)], int(used[d]))
            skipped[d] += s
            passed[d] += q
        spent += used
        take = awake[:cut]
        owners_out.append(owners[:cut][take])
        rows_out.append(rows[:cut][take])
        need -= int(take.sum())
    if not owners_out:
        empty = np.empty(0, dtype=np.int64)
        return Walk(empty, empty, spent, skipped, passed)
    owners_all, rows_all = np.concatenate(owners_out), np.concatenate(rows_out)
    return Walk(owners_all.astype(np.int64), rows_all.astype(np.int64), spent, skipped, passed)


def _merge(
    peeks: dict[int, _Peek], p: np.ndarray, drawn: np.ndarray, want: np.ndarray, m: int, D: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The peeked encounters in mixed-stream order, at most ``m``: ``(owners, awake, rows)``.

    Stops where a dataset's epoch ends inside the chunk, so no encounter is taken past a point
    where that dataset's stream would have gone on."""
    if len(peeks) == 1:  # one dataset: its own order
        (d, pk), = peeks.items()
        n = min(pk.rows.shape[0], m)
        return np.full(n, d, dtype=np.int64), pk.awake[:n], pk.rows[:n]
    counts = np.zeros(D, dtype=np.int64)
    for d, pk in peeks.items():
        counts[d] = pk.rows.shape[0]  # short where an epoch ends
    rank = np.concatenate([np.arange(c) for c in counts])
    owners = np.repeat(np.arange(D), counts)
    due = (drawn[owners] + rank + 0.5) / np.maximum(p[owners], 1e-300)  # stride scheduling
    short = (counts < want) & (want > 0)
    cutoff = ((drawn + counts + 0.5) / np.maximum(p, 1e-300))[short].min() if short.any() else np.inf
    order = np.argsort(due, kind="stable")
    order = order[due[order] < cutoff][:m]
    at = (np.cumsum(counts) - counts)[owners[order]] + rank[order]  # [M] index into the peeks, concatenated
    awake = np.concatenate([peeks[d].awake for d in sorted(peeks)])[at]
    rows = np.concatenate([peeks[d].rows for d in sorted(peeks)])[at]
    return owners[order], awake, rows
