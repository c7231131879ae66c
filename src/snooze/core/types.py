"""What the scheduler hands out and hands back: `Candidate`, `Candidates`, `Batch` with its `StepRecord`, and the
`RolloutFn` it calls."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, overload

import numpy as np
import numpy.typing as npt

from snooze.core.errors import ConfigError, ReportError
from snooze.core.source import Source

__all__ = ["Candidate", "Candidates", "Batch", "StepRecord", "PLACES", "RolloutFn", "Generated", "Issued", "issued_of"]


class Candidate:
    """One prompt issued for rollout. ``dataset`` and ``id`` are its stable identity; ``ticket`` is
    unique per issue (the same prompt drawn twice gets two tickets) and ``run_id`` is the run of the
    scheduler that issued it (:attr:`Scheduler.run_id`): :meth:`Scheduler.report` checks both. ``record``
    and ``id`` are read from the source on access, so issuing is cheap.

    ``n`` is how many rollouts are asked of it now, and how many rewards its report holds: ``group_size`` (a
    whole group) unless screening is on (``SchedulerConfig.screen_size``): then ``screen_size`` for a screen, and
    ``group_size - screen_size`` for the rest of a screened group (the same ticket: its rewards join the first).
    ``n`` is ``None`` only for a candidate built outside a scheduler."""

    __slots__ = ("dataset", "ticket", "row", "run_id", "n", "_source")

    def __init__(self, source: Source, row: int, ticket: int, run_id: str = "", n: int | None = None) -> None:
        self.dataset = source.name
        self.row = row
        self.ticket = ticket
        self.run_id = run_id
        self.n = n
        self._source = source

    @property
    def id(self) -> Any:
        return self._source.id_of(self.row)

    @property
    def record(self) -> Any:
        return self._source.record(self.row)

    @property
    def key(self) -> tuple[str, Any]:
        """``(dataset, id)``: the prompt's identity across epochs, restarts and machines."""
        return (self.dataset, self.id)

    def __repr__(self) -> str:
        return f"Candidate(dataset={self.dataset!r}, id={self.id!r}, ticket={self.ticket}, n={self.n})"

    def __eq__(self, other: object) -> bool:
        mine = (self.ticket, self.dataset, self.row, self.run_id)
        return isinstance(other, Candidate) and (other.ticket, other.dataset, other.row, other.run_id) == mine

    def __hash__(self) -> int:
        return hash(self.ticket)


class Candidates(Sequence[Candidate]):
    """What :meth:`Scheduler.propose` returns: a read-only list of :class:`Candidate`, stored as three
    arrays (``ds``, ``row``, ``ticket``; ``[N]`` each) and the ``run_id`` they share, so issuing and
    reporting thousands of candidates costs numpy work, not Python objects. Indexing, slicing and
    iterating behave like a list. ``n`` (``[N]`` int64, or ``None`` outside a scheduler): the rollouts asked of
    each (:attr:`Candidate.n`); :attr:`width` says whether they are all one number."""

    __slots__ = ("_sources", "ds", "row", "ticket", "run_id", "n")

    def __init__(
        self,
        sources: Sequence[Source],
        ds: np.ndarray,
        row: np.ndarray,
        ticket: np.ndarray,
        run_id: str = "",
        n: np.ndarray | int | None = None,
    ) -> None:
        self._sources = sources
        self.ds, self.row, self.ticket = ds, row, ticket
        self.run_id = run_id
        self.n = np.full(ticket.shape[0], n, dtype=np.int64) if isinstance(n, int) else n

    @property
    def width(self) -> int | None:
        """The rollouts asked of every candidate when they are all one number (``None``: they differ, then report
        one row of ``n[i]`` rewards per candidate, or no candidate / no ``n``)."""
        n = self.n
        if n is None or not n.shape[0]:
            return None
        first = int(n[0])
        return first if bool((n == first).all()) else None

    def __len__(self) -> int:
        return int(self.ticket.shape[0])

    @overload
    def __getitem__(self, i: int) -> Candidate: ...
    @overload
    def __getitem__(self, i: slice) -> Candidates: ...
    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (slice, list, np.ndarray)):
            n = None if self.n is None else self.n[i]
            return Candidates(self._sources, self.ds[i], self.row[i], self.ticket[i], self.run_id, n)
        n = None if self.n is None else int(self.n[i])
        return Candidate(self._sources[int(self.ds[i])], int(self.row[i]), int(self.ticket[i]), self.run_id, n)

    def __iter__(self) -> Iterator[Candidate]:
        sources, run_id = self._sources, self.run_id
        ns = [None] * len(self) if self.n is None else self.n.tolist()
        for d, r, t, n in zip(self.ds.tolist(), self.row.tolist(), self.ticket.tolist(), ns):
            yield Candidate(sources[d], r, t, run_id, n)

    def __repr__(self) -> str:
        return f"Candidates({len(self)}: {list(self)[:3]}{'...' if len(self) > 3 else ''})"


class Issued(NamedTuple):
    """What a report names: each candidate's ``ticket``, ``ds`` (dataset index) and ``row``, ``[N]`` int64 each."""

    ticket: np.ndarray
    ds: np.ndarray
    row: np.ndarray


def issued_of(candidates: Sequence[Candidate], run_id: str, names: Sequence[str]) -> Issued:
    """The tickets and prompts of a report: what :meth:`Scheduler.propose` of the scheduler of run
    ``run_id`` returned, or a list of its :class:`Candidate` items, each once (``names``:
    that scheduler's datasets). Raises :class:`ReportError` otherwise."""
    if isinstance(candidates, Candidates):
        if candidates.run_id != run_id:
            raise _foreign(candidates.run_id, run_id)
        issued = Issued(candidates.ticket, candidates.ds, candidates.row)
    elif isinstance(candidates, Sequence) and not isinstance(candidates, (Candidate, str, bytes)):
        issued = _from_list(candidates, run_id, names)
    else:
        raise ReportError(
            "report() takes the candidates that propose() returned (or a list of them), "
            f"got {type(candidates).__name__}"
        )
    tickets = issued.ticket
    if tickets.shape[0] > 1 and not (tickets[1:] > tickets[:-1]).all():  # in issue order: distinct, no sort
        uniq, counts = np.unique(tickets, return_counts=True)
        if (counts > 1).any():
            t = int(uniq[counts > 1][0])
            raise ReportError(
                f"candidate with ticket {t} appears {int(counts.max())} times in one report; report each once"
            )
    return issued


def _from_list(candidates: Sequence[Any], run_id: str, names: Sequence[str]) -> Issued:
    for i, c in enumerate(candidates):
        if not isinstance(c, Candidate):
            raise ReportError(f"item {i} of the report is a {type(c).__name__}, not a Candidate from propose()")
        if c.run_id != run_id:
            raise _foreign(c.run_id, run_id)
    index = {name: d for d, name in enumerate(names)}
    n = len(candidates)
    try:
        return Issued(
            np.fromiter((c.ticket for c in candidates), dtype=np.int64, count=n),
            np.fromiter((index[c.dataset] for c in candidates), dtype=np.int64, count=n),  # same run: same datasets
            np.fromiter((c.row for c in candidates), dtype=np.int64, count=n),
        )
    except (KeyError, TypeError, ValueError, OverflowError):
        raise ReportError(
            "a Candidate of the report was altered (its ticket, row or dataset is not what was issued)"
        ) from None


def _foreign(theirs: str, mine: str) -> ReportError:
    return ReportError(
        f"candidates issued by another scheduler (run {theirs or '?'}) were reported to this one (run {mine}); report "
        "candidates to the scheduler whose propose() returned them (a save/load of that run keeps its run_id). "
        "Nothing was recorded."
    )


PLACES: tuple[str, ...] = ("trained", "padded", "surplus", "padding", "carried", "discarded", "dropped", "too_stale")
"""Where a group of a step went (:class:`StepRecord`). ``trained``: in the batch; ``padded``: a zero-signal
group that filled a short batch (``on_short="pad"``); ``carried``: a surplus group kept for the next step
(``carry_surplus``); ``discarded``: a surplus group that found no room (or a carried one that found none in
the next step); ``dropped``: a zero-signal group left out; ``too_stale``: reported more than ``max_staleness``
steps after its draw. While a step is being built, ``surplus`` (acceptable, no room yet) and ``padding`` (kept
as padding material) are not final: the step's close decides them."""


class StepRecord(NamedTuple):
    """Where every group of one step went: one entry per group reported in the step or carried into it.

    ``ticket``, ``ds`` (dataset index), ``outcome`` (:data:`~snooze.SIGNAL`, ...), ``place`` (an index into
    :data:`PLACES`), ``audit`` (the group audits a skipped encounter) and ``carried_in`` (it came from the
    step before), ``[K]`` each, in the order the groups arrived. :attr:`Batch.record` holds a finished
    step's; :meth:`Scheduler.step_record` the record so far of the step being built."""

    step: int
    ticket: np.ndarray
    ds: np.ndarray
    outcome: np.ndarray
    place: np.ndarray
    audit: np.ndarray
    carried_in: np.ndarray

    def where(self, *places: str) -> np.ndarray:
        """``[K]`` bool: the groups that went to one of ``places`` (names of :data:`PLACES`)."""
        unknown = [p for p in places if p not in PLACES]
        if unknown:
            raise ConfigError(f"unknown place(s) {unknown}: choose from {', '.join(PLACES)}")
        wanted = np.zeros(len(PLACES), dtype=bool)
        wanted[[PLACES.index(p) for p in places]] = True
        return wanted[self.place]

    def tickets(self, *places: str) -> np.ndarray:
        """The tickets of the groups that went to one of ``places``, in arrival order."""
        return self.ticket[self.where(*places)]

    def counts(self) -> dict[str, int]:
        """How many groups went to each place (every name of :data:`PLACES`)."""
        n = np.bincount(self.place, minlength=len(PLACES))
        return {name: int(n[i]) for i, name in enumerate(PLACES)}


@dataclass
class Batch:
    """One training step's groups. Shapes: ``rewards`` and ``advantages`` ``[B, G]``; ``signal`` ``[B]``
    (False for zero-signal groups, which enter only under ``grpo`` or as padding). ``record``: where every
    group the step generated (or carried in) went, the trained ones among them."""

    step: int
    candidates: Sequence[Candidate]
    rewards: np.ndarray
    advantages: np.ndarray
    signal: np.ndarray
    record: StepRecord
    metrics: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.candidates)


@dataclass(frozen=True)
class Generated:
    """What a :class:`RolloutFn` may return in place of bare rewards, to say what the round cost: ``rewards``
    ``[len(candidates), G]`` and ``tokens`` ``[len(candidates)]``, each candidate's completion tokens summed over
    its rollouts (integers >= 0). :meth:`Scheduler.step` reports both, as ``report(candidates, rewards,
    tokens=tokens)`` does (docs/metrics.md, ``gen/tokens``)."""

    rewards: npt.ArrayLike
    tokens: npt.ArrayLike


class RolloutFn(Protocol):
    """Rolls out each candidate ``G`` times and returns the rewards, ``[len(candidates), G]``, or a
    :class:`Generated` with the tokens it generated beside them: what :meth:`Scheduler.step` calls once per
    generation round with what :meth:`Scheduler.propose` returned."""

    def __call__(self, candidates: Candidates, /) -> npt.ArrayLike | Generated: ...
