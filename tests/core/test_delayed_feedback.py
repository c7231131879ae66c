"""The core under delayed feedback (docs/concepts.md, "Delayed feedback"): candidates proposed for later
steps while earlier ones are out, reported in any order and after the step they were drawn for, with the
state saved and loaded at any point; checked against the plain model of tests/reliability/model.py and
against a twin run that is never saved."""

from __future__ import annotations

# audit=0.0 throughout: the model knows nothing of audits (tests/core/test_audit.py covers them)
import json
from typing import Any

import _driver as D
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from reliability.model import EASY, FLAT, HARD, SIGNAL, Model

import snooze

G = 3
NAMES = ["a", "b"]
REWARDS = {EASY: [1.0] * G, HARD: [0.0] * G, FLAT: [0.5] * G, SIGNAL: [0.0, 1.0, 1.0]}
CODES = {snooze.SIGNAL: SIGNAL, snooze.TOO_EASY: EASY, snooze.TOO_HARD: HARD, snooze.FLAT: FLAT}
ASYNC_KEYS = (
    "async/age_mean",
    "async/age_max",
    "async/too_stale",
    "async/in_flight",
    "async/in_flight_at_draw",
    "async/redrawn",
)


def _data(sizes: list[int]) -> dict[str, snooze.Source]:
    return {n: snooze.Source.from_ids(n, np.arange(k)) for n, k in zip(NAMES, sizes)}


def _through_json(state: dict[str, Any]) -> dict[str, Any]:
    """The state as a checkpoint carries it: meta through JSON text, arrays copied."""
    return {"meta": json.loads(json.dumps(state["meta"])), "arrays": {k: v.copy() for k, v in state["arrays"].items()}}


class DelayedFeedback(RuleBasedStateMachine):
    """``sched`` is saved and loaded at random points, ``twin`` never is; both get every action."""

    @initialize(
        sizes=st.lists(st.integers(2, 5), min_size=2, max_size=2),
        policy=st.sampled_from(["snooze", "snooze", "filter", "dynamic_sampling", "grpo"]),
        factor=st.sampled_from([0, 1, 2, 3]),
        mix=st.sampled_from(["stream", "quota"]),
        carry=st.booleans(),
        epochs=st.sampled_from([None, None, 2]),
        batch_size=st.integers(1, 4),
        k=st.sampled_from([None, 0, 0, 1, 2]),
        on_short=st.sampled_from(["partial", "pad"]),
        seed=st.integers(0, 3),
    )
    def setup(self, sizes, policy, factor, mix, carry, epochs, batch_size, k, on_short, seed) -> None:  # noqa: ANN001
        self.sizes, self.k = sizes, k
        self.cfg = snooze.SchedulerConfig(
            audit=0.0,
            batch_size=batch_size,
            group_size=G,
            policy=policy,
            options=snooze.SnoozeOptions(factor=factor) if policy == "snooze" else None,
            mix=mix,
            carry_surplus=carry,
            epochs=epochs,
            weights={"a": 1.0, "b": 2.0},
            max_gen_rounds=3,
            max_staleness=k,
            on_short=on_short,
        )
        self.sched = snooze.Scheduler(_data(sizes), self.cfg, seed=seed)
        self.twin = snooze.Scheduler(_data(sizes), self.cfg, seed=seed)
        self.twin.load_state_dict(self.sched.state_dict())  # the same run (run id), so both take every candidate
        self.model = Model(NAMES, sizes, seed, policy, factor, epochs)
        self.step = 0
        self.out: dict[int, tuple[snooze.Candidate, int]] = {}  # ticket -> (candidate, step drawn at)
        self.reported: set[int] = set()  # every ticket reported, ever
        self.trainable: set[int] = set()  # reported in time this step, or carried into it
        self.generated = 0  # groups reported at finished steps, for total/gen_groups
        self._new_step()

    def _new_step(self) -> None:
        self.ages: list[int] = []
        self.draws: list[tuple[int, int]] = []  # (candidates drawn, candidates out then) per round
        self.redrawn = 0
        self.this_step = 0

    # -- actions ------------------------------------------------------------------------------
    @rule(n=st.integers(1, 4))
    def propose(self, n: int) -> None:
        before = self.sched.drawn.copy()
        out_prompts = {(c.dataset, c.row) for c, _ in self.out.values()}
        cands, twins = self.sched.propose(n), self.twin.propose(n)
        assert [c.ticket for c in cands] == [c.ticket for c in twins] and [c.id for c in cands] == [c.id for c in twins]
        spent = self.sched.drawn - before
        for d in range(len(NAMES)):  # the prompts the model's policy draws, from the feedback it has had so far
            got = [c.row for c in cands if c.dataset == NAMES[d]]
            if self.cfg.mix == "stream":
                walked = self.model.walk(d, int(spent[d]))
            else:
                walked = self.model.draw(d, len(got), self.sched._parts.streams[d].exhausted)
            assert walked == got, f"dataset {NAMES[d]} issued other prompts than the model"
        self.draws.append((len(cands), len(self.out)))
        self.redrawn += sum((c.dataset, c.row) in out_prompts for c in cands)
        for c in cands:
            assert c.ticket not in self.out and c.ticket not in self.reported  # a ticket is issued once
            self.out[c.ticket] = (c, self.step)

    @precondition(lambda self: self.out)
    @rule(data=st.data(), everything=st.booleans())
    def report(self, data: st.DataObject, everything: bool = False) -> None:
        out = sorted(self.out)  # any subset, in any order
        subset = st.permutations(out) if everything else st.lists(st.sampled_from(out), min_size=1, unique=True)
        tickets = data.draw(subset)
        kinds = data.draw(
            st.lists(st.sampled_from([EASY, EASY, HARD, FLAT, SIGNAL, SIGNAL, SIGNAL]), min_size=len(tickets))
        )
        kinds = kinds[: len(tickets)]
        cands = [self.out[t][0] for t in tickets]
        rewards = np.array([REWARDS[kind] for kind in kinds])
        codes = self.sched.report(cands, rewards)
        assert np.array_equal(codes, self.twin.report(cands, rewards))
        assert [CODES[int(c)] for c in codes] == kinds
        self.model.report([(NAMES.index(c.dataset), c.row, kind) for c, kind in zip(cands, kinds)])
        for t in tickets:
            age = self.step - self.out.pop(t)[1]
            self.ages.append(age)
            if self.k is None or age <= self.k:
                self.trainable.add(t)
        self.reported |= set(tickets)
        self.this_step += len(tickets)

    @rule(data=st.data())
    def finish_then_report_everything(self, data: st.DataObject) -> None:
        """What an asynchronous trainer does most: the step closes with candidates out, reported in the next."""
        self.finish_step()
        if self.out:
            self.report(data, everything=True)

    @rule()
    def finish_step(self) -> None:
        batch, other = self.sched.finish_step(), self.twin.finish_step()
        m = batch.metrics
        assert m == other.metrics and [c.ticket for c in batch.candidates] == [c.ticket for c in other.candidates]
        assert {c.ticket for c in batch.candidates} <= self.trainable  # never a group older than max_staleness
        self._check_metrics(m)
        self.generated += self.this_step
        assert m["total/gen_groups"] == self.generated
        self.model.new_step()
        self.step += 1
        self._new_step()
        self.trainable = {int(t) for t in self.sched.step_record().tickets("trained")}  # carried into the next step

    def _check_metrics(self, m: dict[str, Any]) -> None:
        ages, k = self.ages, self.k
        assert m["gen/groups"] == self.this_step == len(ages)
        assert m["async/age_max"] == max(ages, default=0)
        assert m["async/age_mean"] == pytest.approx(sum(ages) / len(ages) if ages else 0.0)
        assert m["async/too_stale"] == (0 if k is None else sum(a > k for a in ages))
        assert m["async/in_flight"] == len(self.out)
        drawn = sum(n for n, _ in self.draws)
        assert m["async/in_flight_at_draw"] == pytest.approx(sum(n * o for n, o in self.draws) / drawn if drawn else 0)
        assert m["async/redrawn"] == self.redrawn
        assert m["groups/dropped"] >= m["async/too_stale"]  # too stale groups are left out, counted as dropped
        # every group ends the step in exactly one place
        assert m["gen/groups"] + m["surplus/carried_in"] == (
            m["train/size"] + m["groups/dropped"] + m["surplus/discarded"] + m["surplus/carried_out"]
        )

    @rule(through_files=st.booleans())
    def save_and_load(self, through_files: bool) -> None:
        before = D.state_hash(self.sched)
        fresh = snooze.Scheduler(_data(self.sizes), self.cfg, seed=self.sched.seed)
        fresh.load_state_dict(_through_json(self.sched.state_dict()))
        assert D.state_hash(fresh) == before and fresh.run_id == self.sched.run_id
        self.sched = fresh

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def no_group_lost_or_counted_twice(self) -> None:
        if not hasattr(self, "sched"):
            return
        p = self.sched._parts.pending
        assert p.ticket.tolist() == sorted(self.out)  # every ticket issued is pending or reported, never both
        assert not set(self.out) & self.reported
        assert len(self.out) + len(self.reported) == p.next_ticket
        assert p.step.tolist() == [self.out[t][1] for t in sorted(self.out)]

    @invariant()
    def decisions_match_the_model_and_the_twin(self) -> None:
        if not hasattr(self, "sched"):
            return
        for d, t in enumerate(self.sched._parts.memory.tables):
            assert t.counter.tolist() == [self.model.prompts[(d, r)].counter for r in range(self.sizes[d])]
            assert ((t.flags & 1) != 0).tolist() == [self.model.prompts[(d, r)].retired for r in range(self.sizes[d])]
        assert D.state_hash(self.sched) == D.state_hash(self.twin)  # a resumed run continues exactly


DelayedFeedback.TestCase.settings = settings(
    max_examples=50, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestDelayedFeedback = DelayedFeedback.TestCase


# -- examples in numbers ----------------------------------------------------------------------------
def _pool(**cfg: Any) -> snooze.Scheduler:
    config = snooze.SchedulerConfig(
        audit=0.0, batch_size=2, group_size=G, options=snooze.SnoozeOptions(factor=2), **cfg
    )
    return snooze.Scheduler(_data([6, 6]), config, seed=0)


def test_one_step_off_policy_groups_train_the_step_they_arrive_in() -> None:
    """As verl's one-step-off-policy trainer: step s+1's candidates are drawn before step s's are reported."""
    sched = _pool(max_staleness=1)
    ahead = sched.propose(2)
    sched.finish_step()  # step 0: nothing reported yet
    for step in (1, 2):
        now, ahead = ahead, sched.propose(2)
        sched.report(now, np.array([REWARDS[SIGNAL]] * 2))
        m = sched.finish_step().metrics
        assert (m["step"], m["train/groups"], m["async/age_mean"], m["async/age_max"]) == (step, 2, 1.0, 1)
        assert (m["async/too_stale"], m["async/in_flight"], m["async/in_flight_at_draw"]) == (0, 2, 2.0)


def test_a_group_older_than_max_staleness_updates_the_memory_but_is_not_trained_on() -> None:
    sched = _pool(max_staleness=0)
    late = sched.propose(2)
    sched.finish_step()
    sched.report(late, np.array([REWARDS[EASY], REWARDS[SIGNAL]]))
    m = sched.finish_step().metrics
    assert (m["train/groups"], m["async/too_stale"], m["groups/dropped"], m["snooze/new"]) == (0, 2, 2, 1)
    assert sum(t.asleep() for t in sched._parts.memory.tables) == 1  # the too-easy one is snoozed all the same


def test_the_synchronous_loop_reports_no_delay() -> None:
    sched = _pool()
    for _ in range(3):
        m = sched.step(lambda c: np.array([REWARDS[SIGNAL]] * len(c)))
        assert [m.metrics[k] for k in ASYNC_KEYS] == [0.0, 0, 0, 0, 0.0, 0]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2"])
def test_max_staleness_must_be_an_integer_at_least_0(bad: object) -> None:
    with pytest.raises(snooze.ConfigError, match="max_staleness"):
        snooze.SchedulerConfig(max_staleness=bad)


def test_the_pending_steps_of_a_state_are_checked_and_a_state_without_them_is_refused() -> None:
    sched = _pool()
    sched.propose(2)
    sched.finish_step()
    sched.propose(1)  # out: two drawn at step 0, one at step 1
    state = sched.state_dict()
    assert state["arrays"]["pending_step"].tolist() == [0, 0, 1]
    for bad in ([0, 0, 2], [-1, 0, 1], [0, 1], [0.0, 0.0, 1.0], [1, 0, 1]):  # future, negative, short, floats, down
        fresh = _pool()
        arrays = {**state["arrays"], "pending_step": np.array(bad)}
        with pytest.raises(snooze.StateError, match="pending step"):
            fresh.load_state_dict({"meta": state["meta"], "arrays": arrays})
        assert len(fresh.pending_candidates()) == 0 and fresh.step_index == 0  # nothing changed
    old = _pool()  # a pre-release state had no pending steps: refused, nothing changed
    with pytest.raises(snooze.StateError, match="incomplete or malformed.*pending_step"):
        old.load_state_dict(
            {"meta": state["meta"], "arrays": {k: v for k, v in state["arrays"].items() if k != "pending_step"}}
        )
    assert len(old.pending_candidates()) == 0 and old.step_index == 0
