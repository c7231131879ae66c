"""The draw walk's leap: when no prompt of any dataset in the walk is awake, the encounters up to the
first one that can be (a prompt whose counter reaches 0, or a dataset's last epoch ending) are all
skips, and are spent by arithmetic instead of pass by pass (a factor of 10**7 would
otherwise walk 10**7 epochs in one step).

A prompt of counter ``c`` is skipped at its next ``c`` encounters and awake at the one after: in
epoch ``e0 + c`` (one later if its place in the current epoch is already behind the cursor). The
first awake encounter of a dataset is so found from two permutations, whatever ``c`` is. Several
datasets are interleaved by stride scheduling (:mod:`._draw`): the encounter due first among each
dataset's first awake one (or end of stream) is the leap's end, and each dataset spends exactly its
encounters due before it, the same float formula the walk orders by. Everything spent is a skip (a
counter above 0: down by as many encounters as it met) or a pass-over (blocked at counter 0), so the
walk's result is the same as counting down one epoch at a time (tests/core/test_leap.py).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from snooze.core._memory import BLOCKED, PromptTable
from snooze.core._stream import DatasetStream

__all__ = ["asleep_all", "leap"]


def asleep_all(table: PromptTable) -> bool:
    """No prompt of the table can be rolled out at its next encounter (every one asleep or blocked)."""
    if table.n_asleep + table.n_blocked < table.n:  # (O(1): some prompt is awake for sure)
        return False
    return not bool(np.any((table.counter == 0) & ((table.flags & BLOCKED) == 0)))


def _position(stream: DatasetStream, epoch: int) -> np.ndarray:
    """``[n]``: each row's place in ``epoch``'s order."""
    perm = _perm(stream, epoch)
    pos = np.empty(stream.n, dtype=np.int64)
    pos[perm] = np.arange(stream.n)
    return pos


def _perm(stream: DatasetStream, epoch: int) -> np.ndarray:
    if epoch == stream.epoch:
        return stream.permutation()
    if not stream.shuffle:
        return np.arange(stream.n)
    return np.random.default_rng([stream.seed, stream.key, epoch]).permutation(stream.n)


def _first_event(table: PromptTable, stream: DatasetStream) -> int:
    """Encounters of the dataset before its first awake one, or before its stream ends (finite epochs)."""
    n, e0, c0 = stream.n, stream.epoch, stream.cursor
    end = (stream.epochs - e0) * n - c0 if stream.epochs is not None else None
    open_ = np.flatnonzero((table.flags & BLOCKED) == 0)
    if open_.shape[0] == 0:
        return end if end is not None else 0
    pos0 = _position(stream, e0)
    wake = e0 + table.counter[open_].astype(np.int64) + (pos0[open_] < c0)  # [U] epoch of each one's awake encounter
    first = int(wake.min())
    if end is not None and first >= stream.epochs:
        return end
    pos = pos0 if first == e0 else _position(stream, first)
    return (first - e0) * n - c0 + int(pos[open_[wake == first]].min())


def _spent(table: PromptTable, stream: DatasetStream, used: int) -> tuple[int, int, np.ndarray, np.ndarray]:
    """Spend the next ``used`` encounters, all skips or pass-overs. Returns ``(skipped, passed, rows, by)``:
    the rows counted down and by how much."""
    n, e0, c0 = stream.n, stream.epoch, stream.cursor
    met = np.zeros(n, dtype=np.int64)  # [n] encounters of each prompt
    head = min(used, n - c0)
    met[stream.permutation()[c0 : c0 + head]] += 1
    full, tail = divmod(used - head, n)
    met += full
    if tail:
        met[_perm(stream, e0 + 1 + full)[:tail]] += 1
    counter = table.counter.astype(np.int64)
    down = np.minimum(counter, met)  # a blocked prompt's counter stops at 0; then it is passed over
    rows = np.flatnonzero(down)
    by = down[rows]
    table.count_down(rows, counter[rows], by)
    total = c0 + used
    stream.epoch, stream.cursor = e0 + total // n, total % n
    skipped = int(by.sum())
    return skipped, used - skipped, rows, by


def leap(
    tables: Sequence[PromptTable],
    streams: Sequence[DatasetStream],
    weights: np.ndarray,
    drawn: np.ndarray,
    active: list[int],
) -> list[tuple[int, int, int, int, np.ndarray, np.ndarray]]:
    """Spend every encounter due before the first that may be awake (the datasets in ``active`` all
    :func:`asleep_all`). Returns ``(dataset, encounters, skipped, passed, rows, by)`` per dataset that spent any."""
    events = {d: _first_event(tables[d], streams[d]) for d in active}
    if len(active) == 1:
        used = events
    else:
        on = np.zeros(len(tables), dtype=bool)
        on[active] = True
        p = np.where(on, weights, 0.0) / np.where(on, weights, 0.0).sum()  # as the walk's mixed pass
        pd = {d: max(float(p[d]), 1e-300) for d in active}
        due = {d: (float(drawn[d] + events[d]) + 0.5) / pd[d] for d in active}
        end = min(due.values())
        used = {d: _due_before(int(drawn[d]), pd[d], end, events[d]) for d in active}
    out = []
    for d in active:
        if used[d] > 0:
            out.append((d, used[d], *_spent(tables[d], streams[d], used[d])))
    return out


def _due_before(drawn: int, p: float, end: float, most: int) -> int:
    """How many of a dataset's next encounters are due strictly before ``end`` (at most ``most``)."""
    k = min(max(int(np.ceil(end * p - drawn - 0.5)), 0), most)
    while k > 0 and (float(drawn + k - 1) + 0.5) / p >= end:
        k -= 1
    while k < most and (float(drawn + k) + 0.5) / p < end:
        k += 1
    return k
