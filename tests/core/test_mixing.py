"""The mix: largest-remainder shares and interleaving worked out by hand; weights, encounter counts, quotas."""

from __future__ import annotations

import numpy as np
import pytest

import snooze
from snooze.core._mixing import Mix, interleave, largest_remainder


@pytest.mark.parametrize(
    ("total", "weights", "shares"),
    [
        (5, [1, 1], [3, 2]),  # 2.5, 2.5: the tie goes to the first listed
        (10, [1, 2, 3], [2, 3, 5]),  # 1.67, 3.33, 5: floors 1, 3, 5 and the one left to the largest remainder
        (3, [1, 1, 1], [1, 1, 1]),  # exact thirds are not rounded down by float luck
        (4, [0, 1], [0, 4]),
        (0, [1, 1], [0, 0]),
        (3, [0, 0], [0, 0]),
    ],
)
def test_largest_remainder_by_hand(total: int, weights: list[float], shares: list[int]) -> None:
    assert largest_remainder(total, np.array(weights, dtype=float)).tolist() == shares


def test_interleave_spreads_each_datasets_slots_evenly() -> None:
    assert interleave(np.array([2, 1])).tolist() == [0, 1, 0]  # slots at 1/4, 3/4 (dataset 0) and 1/2 (dataset 1)
    assert interleave(np.array([1, 3])).tolist() == [1, 0, 1, 1]


def test_weights_and_the_encounter_counts_start_over_only_on_a_change() -> None:
    mix = Mix(["a", "b"], {"a": 3.0})
    assert mix.weights.tolist() == [3.0, 0.0]  # unlisted: 0
    mix.drawn += [4, 2]
    mix.set_weights({"a": 3.0})
    assert mix.drawn.tolist() == [4, 2]
    mix.set_weights(None)
    assert mix.weights.tolist() == [1.0, 1.0] and mix.drawn.tolist() == [0, 0]
    with pytest.raises(snooze.ConfigError, match="unknown dataset"):
        mix.set_weights({"c": 1.0})
    with pytest.raises(snooze.ConfigError, match="at least one dataset"):
        mix.set_weights({"a": 0.0})
    assert mix.weights.tolist() == [1.0, 1.0]


def test_quotas_hold_the_weights_and_give_a_stopped_datasets_slots_away() -> None:
    mix = Mix(["a", "b", "c"], {"a": 1, "b": 1, "c": 2})
    all_on = np.array([True, True, True])
    assert mix.quotas(all_on, np.zeros(3, dtype=np.int64), 10).tolist() == [3, 2, 5]  # 2.5, 2.5, 5
    b_done = np.array([True, False, True])  # b can give no more: it keeps its 1, a and c share the other 9
    assert mix.quotas(b_done, np.array([0, 1, 0]), 10).tolist() == [3, 1, 6]


def test_state_round_trip_keeps_or_replaces_the_weights() -> None:
    mix = Mix(["a", "b"])
    mix.set_weights({"a": 1.0, "b": 3.0})
    mix.drawn += [5, 7]
    other = Mix(["a", "b"])
    other.load_state_dict(mix.state_dict())
    assert other.state_dict() == {"weights": [1.0, 3.0], "drawn": [5, 7]}
    other.load_state_dict({"weights": None, "drawn": [1, 1]})  # saved under other configured weights: keep ours
    assert other.weights.tolist() == [1.0, 3.0]
    for bad in (
        {"weights": None, "drawn": [1]},
        {"weights": [1.0, -1.0], "drawn": [0, 0]},
        {"weights": None, "drawn": [-1, 0]},
    ):
        with pytest.raises(snooze.StateError):
            other.load_state_dict(bad)
        assert other.state_dict() == {"weights": [1.0, 3.0], "drawn": [1, 1]}
