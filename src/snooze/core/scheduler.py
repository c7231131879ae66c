"""`Scheduler`: builds each GRPO training step's batch (docs/concepts.md, "The step loop").

The loop, from the caller's side::

    cands = sched.propose()            # snoozed and retired prompts are skipped as they are drawn
    sched.report(cands, rewards)       # [len(cands), G]; signal groups join the step's batch
    ...repeat while sched.wants_round()...
    batch = sched.finish_step()        # short-batch handling, surplus, advantages, metrics; batch.record

or ``batch = sched.step(rollout_fn)``, which is exactly that loop (an example in numbers:
:mod:`snooze.core`). The scheduler composes its components (``_components``: streams, prompt memory,
policy, mix, pending set, the step batch, metrics), each owning its state; the step batch
(``_step_batch``) owns everything about the batch being built, and the scheduler asks it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from snooze._kit.checks import INT64_MAX, as_bool, as_int, as_path, is_int, shown
from snooze.core._components import Components
from snooze.core._cost import check_scoring, check_tokens
from snooze.core._draw import Walk, walk, walk_quota
from snooze.core._groups import Groups
from snooze.core._memory import EASY_SNOOZED, FLAG_BITS
from snooze.core._metrics import StepEnd
from snooze.core._stage import last_wins, named_ids
from snooze.core._state import envelope, pack, reading, unpack
from snooze.core.advantages import scaled_advantages
from snooze.core.classify import SIGNAL, TOO_EASY, check_rewards, classify
from snooze.core.config import SchedulerConfig, config_changes
from snooze.core.errors import ConfigError, DataError, PolicyConformanceError, ReportError, RewardError
from snooze.core.policies import Report, check_changes
from snooze.core.source import Source, as_source
from snooze.core.source import dataset_rows as rows_of
from snooze.core.types import Batch, Candidate, Candidates, Generated, RolloutFn, StepRecord, issued_of

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


def _view(path: str, doc: str) -> property:
    """A read-only attribute of the scheduler: the part of its components at ``path`` (``"mix.weights"``)."""
    names = path.split(".")

    def get(self: Scheduler) -> Any:
        obj: Any = self._parts
        for name in names:
            obj = getattr(obj, name)
        return obj

    return property(get, doc=doc)


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
        self.seed = as_int(seed, "seed", 0)
        self.sources: list[Source] = [as_source(name, data) for name, data in datasets.items()]
        self.names = [s.name for s in self.sources]
        self._parts = Components(self.sources, self.config, self.seed)
        self.last_metrics: dict[str, Any] = {}

    # -- where it stands: answers, never its parts (those are ``_parts``, the scheduler's own) ------------
    @property
    def weights(self) -> np.ndarray:
        """``[D]`` the mix weights in force (a copy)."""
        return self._parts.mix.weights.copy()

    @property
    def drawn(self) -> np.ndarray:
        """``[D]`` encounters (stream mix) or issued candidates (quota mix) since the mix changed (a copy)."""
        return self._parts.mix.drawn.copy()

    def progress(self) -> float:
        """Passes over the pool so far: encounters drawn (skipped ones too) / prompts, over every dataset (``1.5``:
        the pool once, and half of it again)."""
        streams = self._parts.streams
        return sum(s.epoch * s.n + s.cursor for s in streams) / sum(s.n for s in streams)

    step_index = _view("step_metrics.steps", "steps finished (the index of the step in progress)")
    round = _view("step.rounds", "generation rounds of the step in progress")
    next_ticket = _view("pending.next_ticket", "the ticket the next candidate gets")
    run_id = _view(
        "pending.run_id",
        "this run's id: random, made when the run starts, kept through save/load; every candidate carries it "
        "(``Candidate.run_id``), and a report of candidates of another run is refused",
    )
    batch_full = _view("step.full", "the batch of the step in progress holds ``batch_size`` groups")

    @property
    def exhausted(self) -> bool:
        """True when no dataset can issue another candidate (finite epochs used up, or all retired). Groups may
        still wait to be trained (:attr:`finished`)."""
        return not self._parts.active().any()

    @property
    def finished(self) -> bool:
        """True when the run has nothing left to train: :attr:`exhausted`, no candidate out, and no group in the
        open step's batch. With ``carry_surplus`` the surplus of the step that used the data up is carried into
        the next one: ``exhausted`` is then True but not ``finished``, and one more step trains it (no round is
        drawn; ``on_short`` decides a short batch, ``raise`` refusing it as any short step at the data's end).
        Every step loop ends on it: ``while not sched.finished: batch = sched.step(rollout_fn)``."""
        parts = self._parts
        return self.exhausted and not len(parts.pending) and not parts.step.n

    # -- the step's questions ---------------------------------------------------------------------
    def wants_round(self) -> bool:
        """Whether the step asks for another generation round: the batch is not full, fewer than
        ``max_gen_rounds`` rounds were drawn, and some dataset can still issue a prompt. The loop of every
        trainer (``step()``, the TRL and verl adapters) is ``while sched.wants_round(): ...``. With screening
        (``screen_size``) it is also True while screens that passed wait for their rest: a step finishes the
        groups it screened, in a round past ``max_gen_rounds`` or with the batch full if need be (such a round
        draws no fresh prompt)."""
        screens = self._parts.screens
        if screens is not None and screens.waiting():  # the rest of screened groups: asked in this step
            return True
        return self._parts.step.wants_round() and not self.exhausted

    def room(self) -> int:
        """Batch slots still open in the step in progress."""
        return self._parts.step.room()

    def in_batch(self, candidates: Sequence[Candidate]) -> np.ndarray:
        """``[N]`` whether each candidate's reported group is in the batch being built (carried-in ones too)."""
        issued = issued_of(candidates, self.run_id, self.names)
        return self._parts.step.in_batch(issued.ticket)

    def step_record(self) -> StepRecord:
        """Where each group of the step in progress went so far (:class:`StepRecord`); a finished step's
        record is :attr:`Batch.record`."""
        return self._parts.step.record(self.step_index)

    # -- configuration hooks (curricula) -------------------------------------------------------
    def set_weights(self, weights: Mapping[str, float] | None) -> None:
        """Change the mix weights from now on (``None``: equal). Unlisted datasets get weight 0.

        The stream mix starts over from the change: encounters follow the new weights at once, and a
        dataset whose weight was low does not get every draw until its past share catches up."""
        self._parts.mix.set_weights(weights)

    def set_excluded(self, dataset: str, ids: Sequence[Any], excluded: bool = True) -> int:
        """Exclude prompts from drawing (or let them back in). Returns how many changed.

        Excluded prompts are passed over like retired ones; counters of snoozed prompts are kept.
        ``ids`` is a list (or array) of the dataset's ids; a single id, ``None``, an unknown id or a non-bool
        ``excluded`` is a :class:`DataError` / :class:`ConfigError`, and nothing changes.
        """
        excluded = as_bool(excluded, "set_excluded(excluded)")
        return self._change_draw(None, [(*rows_of(self.sources, "set_excluded", dataset, ids), excluded)])

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
        parsed = self._parts.mix.parse(weights)
        plan = [
            (*rows_of(self.sources, "set_stage", name, ids), False) for name, ids in named_ids("include", include or {})
        ]
        plan += [(*rows_of(self.sources, "set_stage", name, ids), True) for name, ids in named_ids("exclude", exclude)]
        return self._change_draw(parsed, last_wins(plan))

    def _change_draw(self, weights: np.ndarray | None, plan: Sequence[tuple[int, np.ndarray, bool]]) -> int:
        """Apply checked changes: new mix weights (``None``: kept), then each ``(dataset, rows, excluded)``."""
        parts = self._parts
        was_active = parts.active()
        if weights is not None:
            parts.mix.set_weights_array(weights)
        changed = sum(parts.memory.set_excluded(d, rows, excluded) for d, rows, excluded in plan)
        if not np.array_equal(was_active, parts.active()):
            parts.mix.restart()  # a dataset left or rejoined the mix: the stream mix starts over (see set_weights)
        return changed

    # -- drawing --------------------------------------------------------------------------------
    def propose(self, n: int | None = None) -> Candidates:
        """Issue up to ``n`` candidates (default ``gen_batch_size``): one generation round.

        Fewer come back only when the data is exhausted. Skips (snoozed, retired) are counted. A policy's skip mask
        or ``relax()`` that raises or breaks its contract (a :class:`PolicyConformanceError`) leaves the scheduler as
        it was.
        ``n=0`` returns no candidates and is no round (nothing is drawn or counted). ``n`` is at most
        ``2**63 - 1`` (tickets are int64); a larger one, or one that is no integer, is a :class:`ConfigError`.
        """
        n = self.config.gen_size if n is None else n
        if not is_int(n) or n < 0:
            raise ConfigError(f"propose(n={n!r}): n must be an integer >= 0")
        if n > INT64_MAX:
            raise ConfigError(
                f"propose(n={shown(n)}): n is too large; a round issues at most 2**63 - 1 candidates (tickets are "
                f"int64); pass the candidates one round should roll out (default gen_batch_size={self.config.gen_size})"
            )
        if n == 0:
            empty = np.empty(0, dtype=np.int64)
            return Candidates(self.sources, empty, empty, empty, self.run_id)
        with self._parts.round():  # a plug-in that fails mid-walk (a bad mask, a relax() without end) changes nothing
            return self._draw_round(n)

    def _draw_round(self, n: int) -> Candidates:
        parts = self._parts
        if parts.screens is not None:
            return self._screen_round(n)
        parts.pending.check_room(int(n))
        parts.step.open_round()
        return Candidates(self.sources, *self._draw(n), self.run_id, self.config.group_size)

    def _screen_round(self, n: int) -> Candidates:
        """Screening's round: the rests waiting (up to ``n``, in ticket order), then fresh screens up to ``n`` in
        all while the step itself wants a round (batch not full, fewer than ``max_gen_rounds``) and the screens that
        passed and are not complete yet (each a group with signal, under the default rule) do not fill its room."""
        parts, screens = self._parts, self._parts.screens
        assert screens is not None
        promised = len(screens.ticket)
        rest = screens.hand_out(n)
        wanted = parts.step.wants_round() and not self.exhausted and promised < parts.step.room()
        fresh = n - len(rest) if wanted else 0
        if not len(rest) and not fresh:  # nothing to hand out: no round (as propose(0))
            empty = np.empty(0, dtype=np.int64)
            return Candidates(self.sources, empty, empty, empty, self.run_id, empty)
        parts.pending.check_room(fresh)
        parts.step.open_round()
        at = parts.pending.find(rest)
        ds, row, ticket = parts.pending.ds[at], parts.pending.row[at], rest
        width = np.full(len(rest), screens.rest, dtype=np.int64)
        if fresh:
            new = self._draw(fresh)
            ds, row, ticket = (np.concatenate([a, b]) for a, b in zip((ds, row, ticket), new))
            width = np.concatenate([width, np.full(len(new[2]), screens.k, dtype=np.int64)])
        return Candidates(self.sources, ds, row, ticket, self.run_id, width)

    def _draw(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Draw ``n`` fresh prompts and issue their tickets: ``(ds, row, ticket)``."""
        parts = self._parts
        parts.audit.open_round(int(n), self.step_index, self.round)
        if self.config.mix == "stream":
            w = self._walk(int(n))
            parts.mix.drawn += w.encounters
            owners, rows, audit = w.owners(), w.rows().astype(np.int64, copy=False), w.audit()
        else:
            owners, rows, audit, counts = walk_quota(
                int(n), parts.mix.weights, parts.active, lambda now: parts.step.open_slots() * now, self._walk_one
            )
            parts.mix.drawn += counts  # quota mix: issued candidates, not encounters
        parts.step_metrics.record_draw(len(rows), *parts.pending.out_at_draw(owners, rows))
        tickets = parts.pending.issue(owners, rows, audit, self.step_index)
        return owners, rows, tickets

    def _walk(self, need: int, only: int | None = None) -> Walk:
        parts = self._parts
        w = walk(
            parts.memory.tables,
            parts.streams,
            parts.policy,
            parts.mix.weights,
            parts.mix.drawn,
            need,
            only,
            parts.audit.walk_share,
            parts.audit.left,
        )
        parts.step_metrics.add_skips(w.skipped, w.blocked)
        parts.audit.walked(int(np.count_nonzero(w.audit())), w.auditable)
        return w

    def _walk_one(self, d: int, need: int) -> tuple[np.ndarray, np.ndarray]:
        w = self._walk(need, d)  # restricted to dataset d
        return w.rows(), w.audit()

    def pending_candidates(self) -> Candidates:
        """Candidates issued but not yet reported, in issue order (e.g. to re-roll them after a resume), each with the
        rollouts asked of it (``n``: with screening, a screen's k or its rest's G - k; a rest that is waiting to be
        handed out is not among them: the next :meth:`propose` hands it out)."""
        p, screens = self._parts.pending, self._parts.screens
        if screens is None:
            return Candidates(
                self.sources, p.ds.copy(), p.row.copy(), p.ticket.copy(), self.run_id, self.config.group_size
            )
        out = ~np.isin(p.ticket, screens.waiting_tickets())  # a rest not handed out yet comes with the next propose()
        width = np.where(np.isin(p.ticket, screens.ticket), screens.rest, screens.k).astype(np.int64)
        return Candidates(self.sources, p.ds[out], p.row[out], p.ticket[out], self.run_id, width[out])

    def cancel(self, candidates: Sequence[Candidate]) -> int:
        """Withdraw issued candidates that will never be reported (e.g. a framework dropped them).

        Their encounters stay spent (snooze counters moved as drawn); they are counted in
        ``gen/cancelled`` and no longer held in the state. Returns how many were pending.
        """
        issued = issued_of(candidates, self.run_id, self.names)
        index = self._parts.pending.locate(issued, candidates)
        screens = self._parts.screens
        at = None if screens is None else screens.find(issued.ticket)
        with self._parts.round():
            self._parts.pending.pop(index)
            if at is not None and (at >= 0).any():  # a screened group's rest will never come: it is given up whole
                screens.remove(at[at >= 0])  # type: ignore[union-attr]
            self._parts.step_metrics.add("gen/cancelled", len(issued.ticket))
        return len(issued.ticket)

    def drop_carried(self) -> int:
        """Give up the surplus groups carried into this step (``carry_surplus``) when their completions are gone:
        a trainer that kept them in memory or in TransferQueue restarted from a checkpoint, which holds the
        scheduler's record of them but not the completions. They leave the batch as ``discarded`` (the step's
        record says so) and the step's rounds generate in their place. Only before the step's first round
        (else a :class:`ReportError`, nothing changed). Returns how many were dropped (0: none carried)."""
        step = self._parts.step
        reported = len(step.groups) - int(np.count_nonzero(step.groups.carried_in))
        if step.rounds or reported:
            done = (
                f"has drawn {step.rounds} round(s) already"
                if step.rounds
                else f"holds {reported} group(s) reported in it already (candidates drawn in an earlier step, "
                "reported late)"
            )
            raise ReportError(
                f"drop_carried(): step {self.step_index} {done}; carried groups can be given up only when the step "
                "starts (right after a resume), before its first propose() or report(). Nothing changed."
            )
        return step.drop_carried()

    # -- reporting ------------------------------------------------------------------------------
    def report(
        self, candidates: Sequence[Candidate], rewards: npt.ArrayLike, tokens: npt.ArrayLike | None = None
    ) -> np.ndarray:
        """Record each candidate's group of rewards (``[len(candidates), group_size]``) and, where the trainer
        knows them, the completion tokens it generated for each (``tokens`` ``[len(candidates)]``, integers >= 0,
        summed over the group's rollouts: ``gen/tokens``; without them the groups count in ``gen/tokens_missing``).

        Checks everything before changing anything: a bad report raises and records nothing, and so does one whose
        policy hook raises or returns what its contract refuses (the memory it wrote is put back).
        Returns the outcome code of each group (``SIGNAL``, ``TOO_EASY``, ``TOO_HARD``, ``FLAT``).

        With screening (``screen_size``) each candidate's row holds its ``n`` rewards: a 2-D array when they all ask
        for the same number, else one row per candidate (a list of rows). A screen's outcome is that of its k
        rewards; whether it gets its rest is the policy's :meth:`~snooze.core.policies.Policy.screen` (a rest it
        gets comes with the next :meth:`propose`); a rest's outcome is that of the whole group, first k and rest.
        """
        cfg, parts = self.config, self._parts
        issued = issued_of(candidates, self.run_id, self.names)
        tickets, ds, rows = issued
        index = parts.pending.locate(issued, candidates)
        if parts.screens is not None:
            with parts.round():  # every part of a screening report is recorded, or none
                return self._report_screening(candidates, issued, index, rewards, tokens)
        arr = check_rewards(rewards, len(tickets), cfg.group_size, cfg.reward_range, cfg.out_of_range)
        counted = None if tokens is None else check_tokens(tokens, len(tickets))
        arr = arr.copy()  # ours from here: the caller may reuse its array (the step's groups and the policy keep it)
        outcomes = classify(
            arr, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol, cfg.reward_band
        )
        audit, age = parts.pending.audit[index], parts.pending.ages(index, self.step_index)  # age None: all 0
        with parts.round():  # a policy that raises, or whose changes are refused, leaves the memory as it was
            self._feed_policy(ds, parts.memory.offsets[ds] + rows, outcomes, arr, audit)
        parts.pending.pop(index)  # after the policy: a policy that raises leaves the candidates pending
        metrics = parts.step_metrics
        metrics.record_generated(ds, outcomes, arr.size, counted)
        parts.audit.record(audit, outcomes, arr, cfg.reward_range)
        stale = None if age is None else metrics.record_ages(age, cfg.max_staleness)  # fed to the policy only
        parts.step.place(Groups.reported(ds, rows, tickets, outcomes, arr, audit), stale)
        return outcomes

    def _report_screening(
        self, candidates: Sequence[Candidate], issued: Any, index: np.ndarray, rewards: Any, tokens: Any
    ) -> np.ndarray:
        """:meth:`report` with screening on: the screens decided (stopped ones recorded as groups of k), the rests
        joined to their first k rewards and recorded as whole groups. Inside the caller's undo."""
        cfg, parts, screens = self.config, self._parts, self._parts.screens
        assert screens is not None
        tickets = issued.ticket
        at = screens.find(tickets)
        rest = at >= 0
        early = rest & ~screens.out[np.maximum(at, 0)] if len(screens.ticket) else rest
        if early.any():
            c = candidates[int(np.argmax(early))]
            raise ReportError(
                f"candidate {c.dataset!r}/{c.id!r} (ticket {c.ticket}) passed its screen, but the rest of its group "
                "was not proposed yet; roll out what propose() returns (its rest comes with the next round). "
                "Nothing was recorded."
            )
        first, last = _rewards_by_width(rewards, rest, screens.k, screens.rest, cfg)
        counted = None if tokens is None else check_tokens(tokens, len(tickets))
        audit, age = parts.pending.audit[index], parts.pending.ages(index, self.step_index)
        out = np.empty(len(tickets), dtype=np.int8)
        done = rest.copy()  # pending entries to pop: the rests, and the screens that stop
        if not rest.all():
            sel = np.flatnonzero(~rest)
            toks = None if counted is None else counted[sel]
            out[sel], stop = self._screened(issued, sel, first, toks, audit[sel], None if age is None else age[sel])
            done[sel[stop]] = True
        if rest.any():
            sel = np.flatnonzero(rest)
            toks = None if counted is None else counted[sel]
            out[sel] = self._completed(issued, sel, at[sel], last, toks, audit[sel], None if age is None else age[sel])
        parts.pending.pop(index[done])
        return out

    def _screened(
        self, issued: Any, sel: np.ndarray, arr: np.ndarray, tokens: np.ndarray | None, audit: np.ndarray, age: Any
    ) -> tuple[np.ndarray, np.ndarray]:
        """Screens' first k rewards: the policy decides; the stopped ones are groups of k. ``(outcomes, stopped)``."""
        cfg, parts, screens = self.config, self._parts, self._parts.screens
        assert screens is not None
        ds, rows, tickets = issued.ds[sel], issued.row[sel], issued.ticket[sel]
        outcomes = classify(
            arr, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol, cfg.reward_band
        )
        at = parts.memory.offsets[ds] + rows
        go = parts.policy.screen(parts.memory, Report(ds, at, outcomes, arr, cfg.reward_range))
        if not (isinstance(go, np.ndarray) and go.dtype == bool and go.shape == (len(sel),)):
            raise PolicyConformanceError(
                f"policy {parts.policy.name!r}: screen() returned {type(go).__name__} "
                f"{getattr(go, 'dtype', '')}{getattr(go, 'shape', '')}; it must return a bool array [{len(sel)}] "
                "(True: the rest of the group; False: stop after the screen). The report was not recorded"
            )
        stop = ~go
        metrics = parts.step_metrics
        if stop.any():
            o, r = outcomes[stop], arr[stop]
            self._feed_policy(ds[stop], at[stop], o, r, audit[stop])
            metrics.record_generated(ds[stop], o, r.size, None if tokens is None else tokens[stop])
            parts.audit.record(audit[stop], o, r, cfg.reward_range)
            if age is not None:
                metrics.record_ages(age[stop], cfg.max_staleness)
            padded = np.full((len(o), cfg.group_size), np.nan)
            padded[:, : screens.k] = r
            parts.step.place_stopped(Groups.reported(ds[stop], rows[stop], tickets[stop], o, padded, audit[stop]))
        if go.any():
            screens.add(tickets[go], arr[go], None if tokens is None else tokens[go])
            metrics.add("gen/rollouts", int(np.count_nonzero(go)) * screens.k)
            if tokens is not None:
                metrics.add("gen/tokens", int(tokens[go].sum()))
        screens.count(len(sel), int(np.count_nonzero(stop)))
        return outcomes, stop

    def _completed(
        self,
        issued: Any,
        sel: np.ndarray,
        at: np.ndarray,
        arr: np.ndarray,
        tokens: np.ndarray | None,
        audit: np.ndarray,
        age: Any,
    ) -> np.ndarray:
        """Rests of screened groups: joined to their first k rewards, recorded as whole groups."""
        cfg, parts, screens = self.config, self._parts, self._parts.screens
        assert screens is not None
        ds, rows, tickets = issued.ds[sel], issued.row[sel], issued.ticket[sel]
        whole = np.concatenate([screens.first[at], arr], axis=1)
        outcomes = classify(
            whole, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol, cfg.reward_band
        )
        self._feed_policy(ds, parts.memory.offsets[ds] + rows, outcomes, whole, audit)
        missing = screens.tokens[at] < 0
        metrics = parts.step_metrics
        metrics.record_groups(
            ds,
            outcomes,
            arr.size,
            0 if tokens is None else int(tokens.sum()),
            len(sel) if tokens is None else int(np.count_nonzero(missing)),
        )
        parts.audit.record(audit, outcomes, whole, cfg.reward_range)
        stale = None if age is None else metrics.record_ages(age, cfg.max_staleness)
        parts.step.place(Groups.reported(ds, rows, tickets, outcomes, whole, audit), stale)
        screens.remove(at)
        return outcomes

    def _feed_policy(
        self, ds: np.ndarray, at: np.ndarray, outcomes: np.ndarray, rewards: np.ndarray, audit: np.ndarray
    ) -> None:
        """The policy learns from the report's groups (:meth:`Policy.report`) and from its audit groups apart
        (:meth:`Policy.audited`: nothing by default). The memory's cached counts are derived from what it wrote."""
        parts = self._parts
        returned = (parts.memory.columns["flags"][at] & EASY_SNOOZED) != 0  # the previous group was too easy
        parts.audit.diagnosis.add_returns(int(returned.sum()), int(np.count_nonzero(returned & (outcomes != TOO_EASY))))
        hooks = [(parts.policy.report, ~audit)] + ([(parts.policy.audited, audit)] if audit.any() else [])
        accepted = []
        for hook, sel in hooks:
            whole = bool(sel.all())
            report = Report(*((x if whole else x[sel]) for x in (ds, at, outcomes, rewards)), self.config.reward_range)
            watched = parts.memory.watch(report.group_rows)
            changes = hook(parts.memory, report)
            _check_written(parts.memory.columns, watched[0], parts.policy.name)
            parts.memory.settle(watched)
            if changes is not None:
                check_changes(changes, parts.policy.name, report)
                accepted.append(changes)
        for changes in accepted:  # counted once every hook's changes passed (report's undo restores the memory)
            parts.step_metrics.add_changes(changes.new, changes.regressed, changes.retired)

    # -- closing a step -------------------------------------------------------------------------
    def step(self, rollout_fn: RolloutFn) -> Batch:
        """One training step: propose, roll out, report while :meth:`wants_round`, then :meth:`finish_step`.

        A round completes or is withdrawn: when ``rollout_fn`` raises (anything, ``KeyboardInterrupt``
        too) or its rewards are refused, the scheduler is put back as it was before that round (no
        candidate pending, no round counted, no encounter spent) and the error is raised again; the
        rounds before it stay done, and calling ``step`` again continues the step."""
        if not callable(rollout_fn):
            raise ConfigError(
                f"step(rollout_fn): rollout_fn must be a function of the candidates that returns their "
                f"rewards [len(candidates), group_size], got {type(rollout_fn).__name__}"
            )
        while self.wants_round():
            with self._parts.round():
                candidates = self.propose()
                if not candidates:  # a skip mask gave up on every dataset for this round
                    break
                out = rollout_fn(candidates)
                if isinstance(out, Generated):
                    self.report(candidates, out.rewards, out.tokens)
                else:
                    self.report(candidates, out)
        return self.finish_step()

    def report_scoring(self, passes: int, tokens: int) -> None:
        """Count compute a rule spent besides rollouts, in the step in progress: ``passes`` forward-only scoring
        passes (each over one stored completion) over ``tokens`` tokens in all. Each pass counts as one rollout in
        ``gen/cost_rollouts`` (docs/metrics.md, "Cost": the same forward FLOPs a token), so a rule that scores
        never looks cheaper than it is. Integers >= 0, else a :class:`ConfigError` (nothing counted)."""
        passes, tokens = check_scoring(passes, tokens)
        self._parts.step_metrics.add("gen/score_passes", passes)
        self._parts.step_metrics.add("gen/score_tokens", tokens)

    def finish_step(self) -> Batch:
        """Close the step: handle a short batch (``on_short``), the surplus, advantages and metrics; the
        batch's :attr:`~Batch.record` says where every group of the step went. When it raises (``on_short="raise"``,
        a policy's ``end_step()``), the step stays open as it was, its groups kept."""
        with self._parts.round():  # a policy's end_step() that raises leaves the step open, its batch kept
            batch = self._close_step()
            self._parts.policy.end_step(self.step_index)
        self.last_metrics = batch.metrics
        return batch

    def _close_step(self) -> Batch:
        parts, cfg = self._parts, self.config
        closed = parts.step.close(self.step_index, lambda: self.exhausted)
        b = closed.batch
        cands = Candidates(self.sources, b.ds.astype(np.int64), b.row, b.ticket, self.run_id, cfg.group_size)
        adv = scaled_advantages(b.rewards, cfg.advantage, 1e-6)
        batch = Batch(self.step_index, cands, b.rewards, adv, b.outcome == SIGNAL, closed.record)
        end = StepEnd(
            closed.record,
            int(np.count_nonzero(batch.signal)),
            parts.step.rounds,
            closed.starved,
            cfg.group_size,
            [t.asleep() for t in parts.memory.tables],
            sum(t.retired() for t in parts.memory.tables),
            [s.epoch for s in parts.streams],
            closed.bound,
            len(parts.pending),
        )
        batch.metrics = parts.step_metrics.finish(end)
        if parts.screens is not None:
            batch.metrics |= parts.screens.finish()
        parts.step.next_step()
        return batch

    def metrics(self) -> dict[str, Any]:
        """The last finished step's metrics and the cumulative totals (docs/metrics.md), as a flat dict; after
        :meth:`load_state_dict`, until a step finishes, the totals alone (``total/*``: the state keeps no report)."""
        return dict(self.last_metrics)

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Versioned state (format 1): JSON-safe ``meta`` and numpy ``arrays``, composed of every
        component's own ``state_dict()``. No pickle anywhere."""
        return pack(self.seed, self.config, self.sources, self._parts.state_parts())

    def load_state_dict(
        self, state: Mapping[str, Any], migrate: bool = False, previous_datasets: Mapping[str, Any] | None = None
    ) -> None:
        """Restore :meth:`state_dict` output, all or nothing. A state saved with other data, seed, group
        size or weights raises :class:`StateMismatchError` unless ``migrate=True``; migrating to changed
        data also needs ``previous_datasets`` (the data the state was saved with) to match prompts by id.
        ``migrate`` must be a bool and ``previous_datasets`` ``None`` or a mapping of dataset name to data,
        else a :class:`ConfigError` (checked before the state is read)."""
        previous = _check_load_args(migrate, previous_datasets)
        with reading(state):
            # each component checks its part; nothing of self changes until all passed
            fresh = Components(self.sources, self.config, self.seed, self.run_id)
            parts = unpack(
                state, self.seed, self.config, self.sources, bool(migrate), previous, fresh.policy.state_dict()
            )
            fresh.load_parts(parts, self.config)
            changes = config_changes(state["meta"]["config"], self.config)
        self._parts = fresh
        self.last_metrics = fresh.step_metrics.cumulative()
        if fresh.screens is not None:
            self.last_metrics |= fresh.screens.cumulative()
        if changes:  # allowed (the state does not depend on them), but never unannounced
            log.warning("loaded a state saved under another SchedulerConfig; from now on %s", "; ".join(changes))

    def save(self, path: str | Path) -> Path:
        """Write the state into directory ``path`` atomically (write aside, fsync, rename). Returns the file."""
        from snooze.core.checkpoint import save_state

        return save_state(as_path(path, "save(path)"), self.state_dict())

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

        where = as_path(path, "Scheduler.load(path)")
        _check_load_args(migrate, previous_datasets, convert=False)  # before the file is read
        state = load_state(where)
        with reading(state):  # a state without a usable config or seed is a StateError naming its file
            envelope(state)  # a state of another format or a pre-release says so before its config is read
            cfg = config if config is not None else SchedulerConfig.from_dict(state["meta"]["config"])
            seed = int(state["meta"]["seed"]) if seed is None else seed
        sched = cls(datasets, cfg, seed=seed)
        sched.load_state_dict(state, migrate=migrate, previous_datasets=previous_datasets)
        return sched


def _check_written(columns: Mapping[str, np.ndarray], rows: np.ndarray, policy: str) -> None:
    """What a policy wrote into the rows of its report that no draw can take: a negative snooze counter (a
    prompt neither awake nor asleep, which a draw would walk past for ever) or an unknown flag bit (a state
    no load accepts). A :class:`PolicyConformanceError` naming the first such row; ``report()`` then undoes it."""
    counter, flags = columns["counter"][rows], columns["flags"][rows]
    bad = (counter < 0) | ((flags & ~FLAG_BITS) != 0)
    if bad.any():
        i = int(np.argmax(bad))
        raise PolicyConformanceError(
            f"policy {policy!r} wrote counter={int(counter[i])}, flags={int(flags[i])} into memory row {int(rows[i])}: "
            f"a snooze counter is an encounter count >= 0, and flags hold only the bits {int(FLAG_BITS)} "
            "(RETIRED, EASY_SNOOZED, EXCLUDED). The report was not recorded"
        )


def _check_load_args(migrate: Any, previous_datasets: Any, convert: bool = True) -> Mapping[str, Any] | None:
    """``load_state_dict``'s arguments checked before the state is touched: ``migrate`` a bool, and
    ``previous_datasets`` ``None`` or a mapping of dataset name to data, each made a :class:`Source` when
    migrating (``convert``), so that data it cannot use is a :class:`ConfigError` naming it, never a
    :class:`StateError` about the state."""
    as_bool(migrate, "migrate")
    if previous_datasets is None:
        return None
    if not isinstance(previous_datasets, Mapping) or not all(isinstance(k, str) for k in previous_datasets):
        raise ConfigError(
            f"previous_datasets={type(previous_datasets).__name__}: must be None or a mapping of dataset name (str) "
            "to the data the state was saved with (records, a path, a Hugging Face Dataset or a Source)"
        )
    if not (convert and migrate):
        return previous_datasets
    out: dict[str, Source] = {}
    for name, data in previous_datasets.items():
        try:
            out[name] = as_source(name, data)
        except DataError as exc:
            raise ConfigError(f"previous_datasets[{name!r}] is not usable data: {exc}") from None
    return out


def _rewards_by_width(
    rewards: Any, rest: np.ndarray, k: int, rest_width: int, cfg: SchedulerConfig
) -> tuple[np.ndarray, np.ndarray]:
    """A screening report's rewards, checked: ``(first [S, k] of the screens, last [R, G - k] of the rests)``, in
    report order. One 2-D array when every candidate asks for the same number, else one row per candidate."""
    n, r = rest.shape[0], int(np.count_nonzero(rest))
    if r in (0, n):  # all screens, or all rests: one width
        arr = check_rewards(rewards, n, rest_width if r else k, cfg.reward_range, cfg.out_of_range).copy()
        empty = np.empty((0, k if r else rest_width), dtype=np.float64)
        return (empty, arr) if r else (arr, empty)
    if (isinstance(rewards, np.ndarray) and rewards.dtype != object) or not isinstance(rewards, (Sequence, np.ndarray)):
        raise RewardError(
            f"this report mixes screens (n={k}) and rests of screened groups (n={rest_width}): pass one row per "
            "candidate holding candidates[i].n rewards (a list of rows), not one array. Nothing was recorded."
        )
    if len(rewards) != n:
        raise RewardError(f"rewards have {len(rewards)} rows, expected one per reported candidate ({n})")
    rows = list(rewards)
    first = [rows[i] for i in np.flatnonzero(~rest)]
    last = [rows[i] for i in np.flatnonzero(rest)]
    return (
        check_rewards(first, n - r, k, cfg.reward_range, cfg.out_of_range).copy(),
        check_rewards(last, r, rest_width, cfg.reward_range, cfg.out_of_range).copy(),
    )
