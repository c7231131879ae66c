"""Changing the mix mid-run (a curriculum stage, ``set_weights``, ``set_excluded``) takes effect at once."""

from __future__ import annotations

import numpy as np
import pytest

import snooze


def _sched(weights: dict[str, float]) -> snooze.Scheduler:
    data = {name: [{"id": i} for i in range(500)] for name in ("a", "b")}
    return snooze.Scheduler(
        data, snooze.SchedulerConfig(batch_size=8, group_size=2, policy="grpo", weights=weights), seed=1
    )


def _issued(sched: snooze.Scheduler, n: int) -> np.ndarray:
    """Candidates issued per dataset over ``n`` rounds of 10 (``grpo``: every encounter is issued)."""
    counts = np.zeros(2, dtype=int)
    for _ in range(n):
        cands = sched.propose(10)
        counts += np.bincount(cands.ds, minlength=2)
        sched.report(cands, np.zeros((len(cands), 2)))
        sched.finish_step()
    return counts


def test_new_weights_hold_from_the_first_round_after_the_change():
    sched = _sched({"a": 0.9, "b": 0.1})
    assert _issued(sched, 20).tolist() == [180, 20]
    sched.set_weights({"a": 0.5, "b": 0.5})
    # The first round already follows the new weights: b does not take every draw to catch up.
    assert _issued(sched, 1).tolist() == [5, 5]
    assert _issued(sched, 9).tolist() == [45, 45]


def test_setting_the_same_weights_again_changes_nothing():
    one, two = _sched({"a": 0.7, "b": 0.3}), _sched({"a": 0.7, "b": 0.3})
    _issued(one, 3), _issued(two, 3)
    two.set_weights({"a": 0.7, "b": 0.3})  # e.g. a curriculum re-applied after a resume
    for _ in range(5):
        assert one.propose(7).row.tolist() == two.propose(7).row.tolist()
        assert one.drawn.tolist() == two.drawn.tolist()


@pytest.mark.parametrize("mix", ["stream", "quota"])
def test_a_dataset_let_back_in_rejoins_at_its_weight(mix):
    sched = snooze.Scheduler(
        {n: [{"id": i} for i in range(500)] for n in ("a", "b")},
        snooze.SchedulerConfig(batch_size=10, group_size=2, policy="grpo", mix=mix),
        seed=1,
    )
    sched.set_excluded("b", list(range(500)))  # b is out of the mix entirely
    assert _issued(sched, 10).tolist() == [100, 0]
    sched.set_excluded("b", list(range(500)), excluded=False)
    assert _issued(sched, 1).tolist() == [5, 5]
