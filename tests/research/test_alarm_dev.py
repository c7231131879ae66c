"""``research/alarm_dev.py``'s arithmetic: returns and relapses counted from a reward log, cells labelled by the
arm's mean gap (not by run), the alarm's first step and the threshold fitted to the healthy runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from alarm_dev import (
    _RETURN_KEYS,
    CANDIDATES,
    HARMFUL,
    HEALTHY,
    Run,
    auc,
    best_threshold,
    cells,
    cells_markdown,
    either,
    evaluate,
    fire_step,
    fit_either,
    read_run,
    read_runs,
    relapse_rate,
    rho_z,
)


def _write_run(folder: Path, steps: int, logged: int, groups: list[tuple[int, int, list[float]]], late: float) -> None:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"train": {"steps": steps}}))
    lines = []
    for t in range(logged):
        line = {"step": t, "gen/groups": 4, "snooze/drawn/groups": 4, "snooze/drawn/signal_rate": 0.5}
        if t % 2 == 0 or t == logged - 1:
            line["eval/sampled_accuracy"] = late
        lines.append(line)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    header = {"format": "snooze-reward-log", "version": 1, "group_size": 4}
    rows = [header] + [{"step": t, "dataset": "d", "id": i, "rewards": r} for t, i, r in groups]
    (folder / "rewards.jsonl").write_text("".join(json.dumps(x) + "\n" for x in rows))


def test_returns_relapses_and_their_gaps_come_from_the_reward_log(tmp_path: Path) -> None:
    """Prompt 0: all-correct at step 0, back at step 3 with signal (a return and a relapse, 3 steps away), then
    all-correct at 5 (after a group with signal: a repeat that came out all-correct), all-correct again at 9 (a
    return that held, 4 steps away). Prompt 1: all-wrong twice (neither a return nor a repeat)."""
    ones, mixed, zeros = [1.0] * 4, [1.0, 0.0, 1.0, 1.0], [0.0] * 4
    groups = [(0, 0, ones), (0, 1, zeros), (3, 0, mixed), (4, 1, zeros), (5, 0, ones), (9, 0, ones)]
    _write_run(tmp_path / "r" / "arm" / "seed100", 10, 10, groups, 0.5)
    run = read_run(tmp_path / "r" / "arm" / "seed100", "r", "arm", 100)
    assert run is not None and run.steps == 10
    s = run.s
    assert s["ret"].tolist() == [0, 0, 0, 1, 0, 0, 0, 0, 0, 1]
    assert s["rel"].sum() == 1 and s["rel"][3] == 1 and s["ret_sig"][3] == 1
    assert s["ret_fail"][3] == pytest.approx(0.25) and s["ret_gap"][3] == 3 and s["ret_gap"][9] == 4
    assert s["rep"][5] == 1 and s["rep_ac"][5] == 1 and s["rep"].sum() == 1
    assert s["ret_gap2"][9] == 16 and s["ret_gap_rel"][3] == 3 and s["ret_gap_rel"][9] == 0


def test_an_unfinished_run_is_left_out(tmp_path: Path) -> None:
    _write_run(tmp_path / "r" / "arm" / "seed100", 10, 7, [], 0.5)
    assert read_run(tmp_path / "r" / "arm" / "seed100", "r", "arm", 100) is None
    assert read_runs(tmp_path) == []


def _run(regime: str, arm: str, seed: int, late: float) -> Run:
    return Run(regime, arm, seed, late, 10, {})


def test_cells_are_labelled_by_the_arms_mean_gap_over_paired_seeds() -> None:
    """Gaps in points against DAPO's run of the same seed; a seed DAPO lacks is not paired. The labels' edges are
    the issue's: -0.5 is healthy, -1.5 harmful, between is left out."""
    runs = [_run("r", "dynamic_sampling", s, 0.50) for s in (100, 101)]
    runs += [_run("r", "a", 100, 0.50), _run("r", "a", 101, 0.49), _run("r", "a", 102, 0.0)]  # 102: no DAPO run
    runs += [_run("r", "b", 100, 0.48), _run("r", "b", 101, 0.49)]  # -2 and -1: mean -1.5
    runs += [_run("r", "c", 100, 0.49), _run("r", "c", 101, 0.49)]  # -1
    table = cells(runs)
    assert table[("r", "a")]["gaps"] == pytest.approx({100: 0.0, 101: -1.0})
    assert table[("r", "a")]["gap"] == pytest.approx(-0.5) and table[("r", "a")]["label"] == "healthy"
    assert table[("r", "b")]["gap"] == pytest.approx(-1.5) and table[("r", "b")]["label"] == "harmful"
    assert table[("r", "c")]["label"] == "between" and HEALTHY == -0.5 and HARMFUL == -1.5
    assert ("r", "dynamic_sampling") not in table


def test_the_alarm_fires_at_the_first_step_at_its_threshold() -> None:
    score = np.array([np.nan, 0.2, 0.9, 0.4, 1.2])
    assert fire_step(score, 0.9) == 2 and fire_step(score, 1.0) == 4 and fire_step(score, 1.3) is None


def test_the_fitted_threshold_allows_one_false_alarm_in_twenty() -> None:
    """Below 20 healthy runs none may alarm (the threshold lies just above the highest healthy peak); at 20, one."""
    healthy = [(_run("r", "a", s, 0.5), np.array([0.0, float(s)])) for s in range(19)]
    harmful = [(_run("r", "b", 0, 0.4), np.array([0.0, 18.5])), (_run("r", "b", 1, 0.4), np.array([30.0, 0.0]))]
    thr = best_threshold({"healthy": healthy, "harmful": harmful})
    assert 18.0 < thr < 18.5
    m = evaluate({"healthy": healthy, "harmful": harmful}, thr)
    assert (m["false_alarms"], m["detected"]) == (0, 2)
    assert m["median_share"] == pytest.approx(np.median([2 / 10, 1 / 10]))
    healthy.append((_run("r", "a", 19, 0.5), np.array([0.0, 19.0])))
    thr = best_threshold({"healthy": healthy, "harmful": harmful})
    assert 18.0 < thr < 18.5 and evaluate({"healthy": healthy, "harmful": harmful}, thr)["false_alarms"] == 1


def test_the_ratio_test_is_zero_at_its_null_and_grows_with_the_evidence() -> None:
    """Audit groups with signal exactly at r0 x the drawn rate: z = 0; at the drawn rate with r0 = 0.5, z grows as
    the square root of the groups."""
    steps = 100
    s = {"A": np.full(steps, 2.0), "D": np.full(steps, 20.0), "Ds": np.full(steps, 10.0)}  # drawn rate 0.5
    s["As"] = s["A"] * 0.25
    assert np.allclose(rho_z(0.5)(s), 0.0)
    s["As"] = s["A"] * 0.5
    z = rho_z(0.5)(s)
    p = 0.25
    assert z[-1] == pytest.approx((200 * 0.5 - 200 * p) / math.sqrt(200 * p * (1 - p)))
    assert z[-1] / z[24] == pytest.approx(2.0)


def test_the_relapse_rate_waits_for_its_returns() -> None:
    s = {"ret": np.array([10.0, 10.0, 10.0, 10.0]), "rel": np.array([5.0, 1.0, 0.0, 2.0])}
    x = relapse_rate(min_returns=30)(s)
    assert np.isnan(x[:2]).all() and x[2] == pytest.approx(6 / 30) and x[3] == pytest.approx(8 / 40)


def test_either_of_two_fires_at_the_first_of_them() -> None:
    a = lambda s: s["a"]  # noqa: E731
    b = lambda s: s["b"]  # noqa: E731
    s = {"a": np.array([0.0, 0.1, 0.9, 0.0]), "b": np.array([np.nan, 0.2, 0.3, 0.4])}
    score = either(a, 0.5, b)(s)
    assert np.isnan(score[0]) and score[1] == 0.2 and np.isinf(score[2:]).all()
    assert fire_step(score, 0.35) == 2 and fire_step(either(a, 1.0, b)(s), 0.35) == 3


def test_the_pair_is_fitted_to_spare_the_healthy_runs_and_catch_the_most() -> None:
    """Healthy runs peak at 0.2 on a and 0.3 on b; one harmful run only a catches (0.5), one only b (0.6), one
    neither: both are caught with no false alarm, at thresholds just above the healthy peaks."""
    a = lambda s: s["a"]  # noqa: E731
    b = lambda s: s["b"]  # noqa: E731

    def run(seed: int, pa: float, pb: float) -> Run:
        return Run("r", "x", seed, 0.5, 2, {"a": np.array([0.0, pa]), "b": np.array([0.0, pb])})

    runs = {
        "healthy": [run(0, 0.2, 0.1), run(1, 0.1, 0.3)],
        "harmful": [run(2, 0.5, 0.0), run(3, 0.0, 0.6), run(4, 0.1, 0.1)],
    }
    t_a, t_b = fit_either(a, b, runs, 0.05)
    assert 0.2 < t_a < 0.21 and 0.3 < t_b < 0.31
    fn = either(a, t_a, b)
    m = evaluate({k: [(r, fn(r.s)) for r in v] for k, v in runs.items()}, t_b)
    assert (m["false_alarms"], m["detected"], m["harmful"]) == (0, 2, 3)


def test_the_cells_table_shows_each_arms_gap_seeds_and_label() -> None:
    runs = [_run("r", "dynamic_sampling", s, 0.50) for s in (100, 101)]
    runs += [_run("r", "snooze-f1-carry", s, 0.50) for s in (100, 101)] + [_run("r", "filter", 100, 0.40)]
    text = cells_markdown(cells(runs), runs)
    assert "| r | 0.500 (2) | +0.0 (2) healthy | -10.0 (1) **harmful** |" in text
    assert text.splitlines()[0] == "| regime | DAPO late avg@k (seeds) | snooze-f1-carry | filter |"


def test_every_candidate_reads_only_the_evidence_up_to_its_step() -> None:
    """An alarm runs during the run: each candidate's score at step t is the same whatever the steps after t hold."""
    rng = np.random.default_rng(0)
    steps, keys = 120, ("A", "As", "Ap", "D", "Ds", "Dp", "S", *_RETURN_KEYS)
    s = {k: rng.integers(0, 30, steps).astype(float) for k in keys}
    s["As"], s["Ds"] = np.minimum(s["As"], s["A"]), np.minimum(s["Ds"], s["D"])
    s["Ap"], s["Dp"] = np.minimum(s["Ap"], s["A"]), np.minimum(s["Dp"], s["D"])
    later = {k: np.concatenate([v[:60], rng.permutation(v[60:])]) for k, v in s.items()}
    for name, fn in CANDIDATES.items():
        a, b = fn(s)[:60], fn(later)[:60]
        assert np.array_equal(np.isnan(a), np.isnan(b)) and np.allclose(a[~np.isnan(a)], b[~np.isnan(b)]), name


def test_the_auc_is_the_chance_a_harmful_score_beats_a_healthy_one() -> None:
    assert auc([2.0, 3.0], [1.0]) == 1.0 and auc([1.0], [2.0, 3.0]) == 0.0
    assert auc([1.0, 3.0], [1.0, 2.0]) == pytest.approx((0.5 + 0 + 1 + 1) / 4) and math.isnan(auc([], [1.0]))
