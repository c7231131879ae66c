"""`Components`: every stateful piece of one scheduler, and :meth:`Components.round`, which undoes a
generation round that raises (docs/concepts.md, "The step loop").

Each component keeps its own state and offers ``snapshot()`` / ``restore(snap)`` of it: the streams
their position, the mix its encounter counts, the pending set and the buffers their columns (replaced,
never written in place, so keeping them is O(1)), the metrics their counts, the policy its run-level
state, and the prompt memory a journal of the rows written since its snapshot (undo costs the rows a
round touched, never a copy of the memory; its cached counts come back with them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from snooze.core._buffer import GroupBuffer
from snooze.core._memory import PromptMemory
from snooze.core._metrics import StepMetrics
from snooze.core._mixing import Mix
from snooze.core._pending import PendingSet
from snooze.core._state import BUFFERS, Parts
from snooze.core._stream import DatasetStream
from snooze.core.config import SchedulerConfig
from snooze.core.policies import Policy, make_policy
from snooze.core.source import Source

__all__ = ["Components"]

_BUFFERS = dict(zip(BUFFERS, ("batch", "surplus", "padding")))  # the state's key -> the component


class Components:
    """A scheduler's components, in their starting state (``run_id``: the run's id, a new one by default)."""

    streams: list[DatasetStream]  # per dataset: the order its prompts come up in
    policy: Policy  # what a group's outcome does to its prompt (config.policy)
    memory: PromptMemory  # the per-prompt columns
    mix: Mix  # dataset weights, encounters drawn, batch quotas
    pending: PendingSet  # candidates out for rollout, and the ticket counter
    batch: GroupBuffer  # groups accepted into this step's batch
    surplus: GroupBuffer  # acceptable groups that found no room
    padding: GroupBuffer  # zero-signal groups left out, kept as padding material when on_short='pad'
    step_metrics: StepMetrics  # the step's counts and the totals (steps and rounds among them)

    def __init__(
        self, sources: Sequence[Source], config: SchedulerConfig, seed: int, run_id: str | None = None
    ) -> None:
        names, sizes, G = [s.name for s in sources], [len(s) for s in sources], config.group_size
        self.policy = make_policy(config)
        self.policy.bind(names, sizes)
        self.streams = [DatasetStream(s.name, len(s), seed, config.epochs, config.shuffle) for s in sources]
        self.memory = PromptMemory(sizes, self.policy.columns)
        self.mix = Mix(names, config.weights)
        self.pending = PendingSet(sizes, run_id)
        self.batch, self.surplus, self.padding = GroupBuffer(G), GroupBuffer(G), GroupBuffer(G)
        self.step_metrics = StepMetrics(names)

    def _undoable(self) -> list[Any]:
        """Every component with ``snapshot()`` / ``restore(snap)``; the memory last, so it is restored first."""
        return [
            *self.streams,
            self.mix,
            self.pending,
            self.batch,
            self.surplus,
            self.padding,
            self.step_metrics,
            self.policy,
            self.memory,
        ]

    @contextmanager
    def round(self) -> Iterator[None]:
        """One generation round: if the block raises (anything, ``KeyboardInterrupt`` too), every component is
        put back as it was when the block began, and the error goes on."""
        parts = self._undoable()
        snaps = [part.snapshot() for part in parts]
        try:
            yield
        except BaseException:
            for part, snap in zip(reversed(parts), reversed(snaps)):
                part.restore(snap)
            raise
        finally:
            self.memory.release()

    def new_step(self) -> GroupBuffer:
        """Empty the step's buffers for the next step; returns the surplus that was in them."""
        surplus, G = self.surplus, self.batch.group_size
        self.batch, self.surplus, self.padding = GroupBuffer(G), GroupBuffer(G), GroupBuffer(G)
        return surplus

    # -- state ------------------------------------------------------------------------------------
    def state_parts(self) -> Parts:
        """Every component's ``state_dict()``."""
        return Parts(
            streams=[s.state_dict() for s in self.streams],
            memory=self.memory.state_dict(),
            mix=self.mix.state_dict(),
            pending=self.pending.state_dict(),
            buffers={key: getattr(self, name).state_dict() for key, name in _BUFFERS.items()},
            metrics=self.step_metrics.state_dict(),
            policy=self.policy.state_dict(),
        )

    def load_parts(self, parts: Parts, config: SchedulerConfig) -> None:
        """Each component loads its part (and checks it: a bad part raises, the rest is then left unused)."""
        loads = [
            *zip(self.streams, parts.streams),
            (self.memory, parts.memory),
            (self.mix, parts.mix),
            (self.step_metrics, parts.metrics),
            (self.policy, parts.policy),
        ]
        for component, part in loads:
            component.load_state_dict(part)
        self.pending.load_state_dict(parts.pending, now=self.step_metrics.steps)  # no candidate drawn in the future
        for key, name in _BUFFERS.items():
            getattr(self, name).load_state_dict(parts.buffers[key], self.memory.sizes, name, config.reward_bounds)
