"""Carried groups at the end of the data (issue 49 build 6): with finite ``epochs`` and ``carry_surplus``, the
step that uses the data up carries its surplus into the next one; ``exhausted`` is then True, ``finished`` not,
and the loop ``while not sched.finished: sched.step(...)`` trains those groups in one last step."""

from __future__ import annotations

import numpy as np
import pytest
from helpers_core import id_pool

import snooze

G = 4


def _signal(cands) -> np.ndarray:  # noqa: ANN001 - every group carries signal
    return np.tile([1.0, 0.0, 1.0, 0.0], (len(cands), 1))


def _carrying(n: int = 18, **kw: object) -> snooze.Scheduler:
    cfg = snooze.SchedulerConfig(
        batch_size=4, gen_batch_size=6, group_size=G, epochs=1, carry_surplus=True, audit=0.0, **kw
    )
    return snooze.Scheduler(id_pool(n), cfg, seed=0)


def test_the_last_step_trains_the_groups_carried_when_the_data_ran_out() -> None:
    sched = _carrying()
    batches, exhausted_at = [], None
    while not sched.finished:
        batches.append(sched.step(_signal))
        if sched.exhausted and exhausted_at is None:
            exhausted_at = len(batches)
    m = [b.metrics for b in batches]
    assert exhausted_at is not None and exhausted_at < len(batches)  # exhausted, and a step still came after it
    assert m[exhausted_at - 1]["surplus/carried_out"] > 0  # the step that used the data up carried groups out ...
    assert m[-1]["surplus/carried_in"] == m[exhausted_at - 1]["surplus/carried_out"]  # ... and the last trained them
    assert m[-1]["gen/groups"] == 0 and m[-1]["surplus/carried_out"] == 0
    trained = [c.id for b in batches for c in b.candidates]
    assert sorted(trained) == list(range(18))  # every prompt's group trained once: none left behind
    assert sum(x["surplus/carried_out"] for x in m) == sum(x["surplus/carried_in"] for x in m)
    assert sched.exhausted and sched.finished


def test_without_carried_groups_finished_is_exhausted() -> None:
    cfg = snooze.SchedulerConfig(batch_size=4, group_size=G, epochs=1, audit=0.0)
    sched = snooze.Scheduler(id_pool(10), cfg, seed=0)
    while not sched.exhausted:
        assert not sched.finished
        sched.step(_signal)
    assert sched.finished


def test_a_candidate_out_is_not_finished() -> None:
    sched = _carrying(n=6)
    cands = sched.propose()  # every prompt drawn: exhausted, but their groups are still out
    assert sched.exhausted and not sched.finished
    sched.report(cands, _signal(cands))
    assert not sched.finished  # in the batch being built
    sched.finish_step()
    assert not sched.finished  # the 2 beyond the batch were carried
    last = sched.step(_signal)
    assert len(last.candidates) == 2 and sched.finished


def test_on_short_raise_refuses_a_short_last_step_and_changes_nothing() -> None:
    """``on_short="raise"`` refuses a short batch at the data's end as anywhere else; the carried groups stay."""
    sched = _carrying(n=6, on_short="raise")
    sched.step(_signal)  # 6 drawn: 4 trained, 2 carried, the data used up
    before = sched.state_dict()["meta"]
    with pytest.raises(snooze.BatchShortError, match="data exhausted"):
        sched.step(_signal)
    assert sched.state_dict()["meta"] == before and not sched.finished
