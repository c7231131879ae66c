"""The draw walk: which prompts come up next, and which of them are skipped before any rollout.

Datasets' encounters are interleaved into one mixed stream by stride scheduling: dataset ``d``'s
j-th next encounter is due at ``(drawn_d + j + 0.5) / p_d`` (``p`` the weights of the datasets in
the walk, normalised), so cumulative encounters per dataset never stray more than one from ``p_d``
times the total. The walk takes encounters in that order until it has met ``need`` awake prompts:
a prompt is *skipped* when its snooze counter is above 0 (the counter goes down by one) or the
policy's skip mask says so, and *passed over* (blocked) when it is retired or excluded. A share
``config.audit`` of the encounters the policy skips (asleep, masked or retired; never excluded ones) is
*audited*: met as if awake, and flagged (:mod:`._audit`), while its counter goes down as for any skip
(``audit``: the share, ``SchedulerConfig.audit``), up to ``budget`` audits a walk: later hits stay skipped.
Everything met on the way is spent; the rest of the stream is untouched. ``mix="stream"`` walks every dataset by weight;
``mix="quota"`` walks one dataset at a time, for the candidates its open quota is allotted.

The walk works in chunks (one vectorised pass each, sized from the share of prompts awake); the
result never depends on the chunk sizes: within an epoch a chunk's rows are distinct, so spending
the first encounters of a chunk changes nothing about the later ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from snooze.core._hash import audit_uniform
from snooze.core._leap import asleep_all, leap
from snooze.core._memory import BLOCKED, EXCLUDED, PromptTable
from snooze.core._mixing import interleave_order, largest_remainder
from snooze.core._stream import DatasetStream
from snooze.core.errors import PolicyConformanceError
from snooze.core.policies import Policy

__all__ = ["Walk", "walk", "walk_quota", "drawable"]

_MIN_CHUNK = 256  # encounters examined per vectorised pass at least; amortises numpy call overhead
RELAX_BOUND = 64
"""Times in a row a policy's ``relax(d)`` may say True while its mask still skips every prompt of ``d``: more is
a policy that cannot stop relaxing (``predictive`` relaxes at most 4 times a step), refused, never walked for ever."""


class Walk:
    """What a walk met: the awake prompts in mixed-stream order, and per dataset what it spent.

    ``encounters``, ``skipped`` (asleep: counter above 0, or the policy's mask) and ``blocked``
    (passed over: retired or excluded) are ``[D]`` lists; :meth:`owners` and :meth:`rows` give the prompts met;
    ``auditable`` the encounters the policy skipped (asleep, masked, retired), audited ones among them;
    :meth:`audit` flags the prompts met that are audits."""

    __slots__ = ("parts", "encounters", "skipped", "blocked", "auditable")

    def __init__(self, datasets: int) -> None:
        # per pass: (owners or dataset, rows, audit)
        self.parts: list[tuple[np.ndarray | int, np.ndarray, np.ndarray]] = []
        self.encounters, self.skipped, self.blocked = [0] * datasets, [0] * datasets, [0] * datasets
        self.auditable = 0

    def spend(self, d: int, used: int, skipped: int, blocked: int) -> None:
        self.encounters[d] += used
        self.skipped[d] += skipped
        self.blocked[d] += blocked

    def rows(self) -> np.ndarray:
        """``[K]`` row of each awake prompt met."""
        if len(self.parts) == 1:
            return self.parts[0][1]
        return np.concatenate([r for _, r, _ in self.parts]) if self.parts else np.empty(0, dtype=np.int64)

    def audit(self) -> np.ndarray:
        """``[K]`` whether each prompt met is an audit of a skipped encounter."""
        return np.concatenate([a for _, _, a in self.parts]) if self.parts else np.empty(0, dtype=bool)

    def owners(self) -> np.ndarray:
        """``[K]`` dataset of each awake prompt met."""
        owners = [np.full(r.shape[0], o, dtype=np.int64) if isinstance(o, int) else o for o, r, _ in self.parts]
        return np.concatenate(owners).astype(np.int64, copy=False) if owners else np.empty(0, dtype=np.int64)


class _Peek(NamedTuple):
    rows: np.ndarray  # [M] the next encounters of one dataset (one epoch)
    awake: np.ndarray  # [M] rolled out if reached (audits among them)
    counter: np.ndarray  # [M] their snooze counters
    masked: np.ndarray | None  # [M] skipped by the policy's mask (None: no mask)
    audit: np.ndarray | None  # [M] skipped by the policy but rolled out as an audit (None: audit off)
    auditable: np.ndarray | None  # [M] skipped by the policy (asleep, masked or retired; not excluded)


def drawable(tables: Sequence[PromptTable], streams: Sequence[DatasetStream], weights: np.ndarray) -> np.ndarray:
    """``[D]``: the dataset is in the mix (weight above 0) and can still give a prompt (its stream is
    not exhausted, not every prompt is blocked)."""
    return np.array(
        [w > 0 and not s.exhausted and t.n_blocked < t.n for w, t, s in zip(weights.tolist(), tables, streams)]
    )


def _encounters_for(table: PromptTable, k: int) -> int:
    """Encounters to examine at once to likely meet ``k`` awake prompts (10% headroom): a guess that
    makes a walk usually one pass; the result never depends on it."""
    n = table.n
    awake = max(n - table.n_asleep - table.n_blocked, 1)
    return max(int(k * 1.1 * n / awake) + 16, _MIN_CHUNK)


def _peek(table: PromptTable, stream: DatasetStream, policy: Policy, m: int, share: float, budget: int) -> _Peek:
    """The next (up to) ``m`` encounters of the current epoch, ``share`` of the skipped ones audited (none when
    the round's ``budget`` is spent; the skipped ones are counted all the same); changes nothing."""
    rows = stream.peek(m)  # [m] rows, distinct within an epoch
    counter = table.counter[rows]
    if rows.shape[0] and counter.min() < 0:  # neither awake nor asleep: a walk would pass it for ever
        raise PolicyConformanceError(
            f"dataset {stream.name!r} row {int(rows[np.argmax(counter < 0)])} has snooze counter {int(counter.min())}: "
            f"policy {policy.name!r} wrote it outside the rows of its report (a counter is an encounter count >= 0, "
            "and a policy writes only the rows of its report's prompts). Nothing was drawn"
        )
    awake = counter == 0
    if table.n_blocked:
        awake &= (table.flags[rows] & BLOCKED) == 0
    masked = None if policy.skip_mask is None else _mask(policy, table, stream, rows, awake)
    if masked is not None:
        awake = awake & ~masked
    if not share:
        return _Peek(rows, awake, counter, masked, None, None)
    auditable = ~awake & ((table.flags[rows] & EXCLUDED) == 0) if table.n_blocked else ~awake
    if budget <= 0:
        return _Peek(rows, awake, counter, masked, np.zeros(rows.shape[0], dtype=bool), auditable)
    audit = auditable & (audit_uniform(stream.seed, stream.key, stream.epoch, rows) < share)
    return _Peek(rows, awake | audit, counter, masked, audit, auditable)


def _mask(policy: Policy, table: PromptTable, stream: DatasetStream, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
    """The policy's skip mask for these encounters, or a :class:`PolicyConformanceError` when it is not a ``bool``
    array of their shape (a list, a number or an int array would be read as something else, or crash the walk)."""
    got = policy.skip_mask(table, stream, rows, awake)  # type: ignore[misc]
    if not isinstance(got, np.ndarray) or got.dtype != np.bool_ or got.shape != rows.shape:
        shown = f"{type(got).__name__} {getattr(got, 'dtype', '')} {getattr(got, 'shape', '')}".strip()
        raise PolicyConformanceError(
            f"policy {policy.name!r}: skip_mask() returned {shown} for {rows.shape[0]} encounters of dataset "
            f"{stream.name!r}; it must return a bool numpy array of shape {rows.shape} (True: skip). Nothing was drawn"
        )
    return got


def _consume(table: PromptTable, stream: DatasetStream, peek: _Peek, used: int, out: Walk, d: int) -> np.ndarray:
    """Spend the first ``used`` encounters of a peek made just before: sleeping prompts' counters go
    down by one, and ``out`` counts them for dataset ``d``. Returns the awake rows met (audits among them)."""
    seen, awake, counter = peek.rows[:used], peek.awake[:used], peek.counter[:used]
    asleep = counter > 0
    left = counter[asleep]
    table.count_down(seen[asleep], left)  # rows are distinct within an epoch: a plain scatter
    skipped = left.shape[0] + (int(np.count_nonzero(peek.masked[:used])) if peek.masked is not None else 0)
    stream.advance(used)
    taken = seen[awake]
    audited = 0
    if peek.audit is not None and peek.auditable is not None:
        audited = int(np.count_nonzero(peek.audit[:used]))
        out.auditable += int(np.count_nonzero(peek.auditable[:used]))
    out.spend(d, used, skipped, used - (taken.shape[0] - audited) - skipped)
    return taken


def walk(
    tables: Sequence[PromptTable],
    streams: Sequence[DatasetStream],
    policy: Policy,
    weights: np.ndarray,
    drawn: np.ndarray,
    need: int,
    only: int | None = None,
    audit: float = 0.0,
    budget: int = 0,
) -> Walk:
    """Walk the mixed stream of the datasets with a weight above 0 (``only``: of that one dataset)
    until ``need`` awake prompts are met, fewer when the data runs out. ``drawn``: each dataset's
    encounters so far in the mixed stream (where its stride schedule starts)."""
    walker = _Walker(tables, streams, policy, weights, drawn, audit, budget)
    among = range(len(tables)) if only is None else (only,)
    while need > 0:
        active = walker.active(among)
        if not active:
            break
        if walker.leap(active):
            continue
        met = walker.one(active[0], need) if len(active) == 1 else walker.mixed(active, need)
        if met is None:
            break
        need -= met
    return walker.out


class _Walker:
    """One walk in progress: the passes it makes, and what they spent (``out``)."""

    def __init__(
        self,
        tables: Sequence[PromptTable],
        streams: Sequence[DatasetStream],
        policy: Policy,
        weights: np.ndarray,
        drawn: np.ndarray,
        audit: float,
        budget: int,
    ) -> None:
        self.tables, self.streams, self.policy, self.weights, self.drawn = tables, streams, policy, weights, drawn
        self.audit, self.budget = audit, budget
        self.w = weights.tolist()
        self.out = Walk(len(tables))
        self.dry = _Dry(tables, policy.patience) if policy.skip_mask is not None else None

    def active(self, among: Sequence[int]) -> list[int]:
        """The datasets of ``among`` that can still give a prompt (and, with a mask, are not dry)."""
        t, s = self.tables, self.streams
        active = [d for d in among if self.w[d] > 0 and not s[d].exhausted and t[d].n_blocked < t[d].n]
        if self.dry is not None:
            active = [d for d in active if self.dry.left(d, self.policy)]
        return active

    def leap(self, active: list[int]) -> bool:
        """Nothing awake: count down by arithmetic, not pass by pass (the audit samples the encounters a walk
        looks at, never the ones it leaps over; a walk that rolls out every skipped encounter, the guard's, never
        leaps). Whether it spent anything."""
        if self.audit >= 1.0 or not all(asleep_all(self.tables[d]) for d in active):
            return False
        leapt = leap(self.tables, self.streams, self.weights, self.drawn + np.array(self.out.encounters), active)
        for d, used, skipped, blocked, down, _by in leapt:
            self.out.spend(d, used, skipped, blocked)
            self._spent(d, used, down.shape[0])
        return bool(leapt)

    def one(self, d: int, need: int) -> int | None:
        """One pass over one dataset (the mixed stream is its own stream): awake prompts met, ``None`` if none left."""
        peek = _peek(
            self.tables[d], self.streams[d], self.policy, _encounters_for(self.tables[d], need), self.audit, self.budget
        )
        if peek.audit is not None:
            _trim_audits(peek.audit, peek.awake, self.budget)
        cut, met = _cut(peek.awake, need)
        if cut == 0:
            return None
        taken = _consume(self.tables[d], self.streams[d], peek, cut, self.out, d)
        self.out.parts.append((d, taken, _taken_audit(peek, cut)))
        self.budget -= int(np.count_nonzero(self.out.parts[-1][2]))
        self._spent(d, cut, taken.shape[0] + int(np.count_nonzero(peek.counter[:cut])))
        return met

    def mixed(self, active: list[int], need: int) -> int | None:
        """One pass over several datasets, in mixed-stream order: awake prompts met, ``None`` if none left."""
        t, s = self.tables, self.streams
        peeks, owners, awake, rows, audit = _mixed_pass(
            t, s, self.policy, self.weights, active, self.drawn + self.out.encounters, need, self.audit, self.budget
        )
        cut, met = _cut(awake, need)
        if cut == 0:
            return None
        for d, k in enumerate(np.bincount(owners[:cut], minlength=len(t)).tolist()):
            if k:
                taken = _consume(t[d], s[d], peeks[d], k, self.out, d)
                self._spent(d, k, taken.shape[0] + int(np.count_nonzero(peeks[d].counter[:k])))
        take = awake[:cut]
        self.out.parts.append((owners[:cut][take], rows[:cut][take], audit[:cut][take]))  # in mixed-stream order
        self.budget -= int(np.count_nonzero(audit[:cut][take]))
        return met

    def _spent(self, d: int, used: int, lively: int) -> None:
        if self.dry is not None:
            self.dry.spent(d, used, lively)


def _taken_audit(peek: _Peek, used: int) -> np.ndarray:
    """Of the first ``used`` encounters of ``peek``, the audit flag of each awake prompt met."""
    if peek.audit is None:
        return np.zeros(int(np.count_nonzero(peek.awake[:used])), dtype=bool)
    return peek.audit[:used][peek.awake[:used]]


class _Dry:
    """Encounters in a row, per dataset, that met no awake prompt and moved no counter: past the
    policy's patience (whole epochs of the dataset) its mask is taken to skip everything for now,
    unless the policy relaxes it (:meth:`Policy.relax`)."""

    def __init__(self, tables: Sequence[PromptTable], patience: int) -> None:
        self.limit = [patience * t.n for t in tables]
        self.run = [0] * len(tables)
        self.relaxed = [0] * len(tables)  # relaxations in a row that let nothing through

    def left(self, d: int, policy: Policy) -> bool:
        if self.run[d] >= self.limit[d] and policy.relax(d):  # the policy skips less now: walk on
            self.relaxed[d] += 1
            if self.relaxed[d] > RELAX_BOUND:
                raise PolicyConformanceError(
                    f"policy {policy.name!r}: relax({d}) returned True {self.relaxed[d]} times in a row in one draw, "
                    f"and its skip mask still skipped every prompt of that dataset after each; relax() must return "
                    "False once it cannot skip less (the draw then gives up on the dataset for the round). Nothing "
                    "was drawn"
                )
            self.run[d] = 0
        return self.run[d] < self.limit[d]

    def spent(self, d: int, used: int, lively: int) -> None:
        self.run[d] = 0 if lively else self.run[d] + used
        if lively:
            self.relaxed[d] = 0


def walk_quota(
    n: int,
    weights: np.ndarray,
    active: Callable[[], np.ndarray],
    open_slots: Callable[[np.ndarray], np.ndarray],
    walk_one: Callable[[int, int], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Quota mix: split ``n`` among the datasets whose batch quota is open (in proportion to their
    ``open_slots``, by largest remainder; by weight once no quota is open), walk each one's stream for its
    share (``walk_one(d, k)`` -> rows, audit flags), and split again what a dataset could not give. Returns
    ``(owners, rows, audit flags, per-dataset counts)``, the candidates interleaved by dataset."""
    D = weights.shape[0]
    rows_by_ds: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * D
    audit_by_ds: list[np.ndarray] = [np.empty(0, dtype=bool)] * D
    want = n
    while want > 0:
        now = active()
        if not now.any():
            break
        slots = open_slots(now)
        alloc = largest_remainder(want, slots if slots.sum() > 0 else np.where(now, weights, 0.0))
        got_any = False
        for d in np.flatnonzero(alloc):
            rows, audit = walk_one(int(d), int(alloc[d]))
            rows_by_ds[d] = np.concatenate([rows_by_ds[d], rows])
            audit_by_ds[d] = np.concatenate([audit_by_ds[d], audit])
            got_any |= rows.shape[0] > 0
            want -= rows.shape[0]
        if not got_any and np.array_equal(active(), now):
            break  # no dataset gave a prompt and none ran out: nothing more to draw
    counts = np.array([r.shape[0] for r in rows_by_ds], dtype=np.int64)
    order = interleave_order(counts)  # slot -> index into the rows grouped by dataset
    return (
        np.repeat(np.arange(D), counts)[order],
        np.concatenate(rows_by_ds)[order],
        np.concatenate(audit_by_ds)[order],
        counts,
    )


def _trim_audits(audit: np.ndarray, awake: np.ndarray, budget: int) -> np.ndarray:
    """Keep the first ``budget`` audits of a pass (in its order); later ones are skips again. In place; returns
    the positions un-audited."""
    extra = np.flatnonzero(audit)[max(budget, 0) :]
    audit[extra] = False
    awake[extra] = False
    return extra


def _cut(awake: np.ndarray, need: int) -> tuple[int, int]:
    """``(encounters to spend, awake prompts met)``: up to and including the ``need``-th awake one."""
    hits = np.flatnonzero(awake)
    if hits.shape[0] >= need:
        return int(hits[need - 1]) + 1, need
    return awake.shape[0], hits.shape[0]


def _mixed_pass(
    tables: Sequence[PromptTable],
    streams: Sequence[DatasetStream],
    policy: Policy,
    weights: np.ndarray,
    active: list[int],
    drawn: np.ndarray,
    need: int,
    share: float,
    budget: int,
) -> tuple[dict[int, _Peek], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One pass over several datasets: peek each, then order the encounters by stride scheduling.
    Returns ``(peeks, owners, awake, rows, audit)`` of at most ``m`` encounters in mixed-stream order.

    Stops where a dataset's epoch ends inside the chunk, so no encounter is taken past a point
    where that dataset's stream would have gone on. Audits beyond ``budget`` (in mixed-stream order) are skips."""
    D = len(tables)
    on = np.zeros(D, dtype=bool)
    on[active] = True
    p = np.where(on, weights, 0.0) / np.where(on, weights, 0.0).sum()
    # encounters to examine at once: sized from the share awake, so one pass usually does
    m = max(int(sum(p[d] * _encounters_for(tables[d], need) for d in active)), 64)
    want = np.where(on, np.ceil(m * p).astype(np.int64) + 1, 0)
    peeks = {d: _peek(tables[d], streams[d], policy, int(want[d]), share, budget) for d in active}
    counts = np.zeros(D, dtype=np.int64)
    for d, pk in peeks.items():
        counts[d] = pk.rows.shape[0]  # short where an epoch ends
    rank = np.concatenate([np.arange(c) for c in counts])
    owners = np.repeat(np.arange(D), counts)
    due = (drawn[owners] + rank + 0.5) / np.maximum(p[owners], 1e-300)  # stride scheduling
    short = (counts < want) & on
    cutoff = ((drawn + counts + 0.5) / np.maximum(p, 1e-300))[short].min() if short.any() else np.inf
    order = np.argsort(due, kind="stable")
    order = order[due[order] < cutoff][:m]
    at = (np.cumsum(counts) - counts)[owners[order]] + rank[order]  # [M] index into the peeks, concatenated
    awake = np.concatenate([peeks[d].awake for d in active])[at]
    rows = np.concatenate([peeks[d].rows for d in active])[at]
    audit = np.concatenate(
        [peeks[d].audit if peeks[d].audit is not None else np.zeros(peeks[d].rows.shape[0], dtype=bool) for d in active]
    )[at]
    extra = at[_trim_audits(audit, awake, budget)]  # [X] index into the peeks, concatenated
    if extra.shape[0]:
        starts = np.cumsum([0] + [peeks[d].rows.shape[0] for d in active])
        for i, d in enumerate(active):
            local = extra[(extra >= starts[i]) & (extra < starts[i + 1])] - starts[i]
            if peeks[d].audit is not None:
                peeks[d].audit[local] = False
                peeks[d].awake[local] = False
    return peeks, owners[order], awake, rows, audit
