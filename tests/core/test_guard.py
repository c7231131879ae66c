"""The skipping alarm and the guard that acts on it (snooze.core._diagnosis, ._audit; issue 49, docs/concepts.md
"The guard").

The case the issue names: every prompt at pass rate 0.8, so a skipped prompt carries as much signal as a drawn one,
``snooze.RECOMMENDED`` with the default audit share. The alarm must fire there within a stated number of steps (docs:
by step 36 on 300 prompts, 104 on 1,000, at the 30th return), and from the next step the guard rolls out every
encounter the policy skips."""

from __future__ import annotations

import copy
import logging

import numpy as np
import pytest

import snooze
from snooze.core._diagnosis import MIN_RETURNS, RELAPSE_RATE

FIRES_BY = 40
"""Steps within which the pass-rate-0.8 case on 300 prompts must fire the alarm (docs/concepts.md "The guard")."""


def _pool(n: int) -> dict:
    return {"d": [{"id": i} for i in range(n)]}


def _roller(p: float, seed: int):  # noqa: ANN202
    rng = np.random.default_rng(seed)
    return lambda c: (rng.random((len(c), 8)) < p).astype(float)


def _steps(sched: snooze.Scheduler, roll, n: int) -> list[dict]:  # noqa: ANN001
    return [dict(sched.step(roll).metrics) for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_pass_rate_08_case_fires_the_alarm_and_the_guard_rolls_out_every_skip(
    seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Before the alarm the policy skips and the audit rolls out a share of the skips; the alarm
    fires by step :data:`FIRES_BY` on the relapse rate (returns not too easy again: 0.8^8 = 0.17 of groups are all
    correct, so most returns relapse); one INFO line, no WARNING; from the next step every skipped encounter is rolled
    out (audited: ``snooze/audit/groups`` equals ``snooze/skipped`` and nothing is given up)."""
    sched = snooze.Scheduler(_pool(300), snooze.SchedulerConfig(**snooze.RECOMMENDED), seed=seed)
    with caplog.at_level(logging.INFO, logger="snooze"):
        ms = _steps(sched, _roller(0.8, seed + 1), FIRES_BY + 10)
    alarm = [m["snooze/audit/alarm"] for m in ms]
    fired = alarm.index(1)
    assert 5 < fired < FIRES_BY and set(alarm[fired:]) == {1}
    at = ms[fired]
    assert at["snooze/guard/returns"] >= MIN_RETURNS and at["snooze/guard/relapse_rate"] >= RELAPSE_RATE
    lines = [r for r in caplog.records if "skipping is giving up signal" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO and "guard" in lines[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    on = [m["snooze/guard/on"] for m in ms]
    assert set(on[: fired + 1]) == {0} and set(on[fired + 1 :]) == {1}  # acts from the step after the alarm
    before, after = ms[:fired], ms[fired + 1 :]
    assert sum(m["snooze/skipped"] for m in before) > sum(m["snooze/audit/groups"] for m in before) > 0
    assert sum(m["snooze/skipped"] for m in after) > 0  # the policy still decides ...
    for m in after:  # ... and every encounter it skips is rolled out
        assert m["snooze/audit/groups"] == m["snooze/skipped"] and m["snooze/audit/given_up"] == 0


def test_with_the_guard_off_the_alarm_fires_and_skipping_goes_on() -> None:
    """``guard=False``: the same run, the same alarm step, but the audit keeps its share: skips are left out."""
    cfg = snooze.SchedulerConfig(**snooze.RECOMMENDED)
    on = _steps(snooze.Scheduler(_pool(300), cfg, seed=0), _roller(0.8, 1), FIRES_BY + 10)
    off = _steps(snooze.Scheduler(_pool(300), cfg.replace(guard=False), seed=0), _roller(0.8, 1), FIRES_BY + 10)
    fired = [m["snooze/audit/alarm"] for m in on].index(1)
    assert [m["snooze/audit/alarm"] for m in off].index(1) == fired
    assert on[: fired + 1] == off[: fired + 1]  # the guard changes nothing before it acts
    assert {m["snooze/guard/on"] for m in off} == {0}
    late = off[fired + 1 :]
    assert sum(m["snooze/skipped"] for m in late) > sum(m["snooze/audit/groups"] for m in late)  # skips left out


def test_the_guard_is_saved_with_the_state_and_a_resume_is_exact() -> None:
    """A run stopped after the alarm and resumed from its state is guarded at once, and steps as the run that went
    on: the alarm's flag is the guard's state (``metrics.diagnosis.warned.skipping``)."""
    cfg = snooze.SchedulerConfig(**snooze.RECOMMENDED)
    sched = snooze.Scheduler(_pool(300), cfg, seed=0)
    roll = _roller(0.8, 1)
    _steps(sched, roll, FIRES_BY)
    assert sched.metrics()["snooze/audit/alarm"] == 1
    state = copy.deepcopy(sched.state_dict())
    again = snooze.Scheduler(_pool(300), cfg, seed=0)
    again.load_state_dict(state)
    rng_state = np.random.default_rng(7)
    rows = rng_state.random((64, 8))
    a = again.step(lambda c: (rows[: len(c)] < 0.8).astype(float)).metrics
    b = sched.step(lambda c: (rows[: len(c)] < 0.8).astype(float)).metrics
    assert a["snooze/guard/on"] == b["snooze/guard/on"] == 1 and a == b


def test_a_state_from_before_the_guard_loads_with_the_alarm_unfired() -> None:
    """A state written before the skipping alarm (its old ``audit`` alarm flag, no returns counted) loads: the new
    evidence starts at zero, the alarm unfired, the guard off until it fires."""
    cfg = snooze.SchedulerConfig(**snooze.RECOMMENDED)
    sched = snooze.Scheduler(_pool(300), cfg, seed=0)
    _steps(sched, _roller(0.8, 1), 5)
    state = copy.deepcopy(sched.state_dict())
    diag = state["meta"]["metrics"]["diagnosis"]
    diag["warned"] = {"audit": True, "exhausted": False, "unsolved": False}  # as an older version wrote it
    for part in ("totals", "step"):
        for k in ("returns", "relapses", "skipped_drawn"):
            del diag[part][k]
    again = snooze.Scheduler(_pool(300), cfg, seed=0)
    again.load_state_dict(state)
    m = again.step(_roller(0.8, 2)).metrics
    assert m["snooze/audit/alarm"] == 0 and m["snooze/guard/on"] == 0 and m["snooze/guard/returns"] >= 0


@pytest.mark.parametrize("policy", ["dynamic_sampling", "grpo"])
def test_a_policy_that_skips_nothing_never_alarms(policy: str) -> None:
    ms = _steps(snooze.Scheduler(_pool(300), snooze.SchedulerConfig(policy=policy), seed=0), _roller(0.8, 1), 60)
    assert {m["snooze/audit/alarm"] for m in ms} == {0} and {m["snooze/guard/returns"] for m in ms} == {0}
    assert {m["snooze/guard/given_up_share"] for m in ms} == {0.0}


def test_without_the_audit_only_the_relapse_half_can_fire() -> None:
    """``audit=0``: nothing measures the skipped encounters, so the given-up share stays 0; the relapse rate still
    reads the returns and fires."""
    cfg = snooze.SchedulerConfig(**snooze.RECOMMENDED, audit=0.0)
    ms = _steps(snooze.Scheduler(_pool(300), cfg, seed=0), _roller(0.8, 1), FIRES_BY + 10)
    assert {m["snooze/guard/given_up_share"] for m in ms} == {0.0}
    assert 1 in [m["snooze/audit/alarm"] for m in ms] and ms[-1]["snooze/guard/on"] == 1


def test_a_guarded_walk_never_leaps_over_sleeping_prompts() -> None:
    """Every prompt mastered and asleep: an unguarded walk leaps over them (nothing to roll out); a guarded one rolls
    each skipped encounter out as an audit, so the step generates its rounds from sleeping prompts."""
    cfg = snooze.SchedulerConfig(policy="snooze", options={"factor": 50}, batch_size=4, group_size=8, max_gen_rounds=2)
    sched = snooze.Scheduler(_pool(40), cfg, seed=0)
    ones = lambda c: np.ones((len(c), 8))  # noqa: E731
    _steps(sched, ones, 5)  # every prompt drawn, all-correct: at the next step all are asleep
    state = copy.deepcopy(sched.state_dict())
    state["meta"]["metrics"]["diagnosis"]["warned"]["skipping"] = True
    guarded = snooze.Scheduler(_pool(40), cfg, seed=0)
    guarded.load_state_dict(state)
    plain = sched.step(ones).metrics
    m = guarded.step(ones).metrics
    assert plain["snooze/guard/on"] == 0 and m["snooze/guard/on"] == 1
    assert plain["snooze/skipped"] > 40 * 40 and plain["snooze/audit/groups"] == 0  # leapt over every sleeper
    assert m["gen/groups"] == m["snooze/audit/groups"] == m["snooze/skipped"] == 2 * cfg.gen_size


@pytest.mark.parametrize("bad", ["yes", 1, None, 0.0])
def test_a_bad_guard_is_refused(bad: object) -> None:
    with pytest.raises(snooze.ConfigError, match="guard"):
        snooze.SchedulerConfig(policy="snooze", guard=bad)


def test_a_state_written_before_the_guard_field_existed_loads_with_its_default() -> None:
    """A saved config without ``guard`` (or ``screen_size``, the other field added since states were first written)
    was written before the field existed: it loads, the field at its default; any other missing field is corrupt."""
    cfg = snooze.SchedulerConfig(**snooze.RECOMMENDED)
    sched = snooze.Scheduler(_pool(50), cfg, seed=0)
    _steps(sched, _roller(0.8, 1), 3)
    state = copy.deepcopy(sched.state_dict())
    for field in ("guard", "screen_size"):
        del state["meta"]["config"][field]
    again = snooze.Scheduler(_pool(50), cfg, seed=0)
    again.load_state_dict(state)
    assert again.step(_roller(0.8, 2)).metrics["gen/groups"] > 0
    del state["meta"]["config"]["epochs"]
    with pytest.raises(snooze.StateError, match=r"config lacks field\(s\) \['epochs'\]"):
        snooze.Scheduler(_pool(50), cfg, seed=0).load_state_dict(state)
