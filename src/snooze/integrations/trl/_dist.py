"""How :class:`~snooze.integrations.trl.SnoozeGRPOTrainer` spreads one scheduler step over N processes.

Nothing is broadcast. Every rank builds the same :class:`~snooze.Scheduler` (same datasets, config and
seed), so every rank proposes the same candidates; TRL's ``_calculate_rewards`` ends with
``gather(rewards_per_func)``, so every rank reports the same rewards, in the same order, and reaches
the same decisions. What this module decides is the layout of one generation round:

- The round's rows are whole groups of ``G`` rows (one *slot* per group), padded with whole *inert*
  groups up to a multiple of ``lcm(world, G)`` rows: every rank then gets the same number of rows
  ``P`` (TRL's collectives need equal shapes, and vLLM server mode slices by
  ``process_index * len(prompts)``), and the gathered rewards still split into whole groups (TRL's
  ``view(-1, num_generations)``; vLLM server mode's ``all_prompts[::num_generations]``). Rank ``r``
  generates the contiguous rows ``[r*P, (r+1)*P)``.
- Candidates are dealt to the ranks in turn (candidate 0 to the first slot of rank 0, candidate 1
  to the first slot of rank 1, ...), not in contiguous runs: the scheduler fills the batch with the
  *first* signal groups of the last round, and kept groups stay on the rank that generated them, so
  contiguous runs would pile the batch onto the first ranks (every rank trains on as many rows as the
  fullest one). ``benchmarks/trl_ranks.py`` measures what is left.
- A group lies on one rank whenever ``P`` is a multiple of ``G`` (the round's groups split evenly over
  the ranks, the usual case); otherwise a few groups span two ranks, as in TRL's own layout when
  ``per_device_train_batch_size < num_generations``: TRL groups the gathered rewards before each rank
  takes its slice back, so the advantages are the same, and each rank trains on its own rows of a kept
  group. This costs no padding; keeping every group whole would generate up to ``world - 1`` inert
  groups a round instead.
- Pad groups take the last slots in the dealing order, are generated and scored like any row (they
  copy the last candidate's record), and are never reported to the scheduler nor trained on.

Also here: the digests the ranks compare (when the trainer is built: seed, config and data; before
each round: the proposal; after each step: the scheduler's counters and a checksum of the step's
reports), and the check that compares them.
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
    pad_groups: int  # inert groups generated with the real ones
    slots: np.ndarray  # [groups + pad_groups]: candidate i's group is global rows [slots[i]*G, (slots[i]+1)*G)

    def spread(self, i: int) -> np.ndarray:
        """``[world]``: how many rows of candidate ``i``'s group each rank holds."""
        G, P, s = self.group_size, self.rows_per_rank, int(self.slots[i])
        starts = np.arange(self.world, dtype=np.int64) * P
        return np.clip(np.minimum(starts + P, (s + 1) * G) - np.maximum(starts, s * G), 0, None)

    def local(self, i: int, rank: int) -> tuple[int, int]:
        """Candidate ``i``'s rows on ``rank``, as a ``[lo, hi)`` range of that rank's round output (may be empty)."""
        G, P, s = self.group_size, self.rows_per_rank, int(self.slots[i])
        lo, hi = max(s * G, rank * P), min((s + 1) * G, (rank + 1) * P)
        return (lo - rank * P, hi - rank * P) if hi > lo else (0, 0)

    def candidates_of(self, rank: int) -> np.ndarray:
        """``[P]``: the candidate each of ``rank``'s rows rolls out (``-1``: a pad row)."""
        owner = np.full(self.slots.shape[0], -1, dtype=np.int64)
        owner[self.slots[: self.groups]] = np.arange(self.groups)
        rows = np.arange(rank * self.rows_per_rank, (rank + 1) * self.rows_per_rank)
        return owner[rows // self.group_size]

    def group_rewards(self, per_slot: np.ndarray) -> np.ndarray:
        """``[groups, G]`` candidate rewards from the gathered ``[slots, G]`` (TRL's row order)."""
        return per_slot[self.slots[: self.groups]]


def deal_slots(n_slots: int, group_size: int, rows_per_rank: int) -> np.ndarray:
    """Slots in dealing order: the first slot starting on each rank, then the second, ...

    A slot belongs to the rank its first row is on.

    >>> deal_slots(4, 2, 4).tolist()  # ranks hold slots (0, 1) and (2, 3): deal 0, 2, 1, 3
    [0, 2, 1, 3]
    """
    slot = np.arange(n_slots, dtype=np.int64)
    rank = slot * group_size // rows_per_rank
    turn = slot - np.searchsorted(rank, rank, side="left")  # the slot's place among its rank's slots
    return np.lexsort((rank, turn))


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
    P, n_slots = total // world, total // group_size
    return RoundLayout(groups, group_size, world, P, n_slots - groups, deal_slots(n_slots, group_size, P))


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
        sched.seed % (1 << 63),  # one int64 (the seed may be any integer >= 0)
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
    :func:`report_crc` of the step's reports (so a resumed run's digests equal the uninterrupted run's)."""
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
                "rank), resume from the same checkpoint, and change it (set_weights, set_excluded, set_stage, "
                "curricula) on every rank alike, never on the main process only"
            )
