"""The scheduler's side of a verl run: which uid is which issued prompt, reports, step close, state.

Framework-free on purpose: the replay buffer reads TransferQueue and hands plain arrays here, the
trainer hands uids here, and everything the scheduler decides is made in this one object (it lives
in verl's driver process, so one scheduler serves every node).
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from snooze import Candidate, IntegrationError, Scheduler, StateError
from snooze._kit.files import write_atomic
from snooze._kit.record import Record
from snooze.curriculum import Curriculum
from snooze.integrations._curriculum import restore_curriculum, save_curriculum
from snooze.integrations._paths import open_log
from snooze.integrations.verl._options import VerlOptions
from snooze.integrations.verl._prompts import PromptIndex
from snooze.integrations.verl._resume import check_state_folder
from snooze.logs import RewardLogWriter, framework_metrics, truncate_log, write_groups
from snooze.logs.dashboard import PREFIX

__all__ = ["SnoozeRun", "METRIC_PREFIX"]

log = logging.getLogger(__name__)

METRIC_PREFIX = PREFIX  # scheduler metrics in verl's logger: "snooze/gen/rounds", "snooze/skipped" (logs.logged_name)
INFLIGHT = "inflight.json"  # async modes: the uid verl gave each candidate still out, beside the scheduler's state


class SnoozeRun:
    """Holds the :class:`~snooze.Scheduler` of a verl run and the uid of every prompt it issued."""

    def __init__(self, index: PromptIndex, options: VerlOptions) -> None:
        config = options.scheduler
        if config.weights is None:  # verl samples rows uniformly: weigh each data_source by its size
            config = config.replace(weights=index.row_counts())
        unnamed = [name for name in index.names if name not in config.weights]
        if unnamed:  # the core gives an unlisted dataset weight 0: here that would silently never train on it
            raise IntegrationError(
                f"trainer.v1.snooze.weights names {sorted(config.weights)} but not the data_source(s) {unnamed} of "
                f"data.train_files, which would never be drawn. Give every data_source a weight (0 leaves one out "
                f"on purpose), or unset weights (each data_source's row count)."
            )
        self.index = index
        self.options = options
        self.scheduler = Scheduler(index.sources, config, seed=options.seed)
        self.curriculum = Curriculum.from_file(options.curriculum) if options.curriculum is not None else None
        if self.curriculum is not None:
            self.curriculum.apply(self.scheduler)  # its first stage; a resume restores the stage it was in
        self._unbound: list[Candidate] = []  # proposed, not yet given a uid by verl
        self._queued: deque[Candidate] = deque()  # async modes: proposed, not yet fetched by verl's dataloader
        self.open: dict[str, Candidate] = {}  # uid -> issued candidate, rollouts not yet reported
        self._step: dict[int, list[str]] = {}  # ticket -> uids (a screen's, then its rest's) reported or cancelled
        self._carried: dict[int, list[str]] = {}  # ticket -> uids of the surplus carried into the next step
        self._first: dict[int, tuple[np.ndarray, int | None]] = {}  # screens that passed: their rewards and tokens
        self._writer: RewardLogWriter | None = None
        self._append_log = False  # a fresh run starts its reward log over; a resumed one appends

    @property
    def config(self) -> Any:
        return self.scheduler.config

    @property
    def screening(self) -> bool:
        """Partial groups (``screen_size``): each issued prompt asks for its candidate's ``n`` rollouts."""
        return self.config.screen_size is not None

    def width(self, uid: str) -> int:
        """The rollouts the prompt issued under ``uid`` asks for: ``group_size``, or with screening its
        candidate's ``n`` (a screen's k, a rest's G - k)."""
        n = self.open[uid].n
        return self.config.group_size if n is None else int(n)

    # -- issuing --------------------------------------------------------------------------------
    def propose_round(self, n: int | None = None) -> Sequence[Candidate]:
        """One generation round of candidates (``n``, default ``gen_batch_size``, unless the data runs out)."""
        cands = self.scheduler.propose(n)
        if not cands:
            raise IntegrationError(
                f"the scheduler has no prompt left to issue at step {self.scheduler.step_index} (epochs="
                f"{self.config.epochs}: every prompt used up, retired or excluded). Raise trainer.v1.snooze.epochs "
                "or lower trainer.total_training_steps."
            )
        self._unbound.extend(cands)
        return cands

    def draw(self, n: int) -> None:
        """Async modes: propose ``n`` prompts in one round, fetched one at a time by :meth:`next_queued`."""
        self._queued.extend(self.propose_round(n))

    def next_queued(self) -> Candidate:
        """The next drawn prompt for verl's dataloader (a new one-prompt round if none is waiting)."""
        if not self._queued:
            self.draw(1)
        return self._queued.popleft()

    def bind(self, uids: Sequence[str], keys: Sequence[tuple[str, Any]]) -> None:
        """Give the oldest unbound candidates the uids verl assigned to the rows it fetched, in order."""
        if len(uids) > len(self._unbound):
            raise IntegrationError(f"verl fetched {len(uids)} prompts but the scheduler issued {len(self._unbound)}")
        cands = self._unbound[: len(uids)]
        for uid, key, cand in zip(uids, keys, cands):
            if key != cand.key:
                raise IntegrationError(f"row with uid {uid} is {key}, but the scheduler issued {cand.key} there")
        del self._unbound[: len(uids)]
        self.open.update(zip(uids, cands))

    # -- feedback -------------------------------------------------------------------------------
    def _issued(self, uids: Sequence[str], keys: Sequence[tuple[str, Any]] | None) -> list[Candidate]:
        unknown = [u for u in uids if u not in self.open]
        if unknown:
            raise IntegrationError(
                f"group uid {unknown[0]} was not issued by the snooze scheduler (or was reported already); only the "
                "snooze trainer may submit training prompts"
            )
        cands = [self.open[u] for u in uids]
        for uid, cand, key in zip(uids, cands, keys or [c.key for c in cands]):
            if key != cand.key:
                raise IntegrationError(
                    f"group uid {uid}: its rollouts say (data_source, extra_info.index) = {key}, but the prompt issued "
                    f"under that uid is {cand.key}; the agent loop must keep the dataset fields of each prompt"
                )
        return cands

    def report(
        self,
        uids: Sequence[str],
        keys: Sequence[tuple[str, Any]],
        rewards: Sequence[np.ndarray],
        tokens: np.ndarray | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """Report finished prompts (``rewards``: one row per uid, its :meth:`width` rewards, before any filtering;
        ``tokens`` ``[N]``, each one's generated tokens, where known). All or nothing: a bad report raises and
        records nothing. Returns the uids whose trajectories can never enter this step's batch (the scheduler left
        their group out: no signal, too stale, a screen stopped; a dropped rest's screen with it), and with
        screening ``{rest uid: its screen's uid}`` for each rest reported, whose group is whole now."""
        cands = self._issued(uids, keys)
        rows = [np.asarray(r, dtype=np.float64) for r in rewards]
        self.scheduler.report(cands, rows if self.screening else np.stack(rows), tokens)  # screens, rests: a row each
        joined = self._log_whole(cands, uids, rows, tokens)
        for uid, cand in zip(uids, cands):
            del self.open[uid]
            self._step.setdefault(cand.ticket, []).append(uid)
        out = set(self.scheduler.step_record().tickets("dropped", "too_stale").tolist())
        never = [u for c in cands if c.ticket in out for u in self._step[c.ticket]]
        for c in cands:
            if c.ticket in out:
                self._first.pop(c.ticket, None)
        return never, joined

    def _log_whole(
        self, cands: list[Candidate], uids: Sequence[str], rows: list[np.ndarray], tokens: np.ndarray | None
    ) -> dict[str, str]:
        """Write the whole groups to the reward log: every group without screening; with it (every fresh prompt is
        a screen), each rest joined to its screen's rewards and tokens (a screen that passed is kept until then; one
        that stopped is not logged, as the reference trainer does). Returns ``{rest uid: its screen's uid}``."""
        if not self.screening:
            write_groups(self._log(), self.scheduler.step_index, cands, np.stack(rows), tokens)
            return {}
        stopped = set(self.scheduler.step_record().tickets("dropped").tolist())
        whole, joined_rows, counts, joined = [], [], [], {}
        for i, (uid, cand) in enumerate(zip(uids, cands)):
            own = None if tokens is None else int(tokens[i])
            first = self._first.pop(cand.ticket, None)
            if first is not None:  # a rest: its group is whole now
                whole.append(cand)
                joined_rows.append(np.concatenate([first[0], rows[i]]))
                counts.append(None if own is None or first[1] is None else first[1] + own)
                joined[uid] = self._step[cand.ticket][0]
            elif cand.ticket not in stopped:  # a screen that passed: its rest comes in the next round
                self._first[cand.ticket] = (rows[i], own)
        if whole:
            known = None if any(c is None for c in counts) else np.array(counts, dtype=np.int64)
            write_groups(self._log(), self.scheduler.step_index, whole, np.stack(joined_rows), known)
        return joined

    def cancel(self, uids: Sequence[str], why: str = "failed in rollout", cleared: bool = False) -> None:
        """Withdraw groups that will not be reported (verl marked them ``failure``, evicted them as stale, or
        lost them): counted in ``gen/cancelled``, never trained on. ``cleared``: their keys are gone from
        TransferQueue already (else the step's close drops them)."""
        cands = self._issued(uids, None)
        self.scheduler.cancel(cands)
        for uid, cand in zip(uids, cands):
            del self.open[uid]
            self._first.pop(cand.ticket, None)  # a screen's rest cancelled: the whole group is given up
            if not cleared:
                self._step.setdefault(cand.ticket, []).append(uid)
        log.warning("%d group(s) %s and were withdrawn from the scheduler: %s", len(uids), why, list(uids)[:5])

    def wants_round(self) -> bool:
        """Whether the step's loop asks for another generation round.

        Bounded by ``max_gen_rounds`` (docs/concepts.md, "The step loop").
        """
        return self.scheduler.wants_round()

    def finish_step(self, in_flight: bool = False) -> tuple[list[str], list[str], dict[str, float]]:
        """Close the scheduler's step. Returns the uids to train on, the uids to drop and the metrics.
        ``in_flight``: groups issued for later steps may still be out (verl's async modes)."""
        if (self.open and not in_flight) or self._unbound:
            raise IntegrationError(
                f"{len(self.open) + len(self._unbound)} issued group(s) not reported at the end of the step"
            )
        batch = self.scheduler.finish_step()
        if self.curriculum is not None:
            self.curriculum.update(self.scheduler, batch.metrics)
        uid_of = {**self._carried, **self._step}  # a carried group's trajectories stayed in TransferQueue
        train = [u for c in batch.candidates for u in uid_of[c.ticket]]  # a screened group: its screen and rest
        self._carried = {t: uid_of[t] for t in batch.record.tickets("carried").tolist()}
        kept = set(train) | {u for us in self._carried.values() for u in us}
        drop = sorted({u for us in uid_of.values() for u in us} - kept)
        self._step, self._first = {}, {}
        if not train:
            raise IntegrationError(f"step {batch.step}: no group to train on {self._empty_batch(batch, in_flight)}.")
        return train, drop, framework_metrics(batch.metrics, self.options.metrics)

    def _empty_batch(self, batch: Any, in_flight: bool) -> str:
        """Why a step ended with no group, and what to change (``in_flight``: verl's async modes)."""
        cfg = self.config
        if self.scheduler.finished:  # the data's end: any group carried past it was trained at the step before
            return (
                f"because the data is used up (epochs={cfg.epochs}: every prompt drawn, retired or excluded) and the "
                "steps before trained every group drawn or carried (carry_surplus), and verl cannot train on an "
                "empty batch: set trainer.total_training_steps to the steps the data gives, or raise "
                "trainer.v1.snooze.epochs"
            )
        if in_flight:  # there on_short=pad cannot work and data.gen_batch_size is verl's 1
            return (
                f"after max_gen_rounds={cfg.max_gen_rounds} rounds of {cfg.gen_size} prompts (the step's batch and "
                "the refills of groups without signal), and verl cannot train on an empty batch: check the reward "
                "function on this data, or raise trainer.v1.snooze.max_gen_rounds"
            )
        return (
            f"after {int(batch.metrics.get('gen/rounds', 0))} generation round(s), and verl cannot train on an empty "
            "batch. Raise trainer.v1.snooze.max_gen_rounds or data.gen_batch_size, or set "
            "trainer.v1.snooze.on_short=pad (zero-advantage groups fill the batch)"
        )

    # -- reward log and state -------------------------------------------------------------------
    def _log(self) -> RewardLogWriter | None:
        if self._writer is None and self.options.reward_log is not None:
            self._writer = open_log(self.options.reward_log, self._append_log, self.config, "snooze.verl")
        return self._writer

    def save(self, folder: Path, in_flight: bool = False) -> None:
        """Save the scheduler. ``in_flight`` (async modes): candidates still out are saved with it (they are
        pending in its state) and so is the uid verl gave each, in ``inflight.json``, written first."""
        if (self.open and not in_flight) or self._unbound or self._step or self._first:
            raise IntegrationError("cannot checkpoint in the middle of a step: issued groups are not reported yet")
        if in_flight:
            held = {int(t) for t in self.scheduler.pending_candidates().ticket}
            mine = {c.ticket: uid for uid, c in self.open.items()}
            if set(mine) != held:
                raise IntegrationError(
                    f"{len(held ^ set(mine))} candidate(s) pending in the scheduler have no verl uid (or the reverse)"
                )
            folder.mkdir(parents=True, exist_ok=True)
            record = {"step": self.scheduler.step_index, "uids": {uid: c.ticket for uid, c in self.open.items()}}
            write_atomic(folder / INFLIGHT, json.dumps(record, sort_keys=True).encode())
        self.scheduler.save(folder)
        save_curriculum(self.curriculum, folder.parent)  # beside the scheduler's folder: global_step_N/

    def restore(self, folder: Path, global_step: int) -> None:
        """Load the scheduler saved with verl's checkpoint ``global_step`` and cut the reward log back to it."""
        check_state_folder(folder)
        restored = Scheduler.load(folder, self.index.sources, self.scheduler.config, seed=self.scheduler.seed)
        if restored.step_index != global_step:
            raise StateError(
                f"{folder} holds the scheduler after {restored.step_index} steps, but verl resumes after step "
                f"{global_step}; the folder does not belong to this checkpoint"
            )
        _refuse_waiting_screens(folder, restored)
        rebound = _rebind(folder, restored) if len(restored.pending_candidates()) else {}  # may raise: before changes
        restore_curriculum(self.curriculum, folder.parent, restored)  # may raise: before the run changes
        lost = restored.drop_carried()  # TransferQueue is not in verl's checkpoint: the carried trajectories are gone
        if lost:
            log.warning(
                "%d group(s) carried into step %d (carry_surplus) were lost with the restart (their trajectories "
                "lived in TransferQueue, which verl's checkpoint does not hold); the step generates in their place",
                lost,
                global_step + 1,
            )
        self.scheduler = restored
        self.open, self._unbound, self._step, self._queued, self._carried = rebound, [], {}, deque(), {}
        self._first = {}
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._append_log = True
        if self.options.reward_log is not None:
            truncate_log(self.options.reward_log, restored.step_index)


def _refuse_waiting_screens(folder: Path, sched: Scheduler) -> None:
    """A state holding screens that passed and wait for their rest (saved in the middle of a step, which the snooze
    trainers never do) cannot be resumed: the screens' rollouts lived in TransferQueue, which verl's checkpoint
    does not hold, so their rests would be trained as groups of G - k. A :class:`StateError`, before any change."""
    if sched.config.screen_size is None:
        return
    held = sched.state_dict()["arrays"].get("screens.ticket")
    if held is not None and len(held):
        raise StateError(
            f"{folder} holds {len(held)} screen(s) (screen_size) that passed and wait for the rest of their group: "
            "it was saved in the middle of a step, and their first rollouts are not in verl's checkpoint. Resume a "
            "checkpoint the snooze trainer wrote (it saves between steps, with no screen waiting), or start fresh "
            "(trainer.resume_mode=disable)."
        )


def _rebind(folder: Path, sched: Scheduler) -> dict[str, Candidate]:
    """The uid of each candidate pending in a restored scheduler, from ``inflight.json`` (async modes)."""
    path = folder / INFLIGHT
    if not path.is_file():
        raise StateError(
            f"{folder} holds {len(sched.pending_candidates())} candidate(s) in flight but no {INFLIGHT}: it was "
            "not written by a snooze async trainer. Resume it with the trainer that wrote it, or start fresh "
            "(trainer.resume_mode=disable)."
        )
    return _read_inflight(path, sched)


def _read_inflight(path: Path, sched: Scheduler) -> dict[str, Candidate]:
    """``inflight.json`` checked whole: ``{"step": <the state's step>, "uids": {uid: ticket}}``, every uid a
    non-empty string, every ticket an integer (not ``true``, not ``0.9``) naming one pending candidate, and no
    ticket named twice. Anything else is a :class:`StateError` naming the file, before anything changes."""
    from snooze._kit.json import read_json

    fix = "the checkpoint is damaged: resume an earlier one, or start fresh (trainer.resume_mode=disable)"
    record = Record(read_json(path, StateError, fix), str(path), StateError, fix)
    step = record.integer("step")
    if step != sched.step_index:
        raise record.fail("step", f"{step}, but the scheduler state beside it is at step {sched.step_index}")
    uids = record.obj("uids")
    by_ticket: dict[int, str] = {}
    for uid in uids.keys():
        uids.check_text(uid, uid)
        ticket = uids.integer(uid)
        if ticket in by_ticket:
            raise uids.fail(uid, f"names ticket {ticket}, as uid {by_ticket[ticket]!r} does: one uid per candidate")
        by_ticket[ticket] = uid
    pending = list(sched.pending_candidates())
    held = {c.ticket for c in pending}
    if set(by_ticket) != held:
        extra, missing = sorted(set(by_ticket) - held)[:5], sorted(held - set(by_ticket))[:5]
        raise record.fail(
            "uids",
            f"names other candidates than the scheduler state beside it holds in flight (tickets not pending there: "
            f"{extra}; pending but not named: {missing})",
        )
    return {by_ticket[c.ticket]: c for c in pending}
