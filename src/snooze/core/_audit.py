"""The audit, as one component: its share, each round's budget, the evidence it gathers, its alarms, and
their undo and state (docs/concepts.md, "The audit"; docs/metrics.md).

A share ``SchedulerConfig.audit`` of the encounters a policy skips before any rollout is rolled out anyway,
and at most that share of each generation round (:func:`audit_budget`: an audit group fills a slot of the
round, so the audit's cost is bounded by its share of generation whatever the policy skips). Which ones is a
stateless hash of ``(seed, dataset, row, epoch)`` (:func:`~snooze.core._hash.audit_uniform`; a prompt comes up
once per epoch, so the epoch is its encounter number): the same on every machine and across a resume, and
independent of everything the run has seen, so the audited encounters are a uniform random sample of the
skipped ones the walk looks at (the first of them in stream order, up to the round's budget; a leap over
prompts that are all asleep looks at none). Their signal rate is an unbiased estimate of the signal rate of
the encounters the policy skips, and ``(skipped - audited) x that rate`` estimates the signal groups given up.
An audit group reaches the policy only through :meth:`Policy.audited` (nothing by default: the memory evolves
as if it had been skipped).

The scheduler talks to the audit at four points and nowhere else: a round opens (:meth:`Audit.open_round`:
its budget), a walk took audits (:meth:`Audit.walked`), a report's groups arrive (:meth:`Audit.record`), and
a step ends (:meth:`Audit.finish`: the metrics, the alarms). Everything the audit knows is here, undone with
the round that raises (:meth:`snapshot` / :meth:`restore`) and saved with the scheduler (:meth:`state_dict`,
at ``meta.metrics.diagnosis`` of the state file). So:

- a new alarm statistic reads the evidence a step leaves (:attr:`Diagnosis.step`, then the run's
  :attr:`Diagnosis.totals`, in :class:`~snooze.core._diagnosis.Diagnosis`) and keeps its state beside the
  others' (:attr:`Diagnosis.warned`);
- the guard acts through what this component hands the walk (:attr:`Audit.walk_share` and :attr:`Audit.left`).

**The guard.** From the step after the skipping alarm fired (:func:`~snooze.core._diagnosis.skipping_costs`) to
the run's end, a guarded audit (``SchedulerConfig.guard``, on by default) rolls out *every* encounter the policy
skips: the walk's share is 1 and a round's budget is the round. The policy still decides (its memory, counters and
masks go on as before, and its metrics still say what it would skip), but nothing it skips is left out of
generation: the run generates as DAPO does, keeping what the policy does not skip, such as the surplus carried
(``carry_surplus``). One-way and saved with the alarm's state (``metrics.diagnosis.warned.skipping``), so a
resumed run stays guarded; ``snooze/guard/on`` is 1 at every step it acts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from snooze._kit.state import state_int
from snooze.core._diagnosis import Diagnosis
from snooze.core._hash import stable_uniform
from snooze.core.saved import Shape

__all__ = ["Audit", "audit_budget", "carried_over"]

_NO_SHAPE = Shape(1, 1, 1)  # an audit built only to read a state (a migration)


def audit_budget(share: float, n: int, seed: int, step: int, round_: int) -> int:
    """Audits a round of ``n`` candidates may take: ``share x n`` rounded up or down at random (a hash of
    ``(seed, step, round)``: stateless), so over a run the audit costs at most ``share`` of generation."""
    if not share:
        return 0
    exact = share * n
    u = stable_uniform(seed, 0, step, np.array([round_]), "budget")[0]
    return int(np.floor(exact)) + int(u < exact - np.floor(exact))


class Audit:
    """The audit of one scheduler: ``share`` (``SchedulerConfig.audit``), ``seed`` (the scheduler's), ``shape``
    (the step's sizes, for ``snooze/saved/*``), ``guard`` (``SchedulerConfig.guard``); the round's budget
    (:attr:`left`) and the diagnosis."""

    def __init__(self, share: float = 0.0, seed: int = 0, shape: Shape = _NO_SHAPE, guard: bool = False) -> None:
        self.share, self.seed, self.shape, self.guard = float(share), int(seed), shape, bool(guard)
        self.left = 0  # audits the round being drawn may still take (set when a round opens)
        self.diagnosis = Diagnosis()  # the evidence, per step and over the run, and the alarms' state

    # -- the rounds ---------------------------------------------------------------------------------
    @property
    def guarded(self) -> bool:
        """Whether the guard acts now: on, and the skipping alarm fired at an earlier step."""
        return self.guard and self.diagnosis.warned["skipping"]

    @property
    def walk_share(self) -> float:
        """The share of skipped encounters a walk rolls out: the audit's, or all of them while guarded."""
        return 1.0 if self.guarded else self.share

    def open_round(self, n: int, step: int, round_: int) -> None:
        """A generation round of ``n`` candidates opens (``round_``-th of step ``step``): its budget (the whole
        round while guarded)."""
        self.left = int(n) if self.guarded else audit_budget(self.share, n, self.seed, step, round_)

    def walked(self, audits: int, auditable: int) -> None:
        """A walk of the round issued ``audits`` audits, among ``auditable`` encounters the policy skipped (the
        population the audit samples)."""
        self.left -= int(audits)
        self.diagnosis.add_skips(auditable)

    # -- evidence and the step's end ----------------------------------------------------------------
    def record(
        self, audit: np.ndarray, outcomes: np.ndarray, rewards: np.ndarray, reward_range: tuple[float, float]
    ) -> None:
        """A report's groups (``audit`` ``[N]`` marks the audit groups): :meth:`Diagnosis.record`."""
        self.diagnosis.record(audit, outcomes, rewards, reward_range)

    def finish(self, out: dict[str, Any], bound: bool, counts: tuple[int, int, int, int]) -> None:
        """The step ended: its metrics into ``out``, the alarms checked (:meth:`Diagnosis.finish`);
        ``snooze/guard/on``: whether the guard acted at this step (it acts from the step after the alarm)."""
        out["snooze/guard/on"] = int(self.guarded)
        self.diagnosis.finish(out, bound, counts, self.share, self.shape, self.guard)

    def cumulative(self) -> dict[str, Any]:
        """The run's totals as metrics (``total/audit_*``, ``total/drawn_*``)."""
        return self.diagnosis.cumulative()

    @property
    def dapo_groups(self) -> float:
        """Groups DAPO would have generated over the run so far (``total/saved_dapo_groups``)."""
        return float(self.diagnosis.totals["dapo_groups"])

    # -- undo and state -----------------------------------------------------------------------------
    def snapshot(self) -> tuple[Any, ...]:
        return self.left, self.diagnosis.snapshot()

    def restore(self, snap: tuple[Any, ...]) -> None:
        self.left, diagnosis = snap
        self.diagnosis.restore(diagnosis)

    def state_dict(self) -> dict[str, Any]:
        """The diagnosis's state (evidence, exhaustion window, alarms) and ``budget_left``."""
        return self.diagnosis.state_dict() | {"budget_left": self.left}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """All checked before anything changes; a state written before ``budget_left`` existed has 0 left (the next
        round sets its own budget)."""
        diagnosis = Diagnosis()
        diagnosis.load_state_dict(state)  # (a non-mapping is refused there)
        left = state_int(state.get("budget_left", 0), "metrics.diagnosis.budget_left")
        self.diagnosis, self.left = diagnosis, left


def carried_over(state: Mapping[str, Any]) -> dict[str, Any]:
    """A migrated run's audit state (``_state._migrate``): the run's totals and alarms carry on, the step in
    progress (its evidence, its round's budget) is dropped with the rest of the step."""
    audit = Audit()
    audit.diagnosis.load_state_dict(state)
    audit.diagnosis.start_step()
    return audit.state_dict()
