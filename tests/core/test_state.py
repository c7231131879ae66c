"""The state envelope (format 1): old states load and continue exactly; what is written is format 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fixtures.state_v1 import make

import snooze
from snooze.core.checkpoint import load_state

FIXTURES = Path(make.__file__).resolve().parent
OLD_ONLY = ("step", "round", "last_metrics")  # in states of earlier releases: read (checked) or ignored, not written


def _same_state(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal meta (the old state's flat config as it migrates; the run id only if the old state has
    one: 0.1.0's have none; less the header copies and last step's metrics old states hold, no longer
    written) and equal arrays, dtype included."""
    g, w = dict(got["meta"]), {k: v for k, v in want["meta"].items() if k not in OLD_ONLY}
    assert not set(g) & set(OLD_ONLY)
    if "run_id" not in w:
        g.pop("run_id")
    w["config"] = snooze.SchedulerConfig.from_dict(w["config"]).to_dict()  # an old flat config, migrated once
    if "diagnosis" not in w["metrics"]:  # the audit's counts, added after these states were written
        g["metrics"] = {k: v for k, v in g["metrics"].items() if k != "diagnosis"}
    if not any(k.startswith("async/") for k in w["metrics"]["scalars"]):  # delayed feedback's counts, added since
        scalars = {k: v for k, v in g["metrics"]["scalars"].items() if not k.startswith("async/")}
        g["metrics"] = {**g["metrics"], "scalars": scalars}
    assert g == w
    arrays = dict(got["arrays"])
    if "pending_step" not in want["arrays"]:  # added since: every candidate of such a state was drawn at its step
        steps = want["meta"]["metrics"]["totals"]["steps"]
        assert arrays.pop("pending_step").tolist() == [steps] * len(want["arrays"]["pending"])
    got = {**got, "arrays": arrays}
    assert sorted(got["arrays"]) == sorted(want["arrays"])
    for k, a in want["arrays"].items():
        b = got["arrays"][k]
        assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(b, a), k


@pytest.mark.parametrize("name", sorted(make.SCENARIOS))
def test_a_state_saved_before_the_redesign_loads_and_continues_exactly(name: str) -> None:
    """The checkpoints under tests/fixtures/state_v1 were written by the code before the core redesign
    (ca7b707), mid-step with candidates of two rounds out for rollout; the expected continuation is what
    that code did after loading them (make.py)."""
    expected = json.loads((FIXTURES / f"{name}.expected.json").read_text())
    saved = load_state(FIXTURES / name)
    sched = snooze.Scheduler.load(FIXTURES / name, make.datasets())
    _same_state(sched.state_dict(), saved)  # loaded, then written again: the same format-1 state
    trace = json.loads(json.dumps(make.drive(sched, make.SCENARIOS[name]["steps_after"])))
    assert len(trace) == len(expected["trace"])
    for i, (got, want) in enumerate(zip(trace, expected["trace"])):
        if (
            isinstance(want, dict) and "metrics" in want
        ):  # metrics added since (snooze/audit/*, gen/exhausted) are extra keys
            got = {**got, "metrics": {k: v for k, v in got["metrics"].items() if k in want["metrics"]}}
        assert got == want, f"{name}: entry {i} of the continuation differs"
    _same_state(sched.state_dict(), load_state(FIXTURES / f"{name}.after"))


def _trained(**cfg: Any) -> snooze.Scheduler:
    sched = snooze.Scheduler(make.datasets(), snooze.SchedulerConfig(batch_size=3, group_size=4, **cfg), seed=1)
    for _ in range(3):
        sched.step(lambda c: make.rewards(c, 4))
    sched.propose()
    return sched


def test_an_old_states_step_and_round_copies_are_checked_against_the_counts_and_no_longer_written() -> None:
    sched = _trained()
    state = sched.state_dict()
    meta = state["meta"]
    assert not {"step", "round", "last_metrics"} & set(meta)
    assert (meta["metrics"]["totals"]["steps"], meta["metrics"]["scalars"]["gen/rounds"]) == (3, 1)
    old = {**meta, "step": 3, "round": 1, "last_metrics": {"step": 2, "efficiency": 0.5}}  # as earlier releases wrote
    fresh = snooze.Scheduler(make.datasets(), sched.config, seed=1)
    fresh.load_state_dict({"meta": old, "arrays": state["arrays"]})
    assert fresh.step_index == 3 and fresh.round == 1 and fresh.state_dict()["meta"] == meta
    for key, value in (("round", 2), ("step", 4)):
        fresh = snooze.Scheduler(make.datasets(), sched.config, seed=1)
        with pytest.raises(snooze.StateError, match="disagree with the metrics' counts"):
            fresh.load_state_dict({"meta": {**old, key: value}, "arrays": state["arrays"]})
        assert fresh.step_index == 0


def test_a_saved_state_file_is_named_by_its_finished_steps(tmp_path: Path) -> None:
    path = _trained().save(tmp_path / "ck")
    assert path.name.startswith("state-00000003-")


def test_after_a_load_metrics_are_the_totals_until_a_step_finishes() -> None:
    sched = _trained()
    resumed = snooze.Scheduler(make.datasets(), sched.config, seed=1)
    resumed.load_state_dict(sched.state_dict())
    totals = {k: v for k, v in sched.metrics().items() if k.startswith("total/")}
    assert resumed.metrics() == totals and totals["total/steps"] == 3
    assert resumed.step(lambda c: make.rewards(c, 4)).metrics == sched.step(lambda c: make.rewards(c, 4)).metrics


def test_policy_state_is_written_only_by_a_policy_that_keeps_some() -> None:
    from snooze.core.policies import POLICIES, Policy, register_policy

    @register_policy("test_counting")
    class Counting(Policy):
        def __init__(self, config: snooze.SchedulerConfig) -> None:
            super().__init__(config)
            self.reports = 0

        def report(self, memory: Any, report: Any) -> None:
            self.reports += 1

        def state_dict(self) -> dict[str, Any]:
            return {"reports": self.reports}

        def load_state_dict(self, state: Any) -> None:
            self.reports = int(state["reports"])

    try:
        assert "policy" not in _trained().state_dict()["meta"]  # the built-in policies keep none: format 1 as before
        sched = _trained(policy="test_counting")
        state = sched.state_dict()
        assert (
            state["meta"]["policy"] == {"reports": sched.policy.reports} and sched.policy.reports >= 3
        )  # a report a round
        again = snooze.Scheduler(make.datasets(), sched.config, seed=1)
        again.load_state_dict(state)
        assert again.policy.reports == sched.policy.reports
        builtin = snooze.Scheduler(make.datasets(), sched.config.replace(policy="snooze"), seed=1)
        with pytest.raises(
            snooze.StateMismatchError, match="'test_counting' keeps run-level state that only it can read"
        ):
            builtin.load_state_dict(state)
        same = {**state, "meta": {**state["meta"], "config": builtin.config.to_dict()}}  # a snooze state holding one
        with pytest.raises(snooze.StateError, match="keeps no state of its own"):
            builtin.load_state_dict(same)
    finally:
        POLICIES._classes.pop("test_counting")
