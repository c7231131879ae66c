"""The step loop rebuilt over a replayed stream, by hand."""

from __future__ import annotations

import numpy as np
import pytest

import snooze
from snooze.analysis.stepsim import infer_gen_size, simulate_steps

# rounds of 4: [1,0,1,1] has 3 signal, [0,0,0,0] none, [1,1,0,0] two; the trailing [1] is a partial round.
SIGNAL = np.array([1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1], dtype=bool)


def test_steps_fill_the_batch_and_discard_the_surplus() -> None:
    # batch 2: step 1 = round 1 (3 signal, 1 discarded); step 2 = rounds 2 and 3. Cumulative groups 4, 12.
    assert simulate_steps(SIGNAL, batch_size=2, gen_size=4).tolist() == [4, 12]


def test_round_limit_ends_a_short_step() -> None:
    # max 1 round: step 2 ends short after the empty round; step 3 takes round 3.
    assert simulate_steps(SIGNAL, batch_size=2, gen_size=4, max_gen_rounds=1).tolist() == [4, 8, 12]


def test_log_running_out_mid_step_is_not_a_step() -> None:
    assert simulate_steps(SIGNAL, batch_size=4, gen_size=4).tolist() == [12]  # 3, +0, +2: full after round 3
    assert simulate_steps(SIGNAL[:4], batch_size=4, gen_size=4).tolist() == []


def test_gen_size_is_the_gcd_of_groups_per_step() -> None:
    assert infer_gen_size(np.array([0] * 4 + [1] * 8 + [2] * 12)) == 4


def test_kept_lines_are_reinterleaved_by_dataset_share() -> None:
    from snooze.analysis.stepsim import interleave_kept

    dataset = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    # equal shares: alternate, each dataset in its own log order
    assert interleave_kept(dataset, np.ones(8, dtype=bool)).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    # dataset 0 loses lines 1 and 2 to skips: its kept lines take the next slots, dataset 1 keeps its pace
    kept = np.array([1, 0, 0, 1, 1, 1, 1, 1], dtype=bool)
    assert interleave_kept(dataset, kept).tolist() == [0, 4, 3, 5, 6, 7]


def test_sizes_below_1_are_refused_so_every_walk_ends() -> None:
    signal = np.ones(8, dtype=bool)
    for kwargs in (
        {"batch_size": 0, "gen_size": 2},
        {"batch_size": 2, "gen_size": 0},
        {"batch_size": 2, "gen_size": 2, "max_gen_rounds": 0},
    ):
        with pytest.raises(snooze.ConfigError, match="must be an integer >= 1"):
            simulate_steps(signal, **kwargs)
