"""`Scheduler`: builds each GRPO training step's batch (docs/concepts.md, "The step loop").

The loop, from the caller's side::

    cands = sched.propose()            # snoozed and retired prompts are skipped as they are drawn
    sched.report(cands, rewards)       # [len(cands), G]; signal groups join the step's batch
    ...repeat until sched.batch_full or max_gen_rounds...
    batch = sched.finish_step()        # short-batch handling, surplus, advantages, metrics

or ``batch = sched.step(rollout_fn)``, which is exactly that loop (an example in numbers:
:mod:`snooze.core`; the loop itself is ``_step_loop``). The scheduler composes its components
(``_components``: streams, prompt memory, policy, mix, pending set, buffers, metrics), each owning its state.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from snooze.core._buffer import GroupBuffer
from snooze.core._checks import is_int
from snooze.core._components import Components
from snooze.core._draw import Walk, drawable, walk, walk_quota
from snooze.core._memory import PromptTable
from snooze.core._metrics import StepMetrics
from snooze.core._mixing import batch_fits
from snooze.core._stage import last_wins, named_ids, rows_of
from snooze.core._state import pack, reading, unpack
from snooze.core._step_loop import finish_step, run_step
from snooze.core.classify import SIGNAL, check_rewards, classify
from snooze.core.config import SchedulerConfig, config_changes
from snooze.core.errors import ConfigError, DataError, StateMismatchError
from snooze.core.policies import Report
from snooze.core.source import Source, as_source
from snooze.core.types import Batch, Candidate, Candidates, RolloutFn, issued_of

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


def _part(name: str, doc: str) -> property:
    """A component of :attr:`Scheduler.parts`, read as an attribute of the scheduler."""
    return property(lambda self: getattr(self.parts, name), doc=doc)


class Scheduler:
    """Decides which prompts are rolled out and which groups are trained on.

    ``datasets`` maps a dataset name to its records (a list of dicts with an ``id``), a path to a
    ``.jsonl``/``.parquet`` file, a Hugging Face ``Dataset`` or a :class:`~snooze.Source`. Each
    dataset owns a stream seeded by ``(seed, name, epoch)``.
    """

    def __init__(self, datasets: Mapping[str, Any], config: SchedulerConfig | None = None, seed: int = 0) -> None:
        self.config = config if config is not None else SchedulerConfig()
        if not isinstance(self.config, SchedulerConfig):
            raise ConfigError(f"config must be a SchedulerConfig, got {type(self.config).__name__}")
        if not isinstance(datasets, Mapping) or not datasets:
            raise DataError("datasets must be a non-empty mapping of dataset name to records or Source")
        if not is_int(seed) or seed < 0:
            raise ConfigError(f"seed={seed!r}: must be an integer >= 0")
        self.seed = int(seed)
        self.sources: list[Source] = [as_source(name, data) for name, data in datasets.items()]
        self.names = [s.name for s in self.sources]
        self.parts = Components(self.sources, self.config, self.seed)
        self.last_metrics: dict[str, Any] = {}

    streams = _part("streams", "per dataset: the order its prompts come up in (``_stream``)")
    policy = _part("policy", "what a group's outcome does to its prompt (``config.policy``)")
    memory = _part("memory", "the per-prompt columns (``_memory``)")
    mix = _part("mix", "dataset weights, encounters drawn, batch quotas (``_mixing``)")
    pending = _part("pending", "candidates out for rollout, and the ticket counter (``_pending``)")
    batch = _part("batch", "groups accepted into this step's batch")
    surplus = _part("surplus", "acceptable groups that found no room")
    padding = _part("padding", "zero-signal groups left out, kept as padding material when on_short='pad'")
    step_metrics = _part("step_metrics", "the step's counts and the totals, steps and rounds among them (``_metrics``)")

    # -- one count each, kept by its component ---------------------------------------------------
    @property
    def tables(self) -> list[PromptTable]:
        """Dataset ``d``'s prompt memory is ``tables[d]`` (views into :attr:`memory`)."""
        return self.memory.tables

    @property
    def weights(self) -> np.ndarray:
        return self.mix.weights

    @property
    def drawn(self) -> np.ndarray:
        """Encounters (stream mix) or issued candidates (quota mix) per dataset since the mix last changed."""
        return self.mix.drawn

    @property
    def step_index(self) -> int:
        """Steps finished (the index of the step in progress)."""
        return self.step_metrics.steps

    @property
    def round(self) -> int:
        """Generation rounds of the step in progress."""
        return self.step_metrics.rounds

    @property
    def counts(self) -> StepMetrics:
        """Deprecated: :attr:`step_metrics`."""
        warnings.warn("Scheduler.counts is renamed step_metrics", DeprecationWarning, stacklevel=2)
        return self.step_metrics

    @property
    def zero(self) -> GroupBuffer:
        """Deprecated: :attr:`padding`."""
        warnings.warn("Scheduler.zero is renamed padding", DeprecationWarning, stacklevel=2)
        return self.padding

    @property
    def run_id(self) -> str:
        """This run's id: random, made when the run starts, kept through save/load. Every candidate
        carries it (``Candidate.run_id``), and a report of candidates of another run is refused."""
        return self.pending.run_id

    @property
    def next_ticket(self) -> int:
        return self.pending.next_ticket

    @property
    def exhausted(self) -> bool:
        """True when no dataset can issue another candidate (finite epochs used up, or all retired)."""
        return not self._active().any()

    @property
    def batch_full(self) -> bool:
        return len(self.batch) >= self.config.batch_size

    def _active(self) -> np.ndarray:
        return drawable(self.tables, self.streams, self.weights)

    # -- configuration hooks (curricula) -------------------------------------------------------
    def set_weights(self, weights: Mapping[str, float] | None) -> None:
        """Change the mix weights from now on (``None``: equal). Unlisted datasets get weight 0.

        The stream mix starts over from the change: encounters follow the new weights at once, and a
        dataset whose weight was low does not get every draw until its past share catches up."""
        self.mix.set_weights(weights)

    def set_excluded(self, dataset: str, ids: Sequence[Any], excluded: bool = True) -> int:
        """Exclude prompts from drawing (or let them back in). Returns how many changed.

        Excluded prompts are passed over like retired ones; counters of snoozed prompts are kept.
        ``ids`` is a list (or array) of the dataset's ids; a single id, ``None``, an unknown id or a non-bool
        ``excluded`` is a :class:`DataError` / :class:`ConfigError`, and nothing changes.
        """
        if not isinstance(excluded, (bool, np.bool_)):
            raise ConfigError(f"set_excluded: excluded={excluded!r} must be True or False")
        return self._change_draw(None, [(*rows_of(self.sources, "set_excluded", dataset, ids), bool(excluded))])

    def set_stage(
        self,
        weights: Mapping[str, float] | None,
        exclude: Mapping[str, Sequence[Any]],
        include: Mapping[str, Sequence[Any]] | None = None,
    ) -> int:
        """A curriculum stage in one call: ``weights`` as :meth:`set_weights`, ``include``'s prompts let back
        in and ``exclude``'s excluded (dataset name -> ids), as :meth:`set_excluded`. Returns how many prompts
        changed.

        Everything is checked before anything changes: a bad weight, an unknown dataset or id is a
        :class:`ConfigError` / :class:`DataError` and the scheduler is left as it was. An id in both
        ``include`` and ``exclude`` ends excluded."""
        parsed = self.mix.parse(weights)
        plan = [
            (*rows_of(self.sources, "set_stage", name, ids), False) for name, ids in named_ids("include", include or {})
        ]
        plan += [(*rows_of(self.sources, "set_stage", name, ids), True) for name, ids in named_ids("exclude", exclude)]
        return self._change_draw(parsed, last_wins(plan))

    def _change_draw(self, weights: np.ndarray | None, plan: Sequence[tuple[int, np.ndarray, bool]]) -> int:
        """Apply checked changes: new mix weights (``None``: kept), then each ``(dataset, rows, excluded)``."""
        was_active = self._active()
        if weights is not None:
            self.mix.set_weights_array(weights)
        changed = sum(self.memory.set_excluded(d, rows, excluded) for d, rows, excluded in plan)
        if not np.array_equal(was_active, self._active()):
            self.mix.restart()  # a dataset left or rejoined the mix: the stream mix starts over (see set_weights)
        return changed

    # -- drawing --------------------------------------------------------------------------------
    def propose(self, n: int | None = None) -> Candidates:
        """Issue up to ``n`` candidates (default ``gen_batch_size``): one generation round.

        Fewer come back only when the data is exhausted. Skips (snoozed, retired) are counted.
        ``n=0`` returns no candidates and is no round (nothing is drawn or counted).
        """
        n = self.config.gen_size if n is None else n
        if not is_int(n) or n < 0:
            raise ConfigError(f"propose(n={n!r}): n must be an integer >= 0")
        if n == 0:
            empty = np.empty(0, dtype=np.int64)
            return Candidates(self.sources, empty, empty, empty, self.run_id)
        self.pending.check_room(int(n))
        self.step_metrics.add("gen/rounds", 1)
        if self.config.mix == "stream":
            w = self._walk(int(n))
            self.mix.drawn += w.encounters
            owners, rows, audit = w.owners(), w.rows().astype(np.int64, copy=False), w.audit()
        else:
            owners, rows, audit, counts = walk_quota(
                int(n), self.weights, self._active, self._open_slots, self._walk_one
            )
            self.mix.drawn += counts  # quota mix: issued candidates, not encounters
        self.step_metrics.record_draw(len(rows), *self.pending.out_at_draw(owners, rows))
        tickets = self.pending.issue(owners, rows, audit, self.step_index)
        return Candidates(self.sources, owners, rows, tickets, self.run_id)

    def _walk(self, need: int, only: int | None = None) -> Walk:
        w = walk(self.tables, self.streams, self.policy, self.weights, self.drawn, need, only)
        self.step_metrics.add_skips(w.skipped, w.blocked)
        self.step_metrics.diagnosis.add_skips(w.auditable)
        return w

    def _walk_one(self, d: int, need: int) -> tuple[np.ndarray, np.ndarray]:
        w = self._walk(need, d)  # restricted to dataset d
        return w.rows(), w.audit()

    def _open_slots(self, active: np.ndarray) -> np.ndarray:
        return np.maximum(self._quotas() - self._filled(), 0) * active

    def pending_candidates(self) -> Candidates:
        """Candidates issued but not yet reported, in issue order (e.g. to re-roll them after a resume)."""
        p = self.pending
        return Candidates(self.sources, p.ds.copy(), p.row.copy(), p.ticket.copy(), self.run_id)

    def cancel(self, candidates: Sequence[Candidate]) -> int:
        """Withdraw issued candidates that will never be reported (e.g. a framework dropped them).

        Their encounters stay spent (snooze counters moved as drawn); they are counted in
        ``gen/cancelled`` and no longer held in the state. Returns how many were pending.
        """
        issued = issued_of(candidates, self.run_id, self.names)
        self.pending.pop(self.pending.locate(issued, candidates))
        self.step_metrics.add("gen/cancelled", len(issued.ticket))
        return len(issued.ticket)

    # -- reporting ------------------------------------------------------------------------------
    def report(self, candidates: Sequence[Candidate], rewards: npt.ArrayLike) -> np.ndarray:
        """Record each candidate's group of rewards (``[len(candidates), group_size]``).

        Checks everything before changing anything: a bad report raises and records nothing.
        Returns the outcome code of each group (``SIGNAL``, ``TOO_EASY``, ``TOO_HARD``, ``FLAT``).
        """
        cfg = self.config
        issued = issued_of(candidates, self.run_id, self.names)
        tickets, ds, rows = issued
        index = self.pending.locate(issued, candidates)
        arr = check_rewards(rewards, len(tickets), cfg.group_size, cfg.reward_range, cfg.out_of_range)
        outcomes = classify(
            arr, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol, cfg.reward_band
        )
        at = self.memory.offsets[ds] + rows
        audit, age = self.pending.audit[index], self.pending.ages(index, self.step_index)  # age None: all 0
        mine = ~audit  # audit groups never reach the policy: it evolves as if they had been skipped
        report = (
            Report(ds, at, outcomes, arr, cfg.reward_range)
            if not audit.any()
            else Report(ds[mine], at[mine], outcomes[mine], arr[mine], cfg.reward_range)
        )
        watched = self.memory.watch(report.group_rows)
        changes = self.policy.report(self.memory, report)
        self.memory.settle(watched)  # the cached counts, from the columns the policy wrote
        self.pending.pop(index)  # after the policy: a policy that raises leaves the candidates pending
        if changes is not None:
            self.step_metrics.add_changes(changes.new, changes.regressed, changes.retired)
        self.step_metrics.record_generated(ds, outcomes)
        self.step_metrics.diagnosis.record(audit, outcomes, arr, cfg.reward_range)
        stale = None if age is None else self.step_metrics.record_ages(age, cfg.max_staleness)  # fed to the policy only
        self._accept(GroupBuffer.of(ds, rows, tickets, outcomes, arr), audit, stale)
        return outcomes

    def _accept(self, groups: GroupBuffer, audit: np.ndarray, stale: np.ndarray | None) -> None:
        """Move acceptable groups into the batch while there is room; the rest to surplus or zero. An
        audit group is acceptable only with signal, a too stale one (``stale``; ``None``: none) never; neither
        is padding material."""
        acceptable = np.ones(len(groups), dtype=bool) if self.policy.trains_on_zero_signal else groups.outcome == SIGNAL
        acceptable &= ~audit | (groups.outcome == SIGNAL)
        if stale is not None:
            acceptable &= ~stale
            audit = audit | stale  # (for the padding below)
        if self.config.on_short == "pad":  # zero-signal groups are kept only as padding material
            self.padding.extend(groups, ~acceptable & ~audit)
        self.step_metrics.add_dropped(groups.ds[~acceptable])
        fits = self._fits(groups.ds, acceptable)
        self.batch.extend(groups, fits)
        self.surplus.extend(groups, acceptable & ~fits)

    def _fits(self, ds: np.ndarray, acceptable: np.ndarray) -> np.ndarray:
        open_slots = np.maximum(self._quotas(ds) - self._filled(), 0) if self.config.mix == "quota" else None
        return batch_fits(ds, acceptable, self.config.batch_size - len(self.batch), open_slots)

    def _quotas(self, arriving: np.ndarray | None = None) -> np.ndarray:
        """Batch quotas. A dataset keeps its share while groups of it can still arrive (candidates out, or
        ``arriving``, the groups being placed) even when its stream is used up: the round that exhausts a
        dataset is trained on, not discarded."""
        active = self._active()
        if self.config.epochs is not None:  # (a stream is used up only under finite epochs)
            active[self.pending.ds] = True
            if arriving is not None:
                active[arriving] = True
            active &= self.weights > 0
        return self.mix.quotas(active, self._filled(), self.config.batch_size)

    def _filled(self) -> np.ndarray:
        return np.bincount(self.batch.ds, minlength=len(self.sources)).astype(np.int64)

    # -- closing a step -------------------------------------------------------------------------
    def step(self, rollout_fn: RolloutFn) -> Batch:
        """One training step: propose, roll out, report until the batch is full or ``max_gen_rounds``.

        A round completes or is withdrawn: when ``rollout_fn`` raises (anything, ``KeyboardInterrupt``
        too) or its rewards are refused, the scheduler is put back as it was before that round (no
        candidate pending, no round counted, no encounter spent) and the error is raised again; the
        rounds before it stay done, and calling ``step`` again continues the step."""
        return run_step(self, rollout_fn)

    def finish_step(self) -> Batch:
        """Close the step: handle a short batch (``on_short``), the surplus, advantages and metrics."""
        return finish_step(self)

    def metrics(self) -> dict[str, Any]:
        """The last finished step's metrics and the cumulative totals (docs/metrics.md), as a flat dict; after
        :meth:`load_state_dict`, until a step finishes, the totals alone (``total/*``: the state keeps no report)."""
        return dict(self.last_metrics)

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Versioned state (format 1): JSON-safe ``meta`` and numpy ``arrays``, composed of every
        component's own ``state_dict()``. No pickle anywhere."""
        return pack(self.seed, self.config, self.sources, self.parts.state_parts())

    def load_state_dict(
        self, state: Mapping[str, Any], migrate: bool = False, previous_datasets: Mapping[str, Any] | None = None
    ) -> None:
        """Restore :meth:`state_dict` output, all or nothing. A state saved with other data, seed, group
        size or weights raises :class:`StateMismatchError` unless ``migrate=True``; migrating to changed
        data also needs ``previous_datasets`` (the data the state was saved with) to match prompts by id."""
        with reading(state):
            # each component checks its part; nothing of self changes until all passed
            fresh = Components(self.sources, self.config, self.seed, self.run_id)
            parts = unpack(
                state, self.seed, self.config, self.sources, migrate, previous_datasets, fresh.policy.state_dict()
            )
            fresh.load_parts(parts, self.config)
            if len(fresh.batch) > self.config.batch_size:
                raise StateMismatchError(
                    f"the state was saved mid-step with {len(fresh.batch)} groups in its batch, more than batch_size="
                    f"{self.config.batch_size}; load it with batch_size >= {len(fresh.batch)} (the saved config's is "
                    f"{state['meta']['config'].get('batch_size')}), finish that step, then change the batch size"
                )
            changes = config_changes(state["meta"]["config"], self.config)
        self.parts = fresh
        self.last_metrics = fresh.step_metrics.cumulative()
        if changes:  # allowed (the state does not depend on them), but never unannounced
            log.warning("loaded a state saved under another SchedulerConfig; from now on %s", "; ".join(changes))

    def save(self, path: str | Path) -> Path:
        """Write the state into directory ``path`` atomically (write aside, fsync, rename). Returns the file."""
        from snooze.core.checkpoint import save_state

        return save_state(path, self.state_dict())

    @classmethod
    def load(
        cls,
        path: str | Path,
        datasets: Mapping[str, Any],
        config: SchedulerConfig | None = None,
        seed: int | None = None,
        migrate: bool = False,
        previous_datasets: Mapping[str, Any] | None = None,
    ) -> Scheduler:
        """A scheduler restored from directory ``path``. Config and seed come from the state unless given;
        a given one that differs in what the state depends on needs ``migrate=True``."""
        from snooze.core.checkpoint import load_state

        state = load_state(path)
        with reading(state):  # a state without a usable config or seed is a StateError naming its file
            cfg = config if config is not None else SchedulerConfig.from_dict(state["meta"]["config"])
            seed = int(state["meta"]["seed"]) if seed is None else seed
        sched = cls(datasets, cfg, seed=seed)
        sched.load_state_dict(state, migrate=migrate, previous_datasets=previous_datasets)
        return sched
