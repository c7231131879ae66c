"""What the scheduler hands out and hands back: `Candidate` and `Batch`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from snooze.data.source import Source

__all__ = ["Candidate", "Batch", "RolloutFn"]


class Candidate:
    """One prompt issued for rollout. ``dataset`` and ``id`` are its stable identity; ``ticket`` is
    unique per issue (the same prompt drawn twice gets two tickets) and is what :meth:`Scheduler.report`
    checks. ``record`` and ``id`` are read from the source on access, so issuing is cheap."""

    __slots__ = ("dataset", "ticket", "row", "_source")

    def __init__(self, source: Source, row: int, ticket: int) -> None:
        self.dataset = source.name
        self.row = row
        self.ticket = ticket
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
        return f"Candidate(dataset={self.dataset!r}, id={self.id!r}, ticket={self.ticket})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Candidate) and other.ticket == self.ticket and other.dataset == self.dataset

    def __hash__(self) -> int:
        return hash(self.ticket)


@dataclass
class Batch:
    """One training step's groups. Shapes: ``rewards`` and ``advantages`` ``[B, G]``; ``signal`` ``[B]``
    (False for zero-signal groups, which enter only under ``grpo`` or as padding)."""

    step: int
    candidates: list[Candidate]
    rewards: np.ndarray
    advantages: np.ndarray
    signal: np.ndarray
    metrics: dict[str, float] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.candidates)


class RolloutFn(Protocol):
    """Rolls out each candidate ``G`` times and returns the rewards, ``[len(candidates), G]``."""

    def __call__(self, candidates: list[Candidate], /) -> Any: ...
