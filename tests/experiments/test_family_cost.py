"""The family table in rollouts and tokens, and Pilot-Commit's measure (issue 52 items 1 and 5), from hand-made
metrics logs read the way ``snooze compare`` reads them (``read_result`` -> ``summarise`` -> ``summary.json``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from snooze.experiments.family_table import (
    cost_markdown,
    family_markdown,
    family_rows,
    pooled,
    reach,
    reach_markdown,
    write_family,
)
from snooze.experiments.summary import summarise
from snooze.trainer.result import eval_curve, read_result

# per run: rollouts spent per step (6 steps), tokens per rollout, and the sampled accuracy at 0, 2, 4, 6 updates
RUNS = {
    ("dynamic_sampling", 0): (100, 10, [0.40, 0.60, 0.70, 0.80]),  # late 0.70: 95% = 0.665, 99% = 0.693
    ("dynamic_sampling", 1): (100, 10, [0.50, 0.90, 0.90, 0.90]),  # late 0.90: 95% = 0.855, 99% = 0.891
    ("snooze", 0): (50, 12, [0.40, 0.67, 0.68, 0.69]),  # 95% at 2 updates (100 rollouts); 99% never
    ("snooze", 1): (40, 12, [0.50, 0.86, 0.95, 0.95]),  # 95% at 2 updates (80); 99% at 4 (160)
}


def _log(folder: Path, per_step: int, per_rollout: int, acc: list[float]) -> None:
    """Six steps, evaluated every 2 (the last line also after its update: 6 updates), as the reference loop
    writes them: an evaluation at step s sees the weights of s updates, before step s's generation."""
    lines = []
    for step in range(6):
        spent = per_step * (step + 1)
        line: dict[str, Any] = {
            "step": step,
            "total/gen_groups": spent / 4,
            "total/cost_rollouts": spent,
            "total/rollouts": spent,
            "total/cost_tokens": spent * per_rollout,
            "total/tokens_missing": 0,
            "time/elapsed_s": float(step),
        }
        updates = step + 1 if step == 5 else step if step % 2 == 0 else None
        if updates is not None:
            a = acc[updates // 2]
            line.update({"eval/accuracy": a, "eval/sampled_accuracy": a, "eval/updates": float(updates)})
        lines.append(line)
    folder.mkdir(parents=True)
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.fixture
def family(tmp_path: Path) -> Path:
    out = tmp_path / "family"
    for (arm, seed), (per_step, per_rollout, acc) in RUNS.items():
        _log(tmp_path / "runs" / arm / f"seed{seed}", per_step, per_rollout, acc)
    summary = {
        arm: summarise([read_result(tmp_path / "runs" / arm / f"seed{s}") for s in (0, 1)], 10)
        for arm in ("dynamic_sampling", "snooze")
    }
    (out / "r").mkdir(parents=True)
    (out / "r" / "summary.json").write_text(json.dumps(summary))
    return out


def test_an_evaluation_costs_the_rollouts_of_the_batches_its_weights_trained_on(tmp_path: Path) -> None:
    _log(tmp_path / "run", 100, 10, [0.4, 0.6, 0.7, 0.8])
    curve = read_result(tmp_path / "run").curve
    assert curve == eval_curve([json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()])
    assert [(p["updates"], p["rollouts"], p["tokens"], p["sampled"]) for p in curve] == [
        (0.0, 0.0, 0.0, 0.4),  # the base model: nothing spent
        (2.0, 200.0, 2000.0, 0.6),  # after 2 updates: the batches of steps 0 and 1
        (4.0, 400.0, 4000.0, 0.7),
        (6.0, 600.0, 6000.0, 0.8),  # the last line's evaluation follows its own update
    ]


def test_a_log_without_costs_or_with_unreported_tokens_says_so() -> None:
    lines = [
        {"step": 0, "total/rollouts": 8, "eval/accuracy": 0.5},
        {"step": 1, "total/rollouts": 16, "total/cost_tokens": 3, "total/tokens_missing": 2},
        {"step": 2, "total/rollouts": 24, "eval/accuracy": 0.6, "eval/updates": 2.0},
    ]
    curve = eval_curve(lines)
    assert curve[1]["rollouts"] == 16 and math.isnan(curve[1]["tokens"]) and math.isnan(curve[1]["sampled"])


def test_rollouts_and_tokens_ratios_beside_groups(family: Path) -> None:
    row = family_rows(family, ["r"])["regimes"]["r"]["snooze"]
    assert row["ratio"]["by_seed"] == pytest.approx([2.0, 2.5])  # groups: rollouts / 4 in both arms
    assert row["rollout_ratio"]["by_seed"] == pytest.approx([600 / 300, 600 / 240])
    assert row["token_ratio"]["by_seed"] == pytest.approx([6000 / 3600, 6000 / 2880])
    assert row["rollouts"]["mean"] == pytest.approx(270.0) and row["tokens"]["mean"] == pytest.approx(3240.0)
    text = cost_markdown(family_rows(family, ["r"]))
    assert "| r | 600 (600-600), 6000 (6000-6000) | rollouts 2.25x (2.00-2.50), tokens 1.88x (1.67-2.08) |" in text


def test_pilot_commits_measure_by_hand(family: Path) -> None:
    """95%: seed 0 at 100 rollouts (DAPO 400: 4.0x), seed 1 at 80 (DAPO 200: 2.5x); 99%: seed 0 never (0.69 <
    0.693), seed 1 at 160 (DAPO 200: 1.25x)."""
    rows = family_rows(family, ["r"])
    got = rows["regimes"]["r"]["snooze"]["reach"]
    assert got["95"]["rollouts"]["by_seed"] == [100.0, 80.0] and got["95"]["never"] == 0
    assert got["95"]["rollouts"]["mean"] == pytest.approx(90.0) and got["95"]["ratio"]["by_seed"] == [4.0, 2.5]
    assert got["99"]["rollouts"]["by_seed"] == [None, 160.0] and got["99"]["never"] == 1
    assert got["99"]["ratio"]["by_seed"] == [1.25]
    own = rows["regimes"]["r"]["dynamic_sampling"]["reach"]  # DAPO against its own late accuracy
    assert own["95"]["rollouts"]["by_seed"] == [400.0, 200.0] and own["95"]["ratio"]["by_seed"] == [1.0, 1.0]
    text = reach_markdown(rows)
    assert "95%: 90 (80-100) [3.25x]; 99%: 160 (160-160), never on 1/2 [1.25x]" in text
    p = pooled(rows)["snooze"]
    assert p["reach_ratio"] == {"95": pytest.approx(3.25), "99": pytest.approx(1.25)}
    assert p["saving"] == pytest.approx(2.25) and p["saving_groups"] == pytest.approx(2.25)
    assert p["saving_tokens"] == pytest.approx((6000 / 3600 + 6000 / 2880) / 2)


def test_never_reached_on_every_seed_and_a_target_reached_at_the_base() -> None:
    curve_low = [{"rollouts": 0.0, "tokens": 0.0, "accuracy": 0.1}, {"rollouts": 50.0, "tokens": 0.0, "accuracy": 0.2}]
    at_base = [{"rollouts": 0.0, "tokens": 0.0, "accuracy": 0.9}]
    got = reach([0.5, math.nan], [curve_low, curve_low], [at_base, at_base])
    assert got["95"]["rollouts"]["by_seed"] == [None, None] and got["95"]["never"] == 1  # seed 1: DAPO unmeasured
    assert math.isnan(got["95"]["rollouts"]["mean"]) and math.isnan(got["95"]["ratio"]["mean"])
    base = reach([0.5], [at_base], [at_base])  # reached before any rollout: 0 spent, no ratio to take
    assert base["99"]["rollouts"]["by_seed"] == [0.0] and math.isnan(base["99"]["ratio"]["mean"])


def test_the_written_table_has_the_cost_and_reach_tables(family: Path) -> None:
    text = write_family(family, ["r"])
    assert "DAPO: rollouts, tokens" in text and "to 95% of DAPO" in text and "never on 1/2" in text
    saved = json.loads((family / "family.json").read_text())
    assert saved["regimes"]["r"]["snooze"]["reach"]["99"]["rollouts"]["by_seed"] == [None, 160.0]


def test_the_family_table_speaks_in_rollouts_where_the_runs_counted_them(family: Path) -> None:
    """DAPO's rollouts in the first column and each arm's rollout ratio (the bar's unit), not groups: with partial
    groups a stopped screen is a group of k rollouts, so a groups ratio would understate the saving. Groups here are
    rollouts / 4 in both arms, so the groups ratio would read the same; the rollout counts show which is printed."""
    text = family_markdown(family_rows(family, ["r"]))
    assert text.splitlines()[0].startswith("| regime | DAPO (2 seeds): late avg@k, rollouts |")
    assert "| r | 0.800, 600 | 2.25x (2.00-2.50), " in text  # DAPO's 600 rollouts (150 groups)


def test_the_frontier_figure_draws_rollouts_where_the_runs_counted_them(family: Path) -> None:
    from snooze.plots.family import cost_unit, frontier_points

    summary = json.loads((family / "r" / "summary.json").read_text())
    assert cost_unit(summary) == "rollouts"
    points = frontier_points(summary)
    assert points["snooze"][:, 0].tolist() == [300.0, 240.0]  # rollouts, not the 75 and 60 groups
    older = {arm: {k: v for k, v in entry.items() if k != "rollouts"} for arm, entry in summary.items()}
    assert cost_unit(older) == "groups" and frontier_points(older)["snooze"][:, 0].tolist() == [75.0, 60.0]
