"""summary.json's statistics and the regime's criteria, on hand-made numbers."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snooze.experiments.regime import regime_checks, regime_table, time_to_fraction
from snooze.experiments.summary import saving_share, stat, summarise, summary_table
from snooze.trainer.loop import RunResult


def _result(seed: int, gen: float, skipped: float, base: float, final: float, late: float = math.nan) -> RunResult:
    return RunResult(
        Path(f"s{seed}"),
        10,
        base,
        final,
        {"a": final},
        {"total/gen_groups": gen, "total/skipped": skipped, "total/rollouts": 8 * gen},
        1.0,
        base_by_task={"a": base},
        sampled_base=base - 0.1,
        sampled_final=final - 0.05,
        sampled_base_by_task={"a": base - 0.1},
        sampled_final_by_task={"a": final - 0.05},
        late_accuracy=late + 0.05,
        sampled_late=late,
    )


def test_stat_is_mean_and_min_max_over_the_finite_values() -> None:
    assert stat([0.2, 0.4, math.nan]) == {
        "mean": pytest.approx(0.3),
        "min": 0.2,
        "max": 0.4,
        "by_seed": [0.2, 0.4, math.nan],
    }
    assert math.isnan(stat([])["mean"])


def test_summarise_counts_encounters_as_rolled_out_plus_skipped() -> None:
    s = summarise([_result(0, 100, 20, 0.3, 0.5), _result(1, 140, 40, 0.3, 0.7)], pool_prompts=10)
    assert s["encounters_per_prompt"] == {
        "mean": pytest.approx(15.0),
        "min": 12.0,
        "max": 18.0,
        "by_seed": [12.0, 18.0],
    }
    assert s["generated_per_prompt"]["mean"] == pytest.approx(12.0) and s["total_gen_groups"] == 120
    greedy, sampled = s["accuracy"]["greedy"], s["accuracy"]["sampled"]
    assert greedy["final"]["by_seed"] == [0.5, 0.7] and s["final_test_accuracy"] == pytest.approx(0.6)
    assert sampled["by_task"]["a"]["base"]["mean"] == pytest.approx(0.2) and sampled["gain"]["mean"] == pytest.approx(
        0.35
    )


def test_saving_share_and_the_table() -> None:
    assert saving_share(dapo_groups=300, arm_groups=200, optimal_groups=100) == pytest.approx(0.5)
    assert math.isnan(saving_share(100, 100, 100))
    dapo = summarise([_result(0, 300, 0, 0.3, 0.6), _result(1, 300, 0, 0.3, 0.7)], 10)
    arm = summarise([_result(0, 200, 50, 0.3, 0.58), _result(1, 200, 50, 0.3, 0.66)], 10)
    table = summary_table({"dynamic_sampling": dapo, "snooze": arm}, markdown=True, optimal_groups=100)
    row = table.splitlines()[-1]
    # 1.5x fewer, half of the optimal saving, gap paired by seed: -0.02 and -0.04
    assert "| 1.50x | 50% |" in row and "-0.030 [-0.040, -0.020]" in row


def test_the_late_accuracy_and_its_gap_are_paired_by_seed_beside_the_final_ones() -> None:
    dapo = summarise([_result(0, 300, 0, 0.3, 0.6, late=0.60), _result(1, 300, 0, 0.3, 0.7, late=0.64)], 10)
    arm = summarise([_result(0, 200, 50, 0.3, 0.61, late=0.55), _result(1, 200, 50, 0.3, 0.52, late=0.63)], 10)
    assert arm["accuracy"]["sampled"]["late"]["by_seed"] == [0.55, 0.63] and arm["accuracy"]["greedy"]["late"][
        "mean"
    ] == pytest.approx(0.64)
    head, _, _, row = summary_table({"dynamic_sampling": dapo, "snooze": arm}, markdown=True).splitlines()
    cells = dict(zip(head.split(" | "), row.split(" | ")))
    # final: +0.01 and -0.18 (sampled: 0.05 below each final, on both sides); late: -0.05 and -0.01
    assert cells["gap vs DAPO"] == "-0.085 [-0.180, +0.010]" and cells["late acc@T"] == "0.590 [0.550, 0.630]"
    assert cells["late gap"] == "-0.030 [-0.050, -0.010]"
    assert (cells["rollouts"], cells["tokens"]) == ("1600 [1600, 1600]", "-")  # 8 x 200 groups; no token counts


def test_the_table_gives_rollouts_and_tokens_beside_groups() -> None:
    def run(seed: int, gen: int, tokens: int) -> Any:
        r = _result(seed, gen, 0, 0.3, 0.6)
        r.totals |= {"total/cost_rollouts": 8 * gen + 5, "total/cost_tokens": tokens, "total/tokens_missing": 0}
        return r

    arm = summarise([run(0, 100, 900), run(1, 140, 1300)], 10)
    assert arm["rollouts"]["by_seed"] == [805.0, 1125.0] and arm["gen_tokens"]["mean"] == pytest.approx(1100.0)
    head, _, row = summary_table({"snooze": arm}, markdown=True).splitlines()
    cells = dict(zip(head.split(" | "), row.split(" | ")))
    assert (cells["gen groups"], cells["rollouts"], cells["tokens"]) == (
        "120 [100, 140]",
        "965 [805, 1125]",
        "1100 [900, 1300]",
    )


def test_the_oracle_floor_counts_trained_groups_and_zero_signal_first_looks(tmp_path: Path) -> None:
    from snooze.experiments.oracle import oracle_groups
    from snooze.logs import read_reward_log

    lines = [
        (0, "a", 1, [1, 1]),
        (0, "a", 2, [0, 1]),
        (1, "a", 1, [0, 1]),
        (1, "b", 3, [0, 0]),
        (2, "b", 3, [1, 0]),
        (2, "a", 4, [0.5, 0.5]),
    ]
    path = tmp_path / "rewards.jsonl"
    path.write_text("".join(f'{{"step": {t}, "dataset": "{d}", "id": {i}, "rewards": {r}}}\n' for t, d, i, r in lines))
    # first looks: a/1 too easy, a/2 signal, b/3 too hard, a/4 flat: 3 without signal; later groups do not count
    assert oracle_groups(read_reward_log(path), train_groups=10) == 13
    dapo = summarise([_result(0, 300, 0, 0.3, 0.6), _result(1, 300, 0, 0.3, 0.7)], 10) | {
        "oracle_groups": stat([100, 100])
    }
    arm = summarise([_result(0, 200, 50, 0.3, 0.58), _result(1, 200, 50, 0.3, 0.66)], 10)
    rows = summary_table({"dynamic_sampling": dapo, "snooze": arm}, markdown=True, optimal_groups=50).splitlines()
    assert (
        "| 1.00x | - | 100 |" in rows[-2] and "| 1.50x | 40% | 50% |" in rows[-1]
    )  # DAPO's row: the floor; the arm's: its share


def test_time_to_ninety_percent_of_the_final_gain() -> None:
    steps = np.array([0, 25, 50, 75, 100])
    assert time_to_fraction(steps, np.array([0.4, 0.5, 0.6, 0.7, 0.8])) == pytest.approx(1.0)  # linear: 90% at the end
    assert time_to_fraction(steps, np.array([0.4, 0.78, 0.79, 0.8, 0.8])) == pytest.approx(0.25)  # early plateau
    assert math.isnan(time_to_fraction(steps, np.array([0.5, 0.4, 0.4, 0.4, 0.4])))  # no gain


def _records(rounds: list[int], acc: list[float]) -> list[dict[str, Any]]:
    out = []
    for t, r in enumerate(rounds):
        rec: dict[str, Any] = {"step": t, "gen/rounds": r, "gen/groups": 4 * r, "train/groups": 4}
        if t % 2 == 0 or t == len(rounds) - 1:
            rec["eval/sampled_accuracy"] = acc[min(t // 2, len(acc) - 1)]
        out.append(rec)
    return out


def test_regime_checks_report_each_criterion_against_its_target() -> None:
    recs = _records([1] * 5 + [4] * 5, [0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    dapo = summarise([_result(0, 200, 0, 0.35, 0.5)] * 3, pool_prompts=20)
    regime = regime_checks(
        {"dynamic_sampling": [recs] * 3}, {"dynamic_sampling": dapo}, {"easy:x": 0.7, "hard:x": 0.35}, 600.0
    )
    checks = {c["criterion"]: c for c in regime["checks"]}
    assert checks["1. a: base accuracy"]["value"] == 0.25 and checks["1. a: base accuracy"]["met"]
    assert (
        checks["1. a: DAPO gain (min over seeds)"]["value"] == pytest.approx(0.2)
        and checks["1. a: DAPO gain (min over seeds)"]["met"]
    )
    lasts = next(c for n, c in checks.items() if n.startswith("2."))
    assert lasts["met"] and lasts["value"] >= 0.8  # a linear rise
    assert checks["3. DAPO encounters per prompt"]["value"] == 10.0
    assert checks["4. DAPO rounds per step, first -> last 10% of steps"]["value"] == [1.0, 4.0]
    assert checks["4. DAPO used fraction, first -> last 10% of steps"]["value"] == [1.0, 0.25]
    assert (
        checks["5. figure-3 stratum hard:x: base accuracy"]["met"] is False
        and checks["5. figure-3 stratum easy:x: base accuracy"]["met"]
    )
    assert checks["6. paired seeds"]["met"] and "**no**" in regime_table(regime)
    order = [int(c["criterion"].split(".")[0]) for c in regime["checks"]]
    assert order == sorted(order) and order[-1] == 6  # the table reads in the criteria's order, 1 to 6
