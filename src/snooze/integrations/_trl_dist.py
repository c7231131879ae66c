"""How :class:`~snooze.integrations.trl.SnoozeGRPOTrainer` spreads one scheduler step over N processes.

Nothing is broadcast. Every rank builds the same :class:`~snooze.Scheduler` (same datasets, config and
seed), so every rank proposes the same candidates; TRL's ``_calculate_rewards`` ends with
``gather(rewards_per_func)``, so every rank reports the same rewards, in the same order, and reaches
the same decisions. What this module decides is the layout of one generation round:

- The round's rows are its candidates' groups in issue order (candidate ``i`` owns rows
  ``[i*G, (i+1)*G)``), padded with whole *inert* groups up to a multiple of ``lcm(world, G)``: every
  rank then gets the same number of rows (TRL's collectives need equal shapes, and vLLM server mode
  slices by ``process_index * len(prompts)``), and the gathered rewards still split into whole groups
  (TRL's ``view(-1, num_generations)``). Rank ``r`` generates the contiguous rows
  ``[r*P, (r+1)*P)``.
- A group lies on one rank whenever ``P`` is a multiple of ``G`` (the round's groups split evenly over
  the ranks, the usual case); otherwise some groups span two ranks, exactly as in TRL's own layout when
  ``per_device_train_batch_size < num_generations``: TRL groups the gathered rewards before each rank
  takes its slice back, so the advantages are the same, and each rank trains on its own rows of a kept
  group.
- Pad groups are at the end of the round, are generated and scored like any row (they copy the last
  candidate's record), and are never reported to the scheduler nor trained on.

Also here: the digests the ranks compare (before each round: the proposal; after each step: the
scheduler's counters and a running checksum of every report), and the check that compares them.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze import Candidate, IntegrationError, Scheduler

__all__ = [
    "RoundLayout",
    "round_layout",
    "pad_rows_to",
    "report_crc",
    "start_digest",
    "round_digest",
    "step_digest",
    "check_agree",
    "START_FIELDS",
    "ROUND_FIELDS",
    "STEP_FIELDS",
]

START_FIELDS = ("seed", "config", "datasets", "step", "issued")
ROUND_FIELDS = ("step", "round", "candidates", "keys")
STEP_FIELDS = ("step", "issued", "total/gen_groups", "total/train_groups", "snooze/asleep", "filter/retired", "reports")


@dataclass(frozen=True)
class RoundLayout:
    """Where the rows of one round of ``groups`` candidates go on ``world`` ranks (``G`` rows each)."""

    groups: int
    group_size: int
    world: int
    rows_per_rank: int  # P: rows every rank generates this round
    pad_groups: int  # inert groups after the real ones

    def spread(self, i: int) -> np.ndarray:
        """``[world]``: how many rows of group ``i`` each rank holds."""
        G, P = self.group_size, self.rows_per_rank
        starts = np.arange(self.world, dtype=np.int64) * P
        return np.clip(np.minimum(starts + P, (i + 1) * G) - np.maximum(starts, i * G), 0, None)

    def local(self, i: int, rank: int) -> tuple[int, int]:
        """Group ``i``'s rows on ``rank``, as a ``[lo, hi)`` range of that rank's round output (may be empty)."""
        G, P = self.group_size, self.rows_per_rank
        lo, hi = max(i * G, rank * P), min((i + 1) * G, (rank + 1) * P)
        return (lo - rank * P, hi - rank * P) if hi > lo else (0, 0)

    def rows_of(self, rank: int) -> range:
        """``rank``'s rows, as indices into the round's global rows (``row // G`` is the group)."""
        return range(rank * self.rows_per_rank, (rank + 1) * self.rows_per_rank)


def round_layout(groups: int, group_size: int, world: int) -> RoundLayout:
    """The layout of one round: rows padded (with whole groups) to a multiple of ``lcm(world, G)``.

    >>> round_layout(3, 4, 2).rows_per_rank, round_layout(3, 4, 2).pad_groups  # 12 rows: 6 a rank, no pad
    (6, 0)
    >>> round_layout(3, 3, 2).rows_per_rank, round_layout(3, 3, 2).pad_groups  # 9 rows -> 12: one pad group
    (6, 1)
    """
    if groups < 1 or group_size < 1 or world < 1:
        raise IntegrationError(f"round_layout({groups}, {group_size}, {world}): every count must be >= 1")
    unit = math.lcm(world, group_size)
    total = -(-groups * group_size // unit) * unit
    return RoundLayout(groups, group_size, world, total // world, (total - groups * group_size) // group_size)


def pad_rows_to(counts: np.ndarray, multiple: int, floor: int) -> int:
    """The common row count every rank trains on: the largest rank's, at least ``floor``, rounded up.

    ``counts`` ``[world]`` are the rows of kept groups each rank holds; ``multiple`` is TRL's
    ``steps_per_generation`` (the batch is split into that many equal chunks); ``floor`` applies when
    no rank holds anything (a step that trains on inert rows only).
    """
    target = int(counts.max()) if counts.size and counts.max() > 0 else floor
    return target + (-target) % multiple


def report_crc(candidates: Sequence[Candidate], rewards: np.ndarray, crc: int) -> int:
    """``crc`` extended with one report: the candidates' ``(dataset, id)`` and the rewards' bytes."""
    crc = zlib.crc32(repr([c.key for c in candidates]).encode(), crc)
    return zlib.crc32(np.ascontiguousarray(rewards, dtype=np.float64).tobytes(), crc)


def _text_crc(value: Any) -> int:
    return zlib.crc32(repr(value).encode())


def start_digest(sched: Scheduler) -> list[int]:
    """What every rank's scheduler must share before the first step (``START_FIELDS``)."""
    datasets = [(s.name, len(s), s.fingerprint) for s in sched.sources]
    return [
        sched.seed,
        _text_crc(sorted(sched.config.to_dict().items())),
        _text_crc(datasets),
        sched.step_index,
        sched.next_ticket,
    ]


def round_digest(sched: Scheduler, candidates: Sequence[Candidate]) -> list[int]:
    """What every rank must have proposed before a round is generated (``ROUND_FIELDS``)."""
    return [sched.step_index, sched.round, len(candidates), _text_crc([c.key for c in candidates])]


def step_digest(sched: Scheduler, reports: int) -> list[int]:
    """The scheduler's state after a step, in a few integers (``STEP_FIELDS``); ``reports`` is the
    running :func:`report_crc` of every report this run made."""
    m = sched.metrics()
    keys = ("total/gen_groups", "total/train_groups", "snooze/asleep", "filter/retired")
    return [sched.step_index, sched.next_ticket, *(int(m.get(k, 0)) for k in keys), reports]


def check_agree(table: np.ndarray, fields: Sequence[str], where: str) -> None:
    """Raise if any rank's row of ``table`` (``[world, len(fields)]``, gathered) differs from rank 0's."""
    table = np.asarray(table).reshape(-1, len(fields))
    for r in range(1, table.shape[0]):
        if not np.array_equal(table[r], table[0]):
            diff = [
                f"{f}: rank 0 {int(a)} vs rank {r} {int(b)}" for f, a, b in zip(fields, table[0], table[r]) if a != b
            ]
            raise IntegrationError(
                f"{where}: the scheduler differs across processes ({'; '.join(diff)}). Every process must build the "
                "same Scheduler (same datasets in the same order, same SchedulerConfig, the same seed, not one per "
                "rank), resume from the same checkpoint, and change it (set_weights, set_excluded, curricula) on "
                "every rank alike, never on the main process only"
            )
