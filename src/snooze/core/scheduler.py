"""`Scheduler`: builds each GRPO training step's batch (SPEC sections 3 and 4).

The loop, from the caller's side::

    cands = sched.propose()            # snoozed and retired prompts are skipped as they are drawn
    sched.report(cands, rewards)       # [len(cands), G]; signal groups join the step's batch
    ...repeat until sched.batch_full or max_gen_rounds...
    batch = sched.finish_step()        # short-batch handling, surplus, advantages, metrics

or ``batch = sched.step(rollout_fn)``, which is exactly that loop.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snooze.core.advantages import grpo_advantages
from snooze.core.buffer import GroupBuffer
from snooze.core.classify import SIGNAL, check_rewards, classify_groups, group_means
from snooze.core.config import SchedulerConfig
from snooze.core.errors import BatchShortError, ConfigError, DataError, ReportError, StateError
from snooze.core.metrics import StepMetrics
from snooze.core.mixing import interleave_order, largest_remainder
from snooze.core.pending import PendingSet
from snooze.core.prompts import EXCLUDED, PromptMemory
from snooze.core.stream import DatasetStream, dataset_key
from snooze.core.types import Batch, Candidate, Candidates, RolloutFn
from snooze.data.source import Source, as_source

__all__ = ["Scheduler"]

log = logging.getLogger(__name__)


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
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ConfigError(f"seed={seed!r}: must be an integer >= 0")
        self.seed = int(seed)
        self.sources: list[Source] = [as_source(name, data) for name, data in datasets.items()]
        self.names = [s.name for s in self.sources]
        self.streams = [DatasetStream(len(s), self.seed, dataset_key(s.name), self.config.epochs) for s in self.sources]
        history = self.config.policy == "snooze" and self.config.skip == "history"
        k = self.config.snooze_factor  # under skip="history" a solved prompt is skipped with probability k/(k+1):
        cap = k / (k + 1)  # on average its next k encounters, as the seed's counter rule
        self.memory = PromptMemory([len(s) for s in self.sources], self.config.group_size if history else 0, cap)
        self.tables = self.memory.tables  # dataset d's prompt table (a view into self.memory)
        self.weights = self._weights_from(self.config.weights)
        self._quota_memo: dict[tuple[bytes, bytes, bytes], np.ndarray] = {}
        self.drawn = np.zeros(len(self.sources), dtype=np.int64)  # encounters (stream) / issues (quota) per dataset
        self.step_index = 0
        self.round = 0
        self.next_ticket = 0
        self.pending = PendingSet()  # issued, not yet reported: ticket -> (dataset index, row)
        G = self.config.group_size
        self.batch = GroupBuffer(G)  # groups accepted into this step's batch
        self.surplus = GroupBuffer(G)  # acceptable groups that found no room
        self.zero = GroupBuffer(G)  # zero-signal groups left out, kept as padding material when on_short='pad'
        self.counts = StepMetrics(self.names)
        self.last_metrics: dict[str, float] = {}

    # -- configuration hooks (curricula) -------------------------------------------------------
    def _weights_from(self, weights: Mapping[str, float] | None) -> np.ndarray:
        if weights is None:
            return np.ones(len(self.sources), dtype=np.float64)
        unknown = sorted(set(weights) - set(self.names))
        if unknown:
            raise ConfigError(f"weights name unknown dataset(s) {unknown}; datasets are {self.names}")
        w = np.array([float(weights.get(n, 0.0)) for n in self.names])
        if w.sum() <= 0:
            raise ConfigError("weights: at least one dataset needs a weight above 0")
        return w

    def set_weights(self, weights: Mapping[str, float] | None) -> None:
        """Change the mix weights from now on (``None``: equal). Unlisted datasets get weight 0.

        The stream mix starts over from the change: encounters follow the new weights at once, and a
        dataset whose weight was low does not get every draw until its past share catches up."""
        weights = self._weights_from(weights)
        if not np.array_equal(weights, self.weights):
            self.drawn[:] = 0
        self.weights = weights

    def set_excluded(self, dataset: str, ids: Sequence[Any], excluded: bool = True) -> int:
        """Exclude prompts from drawing (or let them back in). Returns how many changed.

        Excluded prompts are passed over like retired ones; counters of snoozed prompts are kept.
        """
        d = self._dataset_index(dataset)
        rows = self.sources[d].rows_of(ids)
        if (rows < 0).any():
            bad = [i for i, r in zip(ids, rows) if r < 0][:3]
            raise DataError(f"dataset {dataset!r} has no prompt(s) with id {bad}; check the curriculum file")
        table = self.tables[d]
        before = (table.flags[rows] & EXCLUDED) != 0
        was_active = self._active()
        if excluded:
            table.flags[rows] |= EXCLUDED
        else:
            table.flags[rows] &= ~EXCLUDED
        table.recount()
        if not np.array_equal(was_active, self._active()):
            self.drawn[:] = 0  # a dataset left or rejoined the mix: the stream mix starts over (see set_weights)
        return int(np.count_nonzero(before != excluded))

    def _dataset_index(self, name: str) -> int:
        try:
            return self.names.index(name)
        except ValueError:
            raise DataError(f"unknown dataset {name!r}; datasets are {self.names}") from None

    # -- properties -----------------------------------------------------------------------------
    @property
    def exhausted(self) -> bool:
        """True when no dataset can issue another candidate (finite epochs used up, or all retired)."""
        return not self._active().any()

    @property
    def batch_full(self) -> bool:
        return len(self.batch) >= self.config.batch_size

    def _active(self) -> np.ndarray:
        return np.array(
            [w > 0 and not s.exhausted and t.n_blocked < t.counter.shape[0] for w, s, t in zip(self.weights.tolist(), self.streams, self.tables)]
        )

    # -- drawing --------------------------------------------------------------------------------
    def propose(self, n: int | None = None) -> Candidates:
        """Issue up to ``n`` candidates (default ``gen_batch_size``): one generation round.

        Fewer come back only when the data is exhausted. Skips (snoozed, retired) are counted.
        """
        n = self.config.gen_size if n is None else n
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ConfigError(f"propose(n={n!r}): n must be an integer >= 1")
        self.round += 1
        self.counts.add("gen/rounds", 1)
        if self.config.mix == "stream":
            return self._issue(*self._draw_stream(int(n)))
        rows_by_ds: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * len(self.sources)
        want = int(n)
        while want > 0:
            active = self._active()
            if not active.any():
                break
            open_slots = np.maximum(self._quotas() - self._filled(), 0) * active
            alloc = largest_remainder(want, open_slots if open_slots.sum() > 0 else np.where(active, self.weights, 0.0))
            got_any = False
            for d in np.flatnonzero(alloc):
                rows, skipped, passed = self.tables[d].draw(self.streams[d], int(alloc[d]))
                self._count_skips(d, skipped, passed)
                rows_by_ds[d] = np.concatenate([rows_by_ds[d], rows])
                got_any |= rows.shape[0] > 0
                want -= rows.shape[0]
            if not got_any and np.array_equal(self._active(), active):
                break  # no dataset gave a prompt and none ran out: nothing more to draw
        counts = np.array([r.shape[0] for r in rows_by_ds], dtype=np.int64)
        self.drawn += counts
        order = interleave_order(counts)  # slot -> index into the rows grouped by dataset
        return self._issue(np.repeat(np.arange(len(counts)), counts)[order], np.concatenate(rows_by_ds)[order])

    def _count_skips(self, d: int, skipped: int, passed: int) -> None:
        self.counts.add_ds(d, "skipped", skipped + passed)
        self.counts.add("snooze/skipped", skipped)
        self.counts.add("filter/skipped", passed)

    def _draw_stream(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Walk the mixed stream: encounters interleaved by weight, a skipped one replaced by the next
        encounter of the *mixed* stream (so time saved on a mastered dataset goes to the others).

        The mixed order is stride scheduling: dataset ``d``'s next encounters are due at
        ``(drawn_d + j + 0.5) / p_d``, so cumulative encounters per dataset (``self.drawn``, counted
        since the last change of weights or of the datasets in the mix) never stray more than one
        from ``p_d`` times the total. Returns ``(owners, rows)`` of the ``<= n``
        awake prompts, in mixed-stream order.
        """
        owners_out: list[np.ndarray] = []
        rows_out: list[np.ndarray] = []
        need = n
        while need > 0:
            active = self._active()
            if not active.any():
                break
            p = np.where(active, self.weights, 0.0) / np.where(active, self.weights, 0.0).sum()
            # encounters to examine at once: sized from the share awake, so one pass usually does
            m = max(int(sum(p[d] * t.encounters_for(need) for d, t in enumerate(self.tables) if active[d])), 64)
            want = np.where(active, np.ceil(m * p).astype(np.int64) + 1, 0)
            peeks = [self.tables[d].peek(self.streams[d], int(want[d])) for d in range(len(self.sources))]
            counts = np.array([pk[0].shape[0] for pk in peeks], dtype=np.int64)  # short where an epoch ends
            rank = np.concatenate([np.arange(c) for c in counts])
            owners = np.repeat(np.arange(len(self.sources)), counts)
            # Stride scheduling: dataset d's j-th next encounter is due at (drawn_d + j + 0.5) / p_d.
            due = (self.drawn[owners] + rank + 0.5) / np.maximum(p[owners], 1e-300)
            short = (counts < want) & active  # an epoch ends inside the chunk: stop where it would go on
            cutoff = ((self.drawn + counts + 0.5) / np.maximum(p, 1e-300))[short].min() if short.any() else np.inf
            order = np.argsort(due, kind="stable")
            order = order[due[order] < cutoff][:m]
            at = (np.cumsum(counts) - counts)[owners[order]] + rank[order]  # [M] index into the peeks
            owners = owners[order]
            awake = np.concatenate([pk[1] for pk in peeks])[at]
            rows = np.concatenate([pk[0] for pk in peeks])[at]
            hits = np.flatnonzero(awake)
            cut = int(hits[need - 1]) + 1 if hits.shape[0] >= need else owners.shape[0]
            if cut == 0:
                break
            used = np.bincount(owners[:cut], minlength=len(self.sources))
            for d in np.flatnonzero(used):
                _, skipped, passed = self.tables[d].consume(self.streams[d], peeks[d], int(used[d]))
                self._count_skips(d, skipped, passed)
            self.drawn += used
            take = awake[:cut]
            owners_out.append(owners[:cut][take])
            rows_out.append(rows[:cut][take])
            need -= int(take.sum())
        if not owners_out:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        return np.concatenate(owners_out).astype(np.int64), np.concatenate(rows_out).astype(np.int64)

    def _issue(self, owners: np.ndarray, rows: np.ndarray) -> Candidates:
        tickets = np.arange(self.next_ticket, self.next_ticket + owners.shape[0], dtype=np.int64)
        self.pending.add(tickets, owners, rows)
        self.next_ticket += int(owners.shape[0])
        return Candidates(self.sources, owners, rows, tickets)

    def pending_candidates(self) -> Candidates:
        """Candidates issued but not yet reported, in issue order (e.g. to re-roll them after a resume)."""
        p = self.pending
        return Candidates(self.sources, p.ds.copy(), p.row.copy(), p.ticket.copy())

    def cancel(self, candidates: Sequence[Candidate]) -> int:
        """Withdraw issued candidates that will never be reported (e.g. a framework dropped them).

        Their encounters stay spent (snooze counters moved as drawn); they are counted in
        ``gen/cancelled`` and no longer held in the state. Returns how many were pending.
        """
        tickets, index = self._check_tickets(candidates)
        self.pending.pop(index)
        self.counts.add("gen/cancelled", len(tickets))
        return len(tickets)

    # -- reporting ------------------------------------------------------------------------------
    def report(self, candidates: Sequence[Candidate], rewards: Any) -> np.ndarray:
        """Record each candidate's group of rewards (``[len(candidates), group_size]``).

        Checks everything before changing anything: a bad report raises and records nothing.
        Returns the outcome code of each group (``SIGNAL``, ``TOO_EASY``, ``TOO_HARD``, ``FLAT``).
        """
        cfg = self.config
        tickets, index = self._check_tickets(candidates)
        arr = check_rewards(rewards, len(tickets), cfg.group_size, cfg.reward_range)
        outcomes = classify_groups(arr, cfg.reward_range, cfg.easy_threshold, cfg.hard_threshold, cfg.signal_tol)
        ds, rows = self.pending.pop(index)
        means = None
        if self.memory.all.skip_power:  # skip="history" folds each group's pass rate into its prompt's history
            low, high = cfg.reward_range
            means = (group_means(arr) - low) / (high - low)  # [N], fractions of the range
        changes = self.memory.apply(ds, rows, outcomes, cfg, means)
        self.counts.add("snooze/new", changes["new"])
        self.counts.add("snooze/regressed", changes["regressed"])
        self.counts.add("filter/new", changes["retired"])
        self.counts.record_generated(ds, outcomes, cfg.group_size)
        self._accept(GroupBuffer.of(ds, rows, tickets, outcomes, arr))
        return outcomes

    def _check_tickets(self, candidates: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray | slice]:
        """Tickets of a report and their index in the pending set; raises before anything changes."""
        if isinstance(candidates, Candidates):
            tickets = candidates.ticket
        elif isinstance(candidates, Sequence) and not isinstance(candidates, (Candidate, str)):
            if not all(isinstance(c, Candidate) for c in candidates):
                i = next(i for i, c in enumerate(candidates) if not isinstance(c, Candidate))
                raise ReportError(f"item {i} of the report is a {type(candidates[i]).__name__}, not a Candidate from propose()")
            tickets = np.fromiter((c.ticket for c in candidates), dtype=np.int64, count=len(candidates))
        else:
            raise ReportError("report() takes the candidates that propose() returned (or a list of them)")
        if tickets.shape[0] > 1 and not (tickets[1:] > tickets[:-1]).all():  # in issue order: distinct, no sort
            uniq, counts = np.unique(tickets, return_counts=True)
            if (counts > 1).any():
                t = int(uniq[counts > 1][0])
                raise ReportError(f"candidate with ticket {t} appears {int(counts.max())} times in one report; report each once")
        index = self.pending.find(tickets)
        if not isinstance(index, slice) and (index < 0).any():
            c = candidates[int(np.argmax(index < 0))]
            t = c.ticket
            state = "was already reported (or cancelled)" if t < self.next_ticket else "was never issued by this scheduler"
            raise ReportError(
                f"candidate {c.dataset!r}/{c.id!r} (ticket {t}) {state}; report only what propose() "
                "returned, once each. Nothing was recorded."
            )
        return tickets, index

    def _accept(self, groups: GroupBuffer) -> None:
        """Move acceptable groups into the batch while there is room; the rest to surplus or zero."""
        acceptable = np.ones(len(groups), dtype=bool) if self.config.policy == "grpo" else groups.outcome == SIGNAL
        if self.config.on_short == "pad":  # zero-signal groups are kept only as padding material
            self.zero.extend(groups, ~acceptable)
        self.counts.add_dropped(groups.ds[~acceptable])
        fits = self._fits(groups.ds, acceptable)
        self.batch.extend(groups, fits)
        self.surplus.extend(groups, acceptable & ~fits)

    def _fits(self, ds: np.ndarray, acceptable: np.ndarray) -> np.ndarray:
        room = self.config.batch_size - len(self.batch)
        fits = np.zeros(ds.shape[0], dtype=bool)
        idx = np.flatnonzero(acceptable)
        if self.config.mix == "quota":
            open_slots = np.maximum(self._quotas() - self._filled(), 0)
            keep = [idx[ds[idx] == d][: open_slots[d]] for d in range(len(self.sources))]
            idx = np.sort(np.concatenate(keep)) if keep else idx[:0]
        fits[idx[:room]] = True
        return fits

    def _quotas(self) -> np.ndarray:
        """Each dataset's slots in this step's batch: its weight's share, by largest remainder.

        Datasets that can issue no more keep only what they already have; their slots go to the rest.
        """
        active = self._active()
        fixed = np.where(active, 0, self._filled())
        key = (active.tobytes(), fixed.tobytes(), self.weights.tobytes())
        quotas = self._quota_memo.get(key)
        if quotas is None:  # a pure function of the key; steps mostly repeat the same few
            share = largest_remainder(self.config.batch_size - int(fixed.sum()), np.where(active, self.weights, 0.0))
            quotas = share + fixed
            if len(self._quota_memo) >= 256:
                self._quota_memo.clear()
            self._quota_memo[key] = quotas
        return quotas.copy()

    def _filled(self) -> np.ndarray:
        return np.bincount(self.batch.ds, minlength=len(self.sources)).astype(np.int64)

    # -- closing a step -------------------------------------------------------------------------
    def step(self, rollout_fn: RolloutFn) -> Batch:
        """One training step: propose, roll out, report until the batch is full or ``max_gen_rounds``."""
        while not self.batch_full and self.round < self.config.max_gen_rounds:
            candidates = self.propose()
            if not candidates:
                break
            self.report(candidates, rollout_fn(candidates))
        return self.finish_step()

    def finish_step(self) -> Batch:
        """Close the step: handle a short batch (``on_short``), the surplus, advantages and metrics."""
        cfg = self.config
        quotas = self._quotas() if cfg.mix == "quota" else None
        starved = (quotas - self._filled() > 0) if quotas is not None else np.zeros(len(self.sources), dtype=bool)
        if not self.batch_full and cfg.mix == "quota":
            self._move(self.surplus, self.batch, cfg.batch_size - len(self.batch))  # starved slots go to the rest
        if not self.batch_full and cfg.on_short == "raise":
            raise BatchShortError(
                f"step {self.step_index}: only {len(self.batch)} of batch_size={cfg.batch_size} groups with signal after "
                f"{self.round} generation round(s) (max_gen_rounds={cfg.max_gen_rounds}"
                + (", data exhausted" if self.exhausted else "")
                + "). Raise max_gen_rounds or gen_batch_size, lower batch_size, or set on_short='partial' or 'pad'. "
                "The groups gathered so far are kept: propose()/report() more, then finish_step() again."
            )
        padded = self._move(self.zero, self.batch, cfg.batch_size - len(self.batch)) if cfg.on_short == "pad" else 0
        batch = self._build_batch(padded)
        carried = self.surplus if cfg.carry_surplus else GroupBuffer(cfg.group_size)
        self.counts.close_surplus(self.surplus.ds, carried=cfg.carry_surplus)
        metrics = self.counts.finish(self, batch, padded, starved)
        batch.metrics = metrics
        self.last_metrics = metrics
        self.step_index += 1
        self.round = 0
        self.batch, self.surplus, self.zero = GroupBuffer(cfg.group_size), GroupBuffer(cfg.group_size), GroupBuffer(cfg.group_size)
        self.counts.start_step(carried_in=carried.ds)
        if len(carried):  # carried groups go first; what does not fit now is discarded, never carried twice
            fits = self._fits(carried.ds, np.ones(len(carried), dtype=bool))
            self.batch.extend(carried, fits)
            self.counts.add_discarded(carried.ds[~fits])
        return batch

    def _move(self, src: GroupBuffer, dst: GroupBuffer, k: int) -> int:
        k = max(0, min(k, len(src)))
        if k:
            head = np.zeros(len(src), dtype=bool)
            head[:k] = True
            dst.extend(src, head)
            rest = src.take(~head)
            src.ds, src.row, src.ticket, src.outcome, src.rewards = rest.ds, rest.row, rest.ticket, rest.outcome, rest.rewards
        return k

    def _build_batch(self, padded: int) -> Batch:
        b = self.batch
        cands = Candidates(self.sources, b.ds.astype(np.int64), b.row.copy(), b.ticket.copy())
        adv = grpo_advantages(b.rewards, self.config.advantage)
        return Batch(self.step_index, cands, b.rewards.copy(), adv, b.outcome == SIGNAL)

    def metrics(self) -> dict[str, float]:
        """The last finished step's metrics and the cumulative totals (SPEC section 5), as a flat dict."""
        return dict(self.last_metrics)

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Versioned state: JSON-safe ``meta`` and numpy ``arrays``. No pickle anywhere."""
        from snooze.core.state import scheduler_state

        return scheduler_state(self)

    def load_state_dict(
        self, state: Mapping[str, Any], migrate: bool = False, previous_datasets: Mapping[str, Any] | None = None
    ) -> None:
        """Restore :meth:`state_dict` output. A state saved with other data, seed, group size or weights
        raises :class:`StateMismatchError` unless ``migrate=True``; migrating to changed data also needs
        ``previous_datasets`` (the data the state was saved with) to match prompts by id."""
        from snooze.core.state import load_scheduler_state

        load_scheduler_state(self, state, migrate=migrate, previous=previous_datasets)

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
        file = str(state.get("path", path))
        try:
            cfg = config if config is not None else SchedulerConfig.from_dict(state["meta"]["config"])
            seed = int(state["meta"]["seed"]) if seed is None else seed
        except (KeyError, TypeError, ConfigError) as exc:
            raise StateError(f"{file}: scheduler state has no usable config/seed ({exc})") from None
        sched = cls(datasets, cfg, seed=seed)
        try:
            sched.load_state_dict(state, migrate=migrate, previous_datasets=previous_datasets)
        except StateError as exc:
            if file in str(exc):
                raise
            raise type(exc)(f"{file}: {exc}") from None
        return sched
