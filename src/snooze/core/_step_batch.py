"""`StepBatch`: the batch of the step being built (docs/concepts.md, "Who owns what").

It owns everything about it: every group of the step and where it went (:class:`~._groups.Groups`:
in the batch, surplus, padding material, dropped, too stale), the generation rounds so far, the
per-dataset quotas of ``mix="quota"`` and the rule that closes the step (:meth:`StepBatch.close`).
Which datasets can still send groups (for the quotas) it asks of ``supply``, a function the
scheduler's composition gives it: the datasets that can draw, those with candidates out, and those
of the groups arriving.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from snooze._kit.state import state_int
from snooze.core._groups import Groups
from snooze.core._mixing import Mix, batch_fits
from snooze.core.classify import SIGNAL
from snooze.core.config import SchedulerConfig
from snooze.core.errors import BatchShortError, StateError, StateMismatchError
from snooze.core.types import PLACES, StepRecord

__all__ = ["StepBatch", "Closed"]

Supply = Callable[[np.ndarray | None], np.ndarray]
"""``(ds of the groups arriving, or None) -> [D] bool``: the datasets whose groups can still reach the batch."""

(TRAINED, PADDED, SURPLUS, PADDING, CARRIED, DISCARDED, DROPPED, TOO_STALE) = range(len(PLACES))
_BATCH_COLUMNS = ("ds", "row", "ticket", "outcome", "rewards")  # what a Batch is made of
_FINAL = np.arange(len(PLACES), dtype=np.int8)  # place -> its place once the step is closed: surplus is discarded,
_FINAL[[SURPLUS, PADDING]] = (DISCARDED, DROPPED)  # unused padding material dropped
_FINAL_CARRIED = _FINAL.copy()
_FINAL_CARRIED[SURPLUS] = CARRIED  # (carry_surplus: surplus is carried)


class Closed(NamedTuple):
    """What closing a step gives the scheduler."""

    batch: Groups  # the batch's groups, in batch order
    record: StepRecord  # where every group of the step went
    starved: np.ndarray  # [D] quota mix: the dataset could not fill its quota
    bound: bool  # max_gen_rounds was reached with the batch not full


class StepBatch:
    """The groups of the step being built, where each went, the rounds so far; quotas and the closing rule."""

    def __init__(self, config: SchedulerConfig, mix: Mix, supply: Supply, zero_signal: bool = False) -> None:
        """``zero_signal``: the policy trains on zero-signal groups too (``grpo``)."""
        self.size, self.group_size = config.batch_size, config.group_size
        self.max_rounds, self.on_short, self.carry = config.max_gen_rounds, config.on_short, config.carry_surplus
        self.quota = config.mix == "quota"
        self.mix, self.supply, self.zero_signal = mix, supply, zero_signal
        self.groups = Groups(self.group_size)
        self.rounds = 0  # generation rounds of this step
        self.n, self.per_ds = 0, np.zeros(len(mix.names), dtype=np.int64)  # groups in the batch: all, per dataset

    # -- questions --------------------------------------------------------------------------------
    @property
    def full(self) -> bool:
        return self.n >= self.size

    def room(self) -> int:
        """Batch slots still open."""
        return max(self.size - self.n, 0)

    def wants_round(self) -> bool:
        """The batch is not full and fewer than ``max_gen_rounds`` rounds were drawn."""
        return not self.full and self.rounds < self.max_rounds

    def open_slots(self, arriving: np.ndarray | None = None) -> np.ndarray:
        """``[D]`` quota slots still open per dataset (``mix="quota"``)."""
        return np.maximum(self.mix.quotas(self.supply(arriving), self.per_ds, self.size) - self.per_ds, 0)

    def in_batch(self, tickets: np.ndarray) -> np.ndarray:
        """``[N]`` whether each ticket's group is in the batch."""
        return np.isin(tickets, self.groups.ticket[self.groups.slot >= 0])

    def record(self, step: int) -> StepRecord:
        """Where each group of the step went so far (a finished step's, after :meth:`close`)."""
        g = self.groups
        return StepRecord(step, *(_read_only(a) for a in (g.ticket, g.ds, g.outcome, g.place, g.audit, g.carried_in)))

    # -- building -----------------------------------------------------------------------------------
    def open_round(self) -> None:
        self.rounds += 1

    def place(self, new: Groups, stale: np.ndarray | None = None) -> None:
        """Place a report's groups. Acceptable (a group with signal, or any when the policy trains on zero-signal
        groups; an audit group only with signal; a too stale one, ``stale``, never): into the batch while there
        is room (and quota), the rest to surplus. The others: padding material (``on_short="pad"``; never an
        audit or too stale group), too stale, or dropped."""
        signal = new.outcome == SIGNAL
        ok = (~new.audit | signal) & (True if self.zero_signal else signal) & (True if stale is None else ~stale)
        out = np.where(ok, SURPLUS, DROPPED).astype(np.int8)
        if self.on_short == "pad":  # zero-signal groups are kept as padding material only
            out[~ok & ~new.audit] = PADDING
        if stale is not None:
            out[stale] = TOO_STALE
        self._enter(new, self._fits(new.ds, ok), out)

    def place_stopped(self, new: Groups) -> None:
        """Screens stopped after their first k rollouts (``screen_size``): dropped, never padding material (their
        rewards are k wide, a batch's G)."""
        self._enter(new, np.zeros(len(new), dtype=bool), np.full(len(new), DROPPED, dtype=np.int8))

    def _fits(self, ds: np.ndarray, acceptable: np.ndarray) -> np.ndarray:
        open_slots = self.open_slots(ds) if self.quota else None
        return batch_fits(ds, acceptable, self.room(), open_slots)

    def _enter(self, new: Groups, fits: np.ndarray, place: np.ndarray) -> None:
        """Append ``new`` with ``place``; the groups that ``fits`` go into the batch, in order."""
        k = int(np.count_nonzero(fits))
        new.place = np.where(fits, np.int8(TRAINED), place).astype(np.int8)
        new.slot = np.full(len(new), -1, dtype=np.int64)
        new.slot[fits] = np.arange(self.n, self.n + k)
        self.groups.append(new)
        self._count(new.ds[fits])

    def _count(self, ds: np.ndarray) -> None:
        """Groups of datasets ``ds`` entered the batch (a new array: snapshots keep the old one)."""
        self.n += int(ds.shape[0])
        self.per_ds = self.per_ds + np.bincount(ds, minlength=self.per_ds.shape[0])

    def _move(self, source: int, k: int, to: int) -> None:
        """The first ``k`` groups at place ``source`` go into the batch as ``to``."""
        index = np.flatnonzero(self.groups.place == source)[:k] if k > 0 else []
        if len(index):
            self.groups.set(index, to, np.arange(self.n, self.n + len(index)))
            self._count(self.groups.ds[index])

    # -- closing ----------------------------------------------------------------------------------
    def refuse_short(self, step: int, exhausted: Callable[[], bool]) -> None:
        """``on_short="raise"``: a batch the surplus cannot fill is a :class:`BatchShortError`, nothing changed."""
        if self.on_short != "raise" or self.full:
            return
        room = self.room()
        surplus = int(np.count_nonzero(self.groups.place == SURPLUS)) if self.quota else 0
        if room > min(room, surplus):
            raise BatchShortError.at(step, self.n, self.size, self.rounds, self.max_rounds, exhausted())

    def close(self, step: int, exhausted: Callable[[], bool]) -> Closed:
        """Close the step: refuse a short batch (``on_short="raise"``), give a starved dataset's slots to the
        rest (quota mix), pad (``on_short="pad"``), then carry or discard the surplus."""
        self.refuse_short(step, exhausted)
        starved = np.zeros(len(self.mix.names), dtype=bool)
        if self.quota:
            starved = self.open_slots() > 0
            self._move(SURPLUS, self.room(), TRAINED)  # starved slots go to the rest
        bound = not self.full and self.rounds >= self.max_rounds  # the round limit, not the data, stopped it
        if self.on_short == "pad":
            self._move(PADDING, self.room(), PADDED)
        g = self.groups
        g.place = _FINAL_CARRIED[g.place] if self.carry else _FINAL[g.place]  # a new column: snapshots keep theirs
        inside = np.flatnonzero(g.slot >= 0)
        batch = g.select(inside[np.argsort(g.slot[inside], kind="stable")], _BATCH_COLUMNS)
        return Closed(batch, self.record(step), starved, bound)

    def next_step(self) -> None:
        """An empty batch for the next step; the carried groups go first, and what does not fit is discarded
        (never carried twice)."""
        carried = self.groups.select(self.groups.place == CARRIED) if self.carry else None
        self.groups, self.rounds, self.n, self.per_ds = Groups(self.group_size), 0, 0, np.zeros_like(self.per_ds)
        if carried is not None and len(carried):
            carried.carried_in = np.ones(len(carried), dtype=bool)
            everything = np.ones(len(carried), dtype=bool)
            self._enter(carried, self._fits(carried.ds, everything), np.full(len(carried), DISCARDED, np.int8))

    def drop_carried(self) -> int:
        """The groups carried into this step leave its batch as discarded (their completions are gone); only
        before its first round, when they are all it holds. Returns how many left."""
        g = self.groups
        gone = np.flatnonzero(g.carried_in & (g.slot >= 0))
        if len(gone):
            g.set(gone, DISCARDED)
            self.n, self.per_ds = 0, np.zeros_like(self.per_ds)
        return len(gone)

    # -- undo and state ---------------------------------------------------------------------------
    def snapshot(self) -> tuple[Any, ...]:
        return self.groups.columns(), self.rounds, self.n, self.per_ds

    def restore(self, snap: tuple[Any, ...]) -> None:
        columns, self.rounds, self.n, self.per_ds = snap
        self.groups.restore(columns)

    def state_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "groups": self.groups.state_dict()}

    def load_state_dict(
        self, state: Mapping[str, Any], sizes: Sequence[int], reward_range: tuple[float, float]
    ) -> None:
        """The rounds and the groups of a step saved while it was being built (no final place among them)."""
        rounds = state_int(state["rounds"], "step_batch.rounds")
        groups = Groups(self.group_size)
        groups.load_state_dict(state["groups"], sizes, reward_range)
        inside, n = groups.slot >= 0, int(np.count_nonzero(groups.slot >= 0))
        one_slot_each = np.array_equal(np.sort(groups.slot[inside]), np.arange(n))
        if (
            (inside != (groups.place == TRAINED)).any()
            or not one_slot_each
            or np.isin(groups.place, [PADDED, CARRIED]).any()
        ):
            raise StateError("the step's groups hold places or batch slots no open step has; the state is corrupt")
        boundary = rounds == 0 and bool(groups.carried_in.all())  # nothing of the step but what was carried in
        if n > self.size and not boundary:
            raise StateMismatchError(
                f"the state was saved mid-step with {n} groups in its batch, more than batch_size={self.size}; "
                f"load it with batch_size >= {n}, finish that step, then change the batch size"
            )
        self.groups, self.rounds, self.n = groups, rounds, n
        self.per_ds = np.bincount(groups.ds[inside], minlength=self.per_ds.shape[0]).astype(np.int64)
        if n > self.size:
            self._refit_carried()

    def _refit_carried(self) -> None:
        """A state saved at a step boundary, loaded with a smaller ``batch_size``: its carried groups enter the
        batch again as :meth:`next_step` enters them (in batch order, under this config's quotas), and those that
        do not fit are discarded, never carried twice."""
        g = self.groups
        inside = np.flatnonzero(g.slot >= 0)
        inside = inside[np.argsort(g.slot[inside], kind="stable")]
        self.n, self.per_ds = 0, np.zeros_like(self.per_ds)
        g.set(inside, DISCARDED)
        fits = self._fits(g.ds[inside], np.ones(inside.shape[0], dtype=bool))
        kept = inside[fits]
        g.set(kept, TRAINED, np.arange(kept.shape[0]))
        self._count(g.ds[kept])


def _read_only(column: np.ndarray) -> np.ndarray:
    view = column.view()
    view.flags.writeable = False
    return view
