"""`PromptTable`: the per-prompt memory of one dataset, and the policies' effect on it (SPEC section 3).

`PromptMemory` keeps every dataset's table in one set of arrays (``tables[d]`` is a view), so a
report that spans datasets is applied in one vectorised pass by :func:`apply_outcomes`.

Six bytes a prompt, as flat numpy arrays indexed by row:

- ``counter`` (int32): encounters left to skip. A too-easy outcome *adds* the snooze period;
  each encounter with ``counter > 0`` is skipped before any rollout and decrements it.
- ``flags`` (uint8): ``RETIRED`` (``filter`` saw it too easy: never rolled out again) and
  ``EASY_SNOOZED`` (asleep, or woken and not yet rolled out, after a too-easy outcome: the next
  rollout decides whether it *regressed*) and ``EXCLUDED`` (left out by a curriculum stage).
- ``streak`` (uint8): consecutive too-easy outcomes, for the optional backoff.
- ``history`` (uint8, only under ``skip="history"``, making it seven bytes): the prompt's pass rate
  averaged over its groups, 0 = none seen yet, ``1 + 254 p`` otherwise; an encounter is skipped with
  probability ``min(p**G, k/(k+1))``, decided by :func:`encounter_uniform` (a hash, no RNG state).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from snooze.core.classify import TOO_EASY, TOO_HARD
from snooze.core.config import SchedulerConfig
from snooze.core.stream import DatasetStream

__all__ = ["PromptTable", "PromptMemory", "Changes", "apply_outcomes", "RETIRED", "EASY_SNOOZED", "EXCLUDED", "BLOCKED"]

RETIRED = np.uint8(1)
EASY_SNOOZED = np.uint8(2)
EXCLUDED = np.uint8(4)  # set by a curriculum stage: passed over like a retired prompt, but reversible
BLOCKED = np.uint8(RETIRED | EXCLUDED)
_MIN_CHUNK = 256  # rows examined per vectorised step of a draw; amortises numpy call overhead

_LEVELS = 254  # history byte h: 0 = no group seen yet; 1..255 = pass rate (h - 1) / 254

# (rows, awake, counter, skipped by history) of the next encounters; the last is None unless skip="history"
Peek = tuple[np.ndarray, np.ndarray, np.ndarray, "np.ndarray | None"]


def encounter_uniform(seed: int, key: int, epoch: int, rows: np.ndarray) -> np.ndarray:
    """A uniform number in [0, 1) for each ``(seed, dataset key, epoch, row)``: a stateless hash
    (splitmix64), so a skip decided from it is the same after any resume and on any machine. [M] -> [M]"""
    x = rows.astype(np.uint64) ^ np.uint64(((seed * 0x9E3779B1 + key) * 0x85EBCA77 + epoch * 0xC2B2AE3D) & (2**64 - 1))
    for mul in (0xBF58476D1CE4E5B9, 0x94D049BB133111EB):
        x = (x ^ (x >> np.uint64(31))) * np.uint64(mul)
    x ^= x >> np.uint64(29)
    return (x >> np.uint64(11)).astype(np.float64) * (1.0 / 2**53)


class PromptTable:
    """Per-prompt counters of one dataset. All methods are vectorised over rows."""

    def __init__(self, n: int, history: bool = False) -> None:
        self.counter = np.zeros(n, dtype=np.int32)
        self.flags = np.zeros(n, dtype=np.uint8)
        self.streak = np.zeros(n, dtype=np.uint8)
        self.history = np.zeros(n if history else 0, dtype=np.uint8)  # pass-rate byte, only for skip="history"
        self.set_skipping(0, 0.0)
        self.recount()

    def set_skipping(self, power: int, cap: float) -> None:
        """``skip="history"``: an encounter is skipped with probability ``min(p**power, cap)`` (``power`` =
        G, ``cap`` = k/(k+1)); ``power=0`` turns it off. Builds the skip probability of each history byte."""
        self.skip_power, self.skip_cap = power, cap
        p = np.concatenate([[0.0], np.arange(_LEVELS + 1) / _LEVELS])  # byte 0: no group seen yet
        self.skip_lut = np.minimum(p**power, cap) if power else np.zeros(_LEVELS + 2)
        self.skip_lut[0] = 0.0

    def view(self, lo: int, hi: int) -> PromptTable:
        """Rows ``lo..hi-1`` as a table of their own that shares this one's arrays."""
        out = PromptTable(0)
        out.counter, out.flags, out.streak = self.counter[lo:hi], self.flags[lo:hi], self.streak[lo:hi]
        out.history = self.history[lo:hi] if self.history.shape[0] else self.history
        out.recount()
        return out

    def recount(self) -> None:
        """Recompute the cached totals from the arrays (after loading state)."""
        self.n_asleep = int(np.count_nonzero(self.counter))
        self.n_retired = int(np.count_nonzero(self.flags & RETIRED))
        self.n_blocked = int(np.count_nonzero(self.flags & BLOCKED))

    @property
    def nbytes(self) -> int:
        return self.counter.nbytes + self.flags.nbytes + self.streak.nbytes + self.history.nbytes

    def asleep(self) -> int:
        """Prompts with a snooze counter above 0 (kept up to date, O(1))."""
        return self.n_asleep

    def retired(self) -> int:
        """Prompts retired by ``filter`` (kept up to date, O(1))."""
        return self.n_retired

    def draw(self, stream: DatasetStream, k: int) -> tuple[np.ndarray, int, int]:
        """The next ``k`` prompts of ``stream`` that are awake, in stream order.

        Snoozed prompts met on the way are skipped (their counter goes down by one) and retired ones
        passed over; both are encounters. Returns ``(rows, snooze_skipped, retired_skipped)``; fewer
        than ``k`` rows only when the stream is exhausted or every prompt is retired.
        """
        out: list[np.ndarray] = []
        got = skipped = passed = 0
        while got < k and not stream.exhausted:
            if self.n_blocked == self.counter.shape[0]:
                break  # every prompt retired or excluded: nothing can be drawn
            peek = self.peek(stream, self.encounters_for(k - got))
            hits = np.flatnonzero(peek[1])
            need = k - got
            used = int(hits[need - 1]) + 1 if hits.shape[0] >= need else peek[0].shape[0]
            taken, s, p = self.consume(stream, peek, used)
            out.append(taken)
            got, skipped, passed = got + taken.shape[0], skipped + s, passed + p
        rows = out[0] if len(out) == 1 else np.concatenate(out) if out else np.empty(0, dtype=np.int64)
        return rows, skipped, passed

    def encounters_for(self, k: int) -> int:
        """How many encounters to examine at once to likely find ``k`` awake prompts.

        Sized from the share of prompts awake (10% headroom), so a draw is usually one vectorised
        pass; a guess only, the result never depends on it."""
        n = self.counter.shape[0]
        awake = max(n - self.n_asleep - self.n_blocked, 1)
        return max(int(k * 1.1 * n / awake) + 16, _MIN_CHUNK)

    def peek(self, stream: DatasetStream, m: int) -> Peek:
        """The next (up to) ``m`` encounters of the current epoch: ``(rows, awake, counter, by_history)``.
        Changes nothing."""
        chunk = stream.peek(m)  # [m] rows, distinct within an epoch
        counter = self.counter[chunk]
        awake = counter == 0
        if self.n_blocked:
            awake &= (self.flags[chunk] & BLOCKED) == 0
        if not self.skip_power:
            return chunk, awake, counter, None
        p_skip = self.skip_lut[self.history[chunk]]  # min(p**G, cap) for each history byte
        maybe = np.flatnonzero(awake & (p_skip > 0))  # hash only where a skip is possible
        by_history = np.zeros(chunk.shape[0], dtype=bool)
        by_history[maybe] = encounter_uniform(stream.seed, stream.key, stream.epoch, chunk[maybe]) < p_skip[maybe]
        return chunk, awake & ~by_history, counter, by_history

    def consume(self, stream: DatasetStream, peek: Peek, used: int) -> tuple[np.ndarray, int, int]:
        """Spend the first ``used`` encounters of a :meth:`peek` (made just before, nothing changed
        since): sleeping prompts are skipped (counter down by one), blocked ones passed over, awake ones
        returned. Returns ``(rows, skipped, passed)``."""
        chunk, awake, counter, by_history = peek
        seen, awake, counter = chunk[:used], awake[:used], counter[:used]
        asleep = counter > 0
        left = counter[asleep]
        self.counter[seen[asleep]] = left - 1  # rows are distinct within an epoch: a plain scatter
        n_skipped = left.shape[0] + (int(np.count_nonzero(by_history[:used])) if by_history is not None else 0)
        self.n_asleep -= int(np.count_nonzero(left == 1))
        stream.advance(used)
        taken = seen[awake].astype(np.int64, copy=False)
        return taken, n_skipped, int(used - taken.shape[0] - n_skipped)

    def apply(self, rows: np.ndarray, outcomes: np.ndarray, cfg: SchedulerConfig) -> dict[str, int]:
        """Update the table for reported groups of this dataset under ``cfg.policy``.

        Returns counts: ``new`` (prompts put to sleep), ``regressed`` (woken after a too-easy snooze
        and no longer too easy), ``retired`` (newly retired).
        """
        ch = apply_outcomes(self, rows, outcomes, cfg)
        counts = {k: int(np.count_nonzero(getattr(ch, k))) for k in ("new", "regressed", "retired")}
        self.n_asleep += counts["new"]
        self.n_retired += counts["retired"]
        self.n_blocked += int(np.count_nonzero(ch.blocked))
        return counts


class PromptMemory:
    """Every dataset's :class:`PromptTable` in one set of arrays: ``tables[d]`` is dataset ``d``'s
    slice (a view), so a report that spans datasets updates them all in one vectorised pass."""

    def __init__(self, sizes: list[int], skip_power: int = 0, skip_cap: float = 0.0) -> None:
        """``skip_power``: G when ``skip="history"`` (keeps a pass-rate byte per prompt), else 0;
        ``skip_cap``: the highest skip probability, ``k / (k + 1)`` for ``snooze_factor`` k."""
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.all = PromptTable(int(self.offsets[-1]), history=skip_power > 0)
        self.tables = [self.all.view(int(lo), int(hi)) for lo, hi in zip(self.offsets[:-1], self.offsets[1:])]
        for t in (self.all, *self.tables):
            t.set_skipping(skip_power, skip_cap)

    def apply(
        self, ds: np.ndarray, rows: np.ndarray, outcomes: np.ndarray, cfg: SchedulerConfig, means: np.ndarray | None = None
    ) -> dict[str, int]:
        """:meth:`PromptTable.apply` for groups of several datasets (``ds[i]`` owns ``rows[i]``)."""
        ch = apply_outcomes(self.all, self.offsets[ds] + rows, outcomes, cfg, means)
        D = len(self.tables)
        per = {k: np.bincount(ds[getattr(ch, k)], minlength=D).tolist() for k in ("new", "retired", "blocked")}
        for d, t in enumerate(self.tables):
            t.n_asleep += per["new"][d]
            t.n_retired += per["retired"][d]
            t.n_blocked += per["blocked"][d]
        return {"new": sum(per["new"]), "regressed": int(np.count_nonzero(ch.regressed)), "retired": sum(per["retired"])}

    def install(self, tables: list[PromptTable]) -> None:
        """Copy standalone tables (one per dataset, e.g. parsed from a state) into the shared arrays."""
        for mine, theirs in zip(self.tables, tables):
            for name in ("counter", "flags", "streak"):
                getattr(mine, name)[...] = getattr(theirs, name)
            if mine.history.shape[0]:  # kept only under skip="history"; a state without it starts unseen
                mine.history[...] = theirs.history if theirs.history.shape == mine.history.shape else 0
            mine.recount()


class Changes(NamedTuple):
    """What a report did, one flag per reported group (a prompt reported twice is flagged once)."""

    new: np.ndarray  # put to sleep (counter was 0, now above 0)
    regressed: np.ndarray  # woken after a too-easy snooze, and no longer too easy
    retired: np.ndarray  # newly retired by ``filter``
    blocked: np.ndarray  # newly retired and not already excluded (newly unavailable to draws)


def apply_outcomes(
    t: PromptTable, rows: np.ndarray, outcomes: np.ndarray, cfg: SchedulerConfig, means: np.ndarray | None = None
) -> Changes:
    """Apply ``cfg.policy`` to the prompts at ``rows`` of ``t`` given their groups' outcomes (SPEC 3).

    ``means``: each group's mean reward as a fraction of the range; needed under ``skip="history"``."""
    easy = outcomes == TOO_EASY
    hard = outcomes == TOO_HARD
    none = np.zeros(rows.shape[0], dtype=bool)
    if cfg.policy == "filter":
        fresh = easy & ((t.flags[rows] & RETIRED) == 0)
        fresh &= _first_occurrence(np.where(fresh, rows, -1))  # once per prompt
        blocked = fresh & ((t.flags[rows] & EXCLUDED) == 0)
        t.flags[rows[fresh]] |= RETIRED
        return Changes(none, none, fresh, blocked)
    if cfg.policy != "snooze":
        return Changes(none, none, none, none)
    repeated = False
    if rows.shape[0] > 1:
        ordered = np.sort(rows)
        repeated = bool((ordered[1:] == ordered[:-1]).any())  # a prompt issued twice in one report (epoch edge)
    history = cfg.skip == "history"
    if history:
        if means is None or t.history.shape != t.counter.shape:
            raise ValueError("skip='history' needs the groups' mean rewards and a table that keeps history")
        _update_history(t, rows, means, cfg.history_weight, repeated)
        easy_period = np.int32(0)  # skipping is decided from the history at each encounter instead
    else:
        easy_period = np.int32(cfg.snooze_factor)
    if repeated:
        return _apply_snooze_repeated(t, rows, easy, hard, cfg)
    # Rows are distinct: gather each column once, update, scatter once.
    flags, counter, streak = t.flags[rows], t.counter[rows], t.streak[rows]
    regressed = ((flags & EASY_SNOOZED) != 0) & ~easy
    if cfg.backoff == 1.0 or history:
        new_counter = counter + easy * easy_period
    else:
        new_counter = counter + np.where(easy, _easy_periods(streak, cfg), 0).astype(np.int32)
    if cfg.snooze_hard:
        factor = cfg.snooze_factor if cfg.hard_snooze_factor is None else cfg.hard_snooze_factor
        new_counter += hard * np.int32(factor)
    if cfg.snooze_factor > 0 or history:
        flags = flags | (easy * EASY_SNOOZED)
    t.flags[rows] = flags & ~(regressed * EASY_SNOOZED)
    t.counter[rows] = new_counter
    t.streak[rows] = (np.minimum(streak, 254) + 1) * easy  # consecutive too-easy outcomes; 0 on any other
    return Changes((counter == 0) & (new_counter > 0), regressed, none, none)


def _update_history(t: PromptTable, rows: np.ndarray, means: np.ndarray, weight: float, repeated: bool) -> None:
    """Fold each group's pass rate into its prompt's history byte: ``p <- p + weight * (mean - p)``
    (the first group sets ``p``), in report order when a prompt appears more than once."""
    means = np.clip(np.asarray(means, dtype=np.float64), 0.0, 1.0)  # fractions of the range, checked upstream

    def fold(h: np.ndarray, m: np.ndarray) -> np.ndarray:
        old = np.where(h > 0, (h.astype(np.float64) - 1.0) / _LEVELS, m)
        return (1.0 + np.rint(_LEVELS * (old + weight * (m - old)))).astype(np.uint8)

    if not repeated:
        t.history[rows] = fold(t.history[rows], means)
        return
    for r, m in zip(rows.tolist(), means.tolist()):  # rare (an epoch edge in one report): one at a time
        t.history[r] = fold(t.history[r : r + 1], np.array([m]))[0]


def _first_occurrence(rows: np.ndarray) -> np.ndarray:
    """True at the first place each row appears."""
    first = np.zeros(rows.shape[0], dtype=bool)
    first[np.unique(rows, return_index=True)[1]] = True
    return first


def _apply_snooze_repeated(t: PromptTable, rows: np.ndarray, easy: np.ndarray, hard: np.ndarray, cfg: SchedulerConfig) -> Changes:
    """The ``snooze`` update for a report that holds one prompt more than once: periods add up (``add.at``)."""
    first = _first_occurrence(rows)
    regressed = ((t.flags[rows] & EASY_SNOOZED) != 0) & ~easy
    regressed &= _first_occurrence(np.where(regressed, rows, -1))  # once per prompt
    t.flags[rows[regressed]] &= ~EASY_SNOOZED
    t.streak[rows[~easy]] = 0
    before = t.counter[rows] > 0
    if easy.any():
        e_rows = rows[easy]
        if cfg.skip == "counter":
            np.add.at(t.counter, e_rows, _easy_periods(t.streak[e_rows], cfg))
        uniq, times = np.unique(e_rows, return_counts=True)  # each too-easy outcome adds to the streak
        t.streak[uniq] = np.minimum(t.streak[uniq].astype(np.int32) + times, 255).astype(np.uint8)
        if cfg.snooze_factor > 0 or cfg.skip == "history":
            t.flags[e_rows] |= EASY_SNOOZED
    if cfg.snooze_hard and hard.any():
        factor = cfg.snooze_factor if cfg.hard_snooze_factor is None else cfg.hard_snooze_factor
        np.add.at(t.counter, rows[hard], factor)
    new = ~before & (t.counter[rows] > 0) & first  # once per prompt (``before`` is the same at each of its places)
    none = np.zeros(rows.shape[0], dtype=bool)
    return Changes(new, regressed, none, none)


def _easy_periods(streak: np.ndarray, cfg: SchedulerConfig) -> np.ndarray:
    """Snooze period for each too-easy prompt, given its streak of too-easy outcomes (``backoff``)."""
    if cfg.backoff == 1.0:
        return np.full(streak.shape[0], cfg.snooze_factor, dtype=np.int64)
    grown = cfg.snooze_factor * np.power(float(cfg.backoff), streak.astype(np.float64))
    return np.minimum(np.rint(grown), cfg.max_snooze).astype(np.int64)
