"""``research/spaced_policy.py``: the review schedule tried for issue 40, as a plug-in policy. It passes the
conformance check, and the steps it keeps a prompt away match a plain model of its schedule."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from spaced_policy import Spaced, register

import snooze
from snooze.core.policies import POLICIES


@pytest.fixture(autouse=True)
def spaced() -> Iterator[None]:
    register()
    yield
    POLICIES._classes.pop("spaced")


@pytest.mark.parametrize("hard", [False, True])
def test_it_conforms(hard: bool) -> None:
    options = {"interval": 2, "confirm": 1, "growth": 2.0, "hard": hard}
    config = snooze.SchedulerConfig(batch_size=4, gen_batch_size=6, group_size=4, max_gen_rounds=3, policy="spaced")
    snooze.check_policy(Spaced, config=config.replace(options=options, audit=0.2), steps=12)


def _reference(steps: int, interval: int, confirm: int, growth: float, easy_at: set[int]) -> list[bool]:
    """Whether the one prompt of a pool is drawn at each step: a plain model of the schedule. The prompt is
    too easy at the steps of ``easy_at`` (among those it is drawn at), else it has signal."""
    drawn, run, seen = [], 0, None
    for t in range(steps):
        span = int(interval * growth ** max(run - confirm, 0)) if run >= confirm else 0
        away = seen is not None and t - seen < span
        drawn.append(not away)
        if not away:
            run = run + 1 if t in easy_at else 0
            seen = t
    return drawn


@pytest.mark.parametrize("interval,confirm,growth", [(3, 2, 2.0), (2, 1, 1.0), (4, 3, 1.5)])
def test_the_schedule_matches_a_plain_model(interval: int, confirm: int, growth: float) -> None:
    easy_at = set(range(0, 40)) - {9, 10, 25}  # a few steps with signal: reviews that regress
    cfg = snooze.SchedulerConfig(
        batch_size=1,
        group_size=2,
        max_gen_rounds=1,
        on_short="partial",
        policy="spaced",
        options={"interval": interval, "confirm": confirm, "growth": growth},
        audit=0.0,
    )
    sched = snooze.Scheduler({"d": [{"id": 0}]}, cfg, seed=0)
    drawn = []
    for t in range(40):
        cands = sched.propose()
        drawn.append(bool(cands))
        if cands:
            rewards = np.ones((1, 2)) if t in easy_at else np.array([[0.0, 1.0]])
            sched.report(cands, rewards)
        sched.finish_step()
    assert drawn == _reference(40, interval, confirm, growth, easy_at)
    assert not all(drawn) and any(drawn[20:])  # it was kept away, and came back
