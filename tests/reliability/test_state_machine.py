"""Issue 6.4: random sequences of propose / report (valid and invalid) / finish_step / save / load,
checked after every action against the pure-Python model in ``model.py``."""

from __future__ import annotations

# audit=0.0 and guard=False throughout: these tests check the skip rule alone (audited encounters, and every skip
# rolled out once the guard acts, would add issued prompts; tests/core/test_audit.py, tests/core/test_guard.py)
import shutil
import tempfile
from pathlib import Path

import _driver as D
import numpy as np
from helpers_core import assert_report_refused
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import snooze

from .model import EASY, FLAT, HARD, SIGNAL, Model

G = 3
NAMES = ["a", "b"]
REWARDS = {EASY: [1.0] * G, HARD: [0.0] * G, FLAT: [0.5] * G, SIGNAL: [0.0, 1.0, 1.0]}
CODES = {snooze.SIGNAL: SIGNAL, snooze.TOO_EASY: EASY, snooze.TOO_HARD: HARD, snooze.FLAT: FLAT}


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="snooze-sm-"))
        self.outstanding: list[snooze.Candidate] = []
        self.reported: list[snooze.Candidate] = []
        self.step_tickets: set[int] = set()  # reported this step, or carried into it

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _data(self) -> dict[str, snooze.Source]:
        return {n: snooze.Source.from_ids(n, np.arange(k)) for n, k in zip(NAMES, self.sizes)}

    @initialize(
        sizes=st.lists(st.integers(2, 5), min_size=2, max_size=2),
        policy=st.sampled_from(["snooze", "filter", "dynamic_sampling", "grpo"]),
        factor=st.sampled_from([0, 1, 1, 2, 3]),
        mix=st.sampled_from(["stream", "quota"]),
        carry=st.booleans(),
        epochs=st.sampled_from([None, 1, 2]),
        batch_size=st.integers(1, 4),
        seed=st.integers(0, 3),
    )
    def setup(self, sizes, policy, factor, mix, carry, epochs, batch_size, seed) -> None:  # noqa: ANN001
        self.sizes = sizes
        self.cfg = snooze.SchedulerConfig(
            audit=0.0,
            guard=False,
            batch_size=batch_size,
            group_size=G,
            policy=policy,
            options=snooze.SnoozeOptions(factor=factor) if policy == "snooze" else None,
            mix=mix,
            carry_surplus=carry,
            epochs=epochs,
            weights={"a": 1.0, "b": 2.0},
            max_gen_rounds=3,
        )
        self.sched = snooze.Scheduler(self._data(), self.cfg, seed=seed)
        self.model = Model(NAMES, sizes, seed, policy, factor, epochs)

    # -- valid actions --------------------------------------------------------------------------
    @rule(n=st.integers(1, 5))
    def propose(self, n: int) -> None:
        before = self.sched.drawn.copy()
        cands = self.sched.propose(n)
        assert len(cands) <= n
        spent = self.sched.drawn - before  # stream mix: encounters each dataset spent in the mixed stream
        for d in range(len(NAMES)):
            got = [c.row for c in cands if c.dataset == NAMES[d]]
            if self.cfg.mix == "stream":
                walked = self.model.walk(d, int(spent[d]))
            else:
                walked = self.model.draw(d, len(got), self.sched._parts.streams[d].exhausted)
            assert walked == got, f"dataset {NAMES[d]} issued the wrong prompts"
        if len(cands) < n:  # fewer only when no dataset can give more
            assert self.sched.exhausted
        self.outstanding += cands

    @precondition(lambda self: self.outstanding)
    @rule(data=st.data(), everything=st.booleans())
    def report(self, data: st.DataObject, everything: bool) -> None:
        n = len(self.outstanding)
        idx = list(range(n)) if everything else data.draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True))
        kinds = data.draw(
            st.lists(st.sampled_from([EASY, EASY, HARD, FLAT, SIGNAL, SIGNAL]), min_size=len(idx), max_size=len(idx))
        )
        cands = [self.outstanding[i] for i in idx]
        codes = self.sched.report(cands, np.array([REWARDS[k] for k in kinds]))
        assert [CODES[int(c)] for c in codes] == kinds
        self.model.report([(NAMES.index(c.dataset), c.row, k) for c, k in zip(cands, kinds)])
        self.outstanding = [c for i, c in enumerate(self.outstanding) if i not in set(idx)]
        self.reported += cands
        self.step_tickets |= {c.ticket for c in cands}

    @rule(n=st.integers(1, 5), data=st.data())
    def whole_step(self, n: int, data: st.DataObject) -> None:
        """propose, report everything outstanding, finish: moves through epochs quickly."""
        self.propose(n)
        if self.outstanding:
            self.report(data, everything=True)
        self.finish_step()

    @rule()
    def finish_step(self) -> None:
        batch = self.sched.finish_step()
        m = batch.metrics
        assert len(batch) <= self.cfg.batch_size
        assert {c.ticket for c in batch.candidates} <= self.step_tickets
        if self.cfg.policy != "grpo":
            assert batch.signal.all()
        self._check_step_metrics(m)
        self.model.new_step()
        self.step_tickets = {int(t) for t in self.sched.step_record().tickets("trained")}  # carried into the next step

    def _check_step_metrics(self, m: dict[str, float]) -> None:
        s = self.model.step
        for d, name in enumerate(NAMES):
            p = f"dataset/{name}/"
            assert m[p + "gen_groups"] == s["gen"][d]
            assert m[p + "skipped"] == s["skipped"][d] + s["passed"][d]  # snoozed and retired encounters
            assert m[p + "gen_groups"] + m[p + "carried_in"] == (
                m[p + "batch_groups"] + m[p + "dropped"] + m[p + "discarded"] + m[p + "carried_out"]
            )
        assert m["gen/groups"] + m["surplus/carried_in"] == (
            m["train/size"] + m["groups/dropped"] + m["surplus/discarded"] + m["surplus/carried_out"]
        )
        assert m["snooze/skipped"] == sum(s["skipped"]) and m["filter/skipped"] == sum(s["passed"])
        assert m["snooze/new"] == s["new"][0] and m["snooze/regressed"] == s["regressed"][0]

    @rule()
    def save_and_load(self) -> None:
        before = D.state_hash(self.sched)
        self.sched.save(self.tmp / "ck")
        self.sched = snooze.Scheduler.load(self.tmp / "ck", self._data())
        assert D.state_hash(self.sched) == before

    # -- invalid actions: refused, and nothing changes -------------------------------------------
    @rule(data=st.data())
    def report_invalid(self, data: st.DataObject) -> None:
        options = ["foreign", "bad_shape", "nan", "out_of_range"]
        if self.reported:
            options.append("again")
        if self.outstanding:
            options.append("twice")
        how = data.draw(st.sampled_from(options))
        cands = self.outstanding[:1]
        rewards: object = np.array([REWARDS[SIGNAL]] * len(cands))
        if how == "foreign":
            other = snooze.Scheduler(self._data(), self.cfg, seed=99)
            other._parts.pending.next_ticket = 10**9
            cands = other.propose(1)
            rewards = np.array([REWARDS[SIGNAL]])
        elif how == "again":
            cands = [self.reported[-1]]
            rewards = np.array([REWARDS[SIGNAL]])
        elif how == "twice":
            cands = cands * 2
            rewards = np.array([REWARDS[SIGNAL]] * 2)
        elif how == "bad_shape":
            rewards = np.zeros((len(cands) + 1, G))
        elif how == "nan":
            rewards = np.full((len(cands), G), np.nan)
        else:
            rewards = np.full((len(cands), G), 2.0)
        if not cands and how in ("nan", "out_of_range"):
            return  # an empty report of nothing is not invalid
        assert_report_refused(self.sched, cands, rewards, how)

    # -- invariants -----------------------------------------------------------------------------
    @invariant()
    def prompt_memory_matches_the_model(self) -> None:
        if not hasattr(self, "sched"):
            return
        for d, t in enumerate(self.sched._parts.memory.tables):
            counters = [self.model.prompts[(d, r)].counter for r in range(self.sizes[d])]
            retired = [self.model.prompts[(d, r)].retired for r in range(self.sizes[d])]
            assert t.counter.tolist() == counters
            assert ((t.flags & 1) != 0).tolist() == retired
            assert t.asleep() == sum(c > 0 for c in counters) and t.retired() == sum(retired)
            st_, ms = self.sched._parts.streams[d], self.model.streams[d]
            assert (st_.epoch, st_.cursor) == (ms.epoch, ms.cursor)
        assert len(self.sched.pending_candidates()) == len(self.outstanding)


SchedulerMachine.TestCase.settings = settings(
    max_examples=80, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestSchedulerMachine = SchedulerMachine.TestCase
