"""`Components`: every stateful piece of one scheduler, and :meth:`Components.round`, which undoes a
generation round that raises (docs/concepts.md, "The step loop").

Each component keeps its own state and offers ``snapshot()`` / ``restore(snap)`` of it: the streams
their position, the mix its encounter counts, the pending set and the step batch their columns
(replaced, never written in place, so keeping them is O(1)), the metrics their counts, the policy its
run-level state, and the prompt memory a journal of the rows written since its snapshot (undo costs the
rows a round touched, never a copy of the memory; its cached counts come back with them).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from snooze._kit.checks import is_int
from snooze._kit.json import plain_problem
from snooze.core._audit import Audit
from snooze.core._draw import drawable
from snooze.core._memory import PromptMemory
from snooze.core._metrics import StepMetrics
from snooze.core._mixing import Mix
from snooze.core._pending import PendingSet
from snooze.core._screen import Screens
from snooze.core._state import Parts
from snooze.core._step_batch import StepBatch
from snooze.core._stream import DatasetStream
from snooze.core.config import SchedulerConfig
from snooze.core.errors import PolicyConformanceError
from snooze.core.policies import Context, Policy, make_policy
from snooze.core.saved import Shape
from snooze.core.source import Source

__all__ = ["Components"]


class Components:
    """A scheduler's components, in their starting state (``run_id``: the run's id, a new one by default)."""

    streams: list[DatasetStream]  # per dataset: the order its prompts come up in
    policy: Policy  # what a group's outcome does to its prompt (config.policy)
    memory: PromptMemory  # the per-prompt columns
    mix: Mix  # dataset weights, encounters drawn
    pending: PendingSet  # candidates out for rollout, and the ticket counter
    step: StepBatch  # the batch being built: its groups and where each went, rounds, quotas, the close
    step_metrics: StepMetrics  # the step's counts and the totals (finished steps among them)
    audit: Audit  # the audit's share, each round's budget, its evidence and alarms (snooze.core._audit)
    screens: Screens | None  # partial groups (screen_size set): screens waiting for their rest, and their counts

    def __init__(
        self, sources: Sequence[Source], config: SchedulerConfig, seed: int, run_id: str | None = None
    ) -> None:
        names, sizes = tuple(s.name for s in sources), tuple(len(s) for s in sources)
        assert config.options is not None  # (a checked config always holds its policy's options)
        self.policy = make_policy(config.policy, config.options, Context(names, sizes, config.group_size, seed))
        if self.policy.skip_mask is not None and not (is_int(self.policy.patience) and self.policy.patience >= 1):
            raise PolicyConformanceError(
                f"policy {config.policy!r}: patience={self.policy.patience!r} must be an integer >= 1 (whole epochs "
                "a draw walks with everything skipped before it gives up on a dataset for the round)"
            )
        self.streams = [DatasetStream(s.name, len(s), seed, config.epochs, config.shuffle) for s in sources]
        self.memory = PromptMemory(sizes, self.policy.columns)
        self.mix = Mix(names, config.weights)
        self.pending = PendingSet(sizes, run_id)
        self.step = StepBatch(config, self.mix, self.supply, self.policy.trains_on_zero_signal)
        shape = Shape(config.batch_size, config.whole_gen_size, config.max_gen_rounds)
        self.audit = Audit(config.audit, seed, shape, config.guard)
        self.step_metrics = StepMetrics(names, config.group_size, self.audit)
        self.screens = Screens(config.screen_size, config.group_size) if config.screen_size is not None else None
        self.finite = config.epochs is not None
        self._open = False  # a round() is open (the undo of a nested one is the outer one's)

    def active(self) -> np.ndarray:
        """``[D]``: the dataset is in the mix and can still give a prompt."""
        return drawable(self.memory.tables, self.streams, self.mix.weights)

    def supply(self, arriving: np.ndarray | None = None) -> np.ndarray:
        """``[D]``: groups of the dataset can still reach the batch: it can draw, or (finite epochs: a stream is
        used up only then) candidates of it are out, or groups of it are ``arriving``. A dataset keeps its
        quota while so, even when its stream is used up: the round that exhausts it is trained on."""
        active = self.active()
        if self.finite:
            active[self.pending.ds] = True
            if arriving is not None:
                active[arriving] = True
            active &= self.mix.weights > 0
        return active

    def _undoable(self) -> list[Any]:
        """Every component with ``snapshot()`` / ``restore(snap)``; the memory last, so it is restored first."""
        policy = _PolicyUndo(self.policy)
        screens = [] if self.screens is None else [self.screens]
        return [
            *self.streams,
            self.mix,
            self.pending,
            *screens,
            self.step,
            self.step_metrics,
            self.audit,
            policy,
            self.memory,
        ]

    @contextmanager
    def round(self) -> Iterator[None]:
        """One generation round, or one call that changes the state (``propose``, ``report``, ``finish_step``): if
        the block raises (anything, ``KeyboardInterrupt`` too), every component is put back as it was when the
        block began, and the error goes on. Inside an open one (``step()``'s round holds its ``propose`` and
        ``report``) it adds nothing: the outer one undoes it all."""
        if self._open:
            yield
            return
        parts = self._undoable()
        snaps = [part.snapshot() for part in parts]
        self._open = True
        try:
            yield
        except BaseException:
            for part, snap in zip(reversed(parts), reversed(snaps)):
                part.restore(snap)
            raise
        finally:
            self._open = False
            self.memory.release()

    # -- state ------------------------------------------------------------------------------------
    def state_parts(self) -> Parts:
        """Every component's ``state_dict()``; a policy state the saved format cannot hold is a
        :class:`PolicyConformanceError` naming the policy and the value."""
        policy = self.policy.state_dict()
        problem = plain_problem(policy, "state_dict()")
        if problem:
            raise PolicyConformanceError(
                f"policy {self.policy.name!r}: its {problem}; a policy's state may hold only dicts with string "
                "keys, lists, strings, booleans, integers, finite floats and None (docs/concepts.md, "
                '"Writing a policy"), so that it can be saved'
            )
        return Parts(
            streams=[s.state_dict() for s in self.streams],
            memory=self.memory.state_dict(),
            mix=self.mix.state_dict(),
            pending=self.pending.state_dict(),
            step=self.step.state_dict(),
            metrics=self.step_metrics.state_dict(),
            audit=self.audit.state_dict(),
            policy=policy,
            screens={} if self.screens is None else self.screens.state_dict(),
        )

    def load_parts(self, parts: Parts, config: SchedulerConfig) -> None:
        """Each component loads its part (and checks it: a bad part raises, the rest is then left unused)."""
        loads = [
            *zip(self.streams, parts.streams),
            (self.memory, parts.memory),
            (self.mix, parts.mix),
            (self.step_metrics, parts.metrics),
            (self.audit, parts.audit),
            (self.policy, parts.policy),
        ]
        for component, part in loads:
            component.load_state_dict(part)
        self.pending.load_state_dict(parts.pending, now=self.step_metrics.steps)  # no candidate drawn in the future
        self.step.load_state_dict(parts.step, self.memory.sizes, config.reward_bounds)
        if self.screens is not None and parts.screens:
            self.screens.load_state_dict(parts.screens, self.pending.ticket, config.reward_bounds)


class _PolicyUndo:
    """The policy's run-level state as an undoable part: its ``state_dict()``, put back with ``load_state_dict``
    (a policy that keeps none, ``{}``, has nothing to put back)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def snapshot(self) -> dict[str, Any]:
        return self.policy.state_dict()

    def restore(self, snap: dict[str, Any]) -> None:
        if snap:
            self.policy.load_state_dict(snap)
