"""`PromptTable`: the per-prompt memory of one dataset, and the policies' effect on it (SPEC section 3).

Six bytes a prompt, as flat numpy arrays indexed by row:

- ``counter`` (int32): encounters left to skip. A too-easy outcome *adds* the snooze period;
  each encounter with ``counter > 0`` is skipped before any rollout and decrements it.
- ``flags`` (uint8): ``RETIRED`` (``filter`` saw it too easy: never rolled out again) and
  ``EASY_SNOOZED`` (asleep, or woken and not yet rolled out, after a too-easy outcome: the next
  rollout decides whether it *regressed*) and ``EXCLUDED`` (left out by a curriculum stage).
- ``streak`` (uint8): consecutive too-easy outcomes, for the optional backoff.
"""

from __future__ import annotations

import numpy as np

from snooze.core.classify import TOO_EASY, TOO_HARD
from snooze.core.config import SchedulerConfig
from snooze.core.stream import DatasetStream

__all__ = ["PromptTable", "RETIRED", "EASY_SNOOZED", "EXCLUDED", "BLOCKED"]

RETIRED = np.uint8(1)
EASY_SNOOZED = np.uint8(2)
EXCLUDED = np.uint8(4)  # set by a curriculum stage: passed over like a retired prompt, but reversible
BLOCKED = np.uint8(RETIRED | EXCLUDED)
_MIN_CHUNK = 256  # rows examined per vectorised step of a draw; amortises numpy call overhead


class PromptTable:
    """Per-prompt counters of one dataset. All methods are vectorised over rows."""

    def __init__(self, n: int) -> None:
        self.counter = np.zeros(n, dtype=np.int32)
        self.flags = np.zeros(n, dtype=np.uint8)
        self.streak = np.zeros(n, dtype=np.uint8)
        self.recount()

    def recount(self) -> None:
        """Recompute the cached totals from the arrays (after loading state)."""
        self.n_asleep = int(np.count_nonzero(self.counter))
        self.n_retired = int(np.count_nonzero(self.flags & RETIRED))
        self.n_blocked = int(np.count_nonzero(self.flags & BLOCKED))

    @property
    def nbytes(self) -> int:
        return self.counter.nbytes + self.flags.nbytes + self.streak.nbytes

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
            chunk, awake = self.peek(stream, max(2 * (k - got), _MIN_CHUNK))
            hits = np.flatnonzero(awake)
            need = k - got
            used = int(hits[need - 1]) + 1 if hits.shape[0] >= need else chunk.shape[0]
            taken, s, p = self.consume(stream, chunk, awake, used)
            out.append(taken)
            got, skipped, passed = got + taken.shape[0], skipped + s, passed + p
        rows = np.concatenate(out) if out else np.empty(0, dtype=np.int64)
        return rows.astype(np.int64), skipped, passed

    def peek(self, stream: DatasetStream, m: int) -> tuple[np.ndarray, np.ndarray]:
        """The next (up to) ``m`` encounters of the current epoch and which of them are awake. Changes nothing."""
        chunk = stream.peek(m)  # [m] rows, distinct within an epoch
        return chunk, (self.counter[chunk] == 0) & ((self.flags[chunk] & BLOCKED) == 0)

    def consume(self, stream: DatasetStream, chunk: np.ndarray, awake: np.ndarray, used: int) -> tuple[np.ndarray, int, int]:
        """Spend the first ``used`` encounters of a :meth:`peek`: sleeping prompts are skipped (counter
        down by one), blocked ones passed over, awake ones returned. Returns ``(rows, skipped, passed)``."""
        seen, awake = chunk[:used], awake[:used]
        sleeping = seen[self.counter[seen] > 0]
        self.counter[sleeping] -= 1
        self.n_asleep -= int(np.count_nonzero(self.counter[sleeping] == 0))
        stream.advance(used)
        return seen[awake].astype(np.int64), int(sleeping.shape[0]), int(used - awake.sum() - sleeping.shape[0])

    def apply(self, rows: np.ndarray, outcomes: np.ndarray, cfg: SchedulerConfig) -> dict[str, int]:
        """Update the table for reported groups of this dataset under ``cfg.policy``.

        Returns counts: ``new`` (prompts put to sleep), ``regressed`` (woken after a too-easy snooze
        and no longer too easy), ``retired`` (newly retired).
        """
        easy = outcomes == TOO_EASY
        hard = outcomes == TOO_HARD
        counts = {"new": 0, "regressed": 0, "retired": 0}
        if cfg.policy == "filter":
            fresh = np.unique(rows[easy & ((self.flags[rows] & RETIRED) == 0)])
            self.n_blocked += int(np.count_nonzero((self.flags[fresh] & EXCLUDED) == 0))
            self.flags[fresh] |= RETIRED
            counts["retired"] = int(fresh.shape[0])
            self.n_retired += counts["retired"]
        if cfg.policy != "snooze":
            return counts
        was_easy_snoozed = (self.flags[rows] & EASY_SNOOZED) != 0
        regressed = np.unique(rows[was_easy_snoozed & ~easy])
        counts["regressed"] = int(regressed.shape[0])
        self.flags[regressed] &= ~EASY_SNOOZED
        self.streak[rows[~easy]] = 0
        before = self.counter[rows] > 0
        if easy.any():
            e_rows = rows[easy]
            periods = self._easy_periods(e_rows, cfg)
            np.add.at(self.counter, e_rows, periods)
            self.streak[e_rows] = np.minimum(self.streak[e_rows].astype(np.int32) + 1, 255).astype(np.uint8)
            if cfg.snooze_factor > 0:
                self.flags[e_rows] |= EASY_SNOOZED
        if cfg.snooze_hard and hard.any():
            factor = cfg.snooze_factor if cfg.hard_snooze_factor is None else cfg.hard_snooze_factor
            np.add.at(self.counter, rows[hard], factor)
        counts["new"] = int(np.unique(rows[~before & (self.counter[rows] > 0)]).shape[0])
        self.n_asleep += counts["new"]
        return counts

    def _easy_periods(self, rows: np.ndarray, cfg: SchedulerConfig) -> np.ndarray:
        if cfg.backoff == 1.0:
            return np.full(rows.shape[0], cfg.snooze_factor, dtype=np.int64)
        grown = cfg.snooze_factor * np.power(float(cfg.backoff), self.streak[rows].astype(np.float64))
        return np.minimum(np.rint(grown), cfg.max_snooze).astype(np.int64)
