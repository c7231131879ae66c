"""The numpy helpers behind the figures, on hand-made metrics records with worked-out numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snooze.core.errors import DataError
from snooze.logs import read_metrics
from snooze.plots import aggregate_seeds, cumulative_batches, dataset_names, moving_average, series


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_series_sorts_skips_missing_and_nonfinite_and_keeps_last_duplicate() -> None:
    recs = [
        {"step": 3, "x": 30},
        {"step": 1, "x": 10},
        {"step": 2},  # no x
        {"step": 4, "x": math.nan},
        {"step": 5, "x": True},  # a bool is not a metric value
        {"x": 99},  # no step
        {"step": 1, "x": 11},  # resumed run re-logged step 1
    ]
    steps, values = series(recs, "x")
    assert steps.tolist() == [1, 3]
    assert values.tolist() == [11.0, 30.0]


def test_aggregate_seeds_on_common_steps() -> None:
    a = (np.array([1, 2, 3]), np.array([1.0, 2.0, 3.0]))
    b = (np.array([2, 3, 4]), np.array([4.0, 6.0, 8.0]))
    agg = aggregate_seeds([a, b, (np.array([], dtype=np.int64), np.array([]))])
    assert agg.n_seeds == 2  # the empty curve (a seed that never logged the key) is left out
    assert agg.steps.tolist() == [2, 3]
    assert agg.mean.tolist() == [3.0, 4.5]
    assert agg.lo.tolist() == [2.0, 3.0]
    assert agg.hi.tolist() == [4.0, 6.0]


def test_aggregate_seeds_empty_and_disjoint() -> None:
    assert len(aggregate_seeds([])) == 0
    disjoint = aggregate_seeds([(np.array([1]), np.array([1.0])), (np.array([2]), np.array([2.0]))])
    assert len(disjoint) == 0 and disjoint.n_seeds == 2


def test_moving_average_worked_example() -> None:
    # window 3 over 1..5: [1, (1+2)/2, (1+2+3)/3, (2+3+4)/3, (3+4+5)/3]
    assert moving_average(np.array([1.0, 2, 3, 4, 5]), 3).tolist() == [1.0, 1.5, 2.0, 3.0, 4.0]
    assert moving_average(np.array([0.2, 0.4]), 1).tolist() == [0.2, 0.4]
    assert moving_average(np.array([]), 4).size == 0
    with pytest.raises(DataError, match="window"):
        moving_average(np.array([1.0]), 0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), max_size=30), st.integers(1, 10))
def test_moving_average_matches_naive_loop(xs: list[float], window: int) -> None:
    x = np.array(xs)
    naive = [np.mean(x[max(0, i - window + 1) : i + 1]) for i in range(x.size)]
    np.testing.assert_allclose(moving_average(x, window), naive, rtol=1e-9, atol=1e-6)


def test_cumulative_batches_prefers_total_rounds_else_sums_rounds() -> None:
    per_step = [{"step": 1, "gen/rounds": 1}, {"step": 2, "gen/rounds": 3}, {"step": 3, "gen/rounds": 2}]
    steps, cum = cumulative_batches([{"step": 0, "eval/accuracy": 0.4}, *per_step])
    assert steps.tolist() == [1, 2, 3] and cum.tolist() == [1.0, 4.0, 6.0]
    logged = [{**r, "total/rounds": 10 * r["step"]} for r in per_step]
    assert cumulative_batches(logged)[1].tolist() == [10.0, 20.0, 30.0]
    assert cumulative_batches([{"step": 1}])[0].size == 0


def test_dataset_names_from_batch_frac_keys(tmp_path: Path) -> None:
    rec = {
        "step": 1,
        "dataset/add-hard/batch_frac": 0.5,
        "dataset/add-easy/batch_frac": 0.5,
        "dataset/add-easy/gen_groups": 3,
        "dataset/x/y/batch_frac": 0.0,
    }
    path = _write(tmp_path / "metrics.jsonl", [json.dumps(rec)])
    assert dataset_names(read_metrics(path)) == ["add-easy", "add-hard", "x/y"]
