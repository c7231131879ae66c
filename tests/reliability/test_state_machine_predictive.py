"""``policy="predictive"`` under random sequences of propose / report (whole, partial, invalid) /
finish_step / save / load, checked after every action against the plain model in ``predictive_model.py``
(the mixing and snoozing semantics are ``test_state_machine.py``'s; this one is one dataset)."""

from __future__ import annotations

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

from .predictive_model import PredictiveModel

G = 4
KINDS = {
    "easy": [1.0] * G,
    "hard": [0.0] * G,
    "up": [1.0, 1.0, 1.0, 0.0],
    "down": [0.0, 0.0, 1.0, 0.0],
    "flat": [0.5] * G,
}


class PredictiveMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="snooze-sm-pred-"))
        self.outstanding: list[snooze.Candidate] = []

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _data(self) -> dict[str, snooze.Source]:
        return {"d": snooze.Source.from_ids("d", np.arange(self.n))}

    @initialize(
        n=st.integers(2, 9),
        margin=st.sampled_from([0.3, 1.0, 3.0]),
        hard=st.sampled_from([None, 0.0]),
        recheck=st.sampled_from([0.2, 1.0, 2.5]),
        backoff=st.sampled_from([1.0, 2.0]),
        seed=st.integers(0, 3),
    )
    def setup(self, n, margin, hard, recheck, backoff, seed) -> None:  # noqa: ANN001
        self.n = n
        self.cfg = (
            snooze.SchedulerConfig(  # audit off: the model is the skip rule alone (audits: tests/core/test_audit.py)
                audit=0.0,
                batch_size=100,
                group_size=G,
                options=snooze.PredictiveOptions(margin=margin, hard_margin=hard, recheck=recheck, backoff=backoff),
                max_gen_rounds=100,
            )
        )
        self.sched = snooze.Scheduler(self._data(), self.cfg, seed=seed)
        self.model = PredictiveModel(n, seed, margin, recheck, backoff, margin if hard is None else hard)

    @rule(k=st.integers(1, 6))
    def propose(self, k: int) -> None:
        cands = self.sched.propose(k)
        want, _ = self.model.draw(k)
        assert [c.row for c in cands] == want
        self.outstanding += cands

    @precondition(lambda self: self.outstanding)
    @rule(data=st.data())
    def report(self, data: st.DataObject) -> None:
        n = len(self.outstanding)
        idx = data.draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True))
        kinds = data.draw(st.lists(st.sampled_from(sorted(KINDS)), min_size=len(idx), max_size=len(idx)))
        cands = [self.outstanding[i] for i in idx]
        rewards = [KINDS[k] for k in kinds]
        self.sched.report(cands, np.array(rewards))
        self.model.report([c.row for c in cands], rewards)
        self.outstanding = [c for i, c in enumerate(self.outstanding) if i not in set(idx)]

    @rule()
    def finish_step(self) -> None:
        self.sched.finish_step()
        self.model.end_step()

    @rule()
    def save_and_load(self) -> None:
        before = D.state_hash(self.sched)
        self.sched.save(self.tmp / "ck")
        self.sched = snooze.Scheduler.load(self.tmp / "ck", self._data())
        assert D.state_hash(self.sched) == before

    @precondition(lambda self: self.outstanding)
    @rule(how=st.sampled_from(["twice", "nan", "out_of_range"]))
    def report_invalid(self, how: str) -> None:
        cands = self.outstanding[:1] * (2 if how == "twice" else 1)
        value = {"twice": 1.0, "nan": np.nan, "out_of_range": 2.0}[how]
        rewards = np.full((len(cands), G), value)
        if how == "twice":
            rewards[:, 0] = 0.0
        assert_report_refused(self.sched, cands, rewards, how)

    @invariant()
    def memory_matches_the_model(self) -> None:
        if not hasattr(self, "sched"):
            return
        cols, policy = self.sched._parts.memory.tables[0].columns, self.sched._parts.policy
        assert cols["code"].tolist() == self.model.code and cols["looked"].tolist() == self.model.looked
        assert cols["streak"].tolist() == self.model.streak
        assert policy.clock == self.model.clock and policy.relaxed[0] == self.model.relaxed
        assert policy.rate[0].tolist() == self.model.rate and policy.codes[0].T.tolist() == self.model.codes
        s = self.sched._parts.streams[0]
        assert (s.epoch, s.cursor) == (self.model.epoch, self.model.cursor)


PredictiveMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestPredictiveMachine = PredictiveMachine.TestCase
