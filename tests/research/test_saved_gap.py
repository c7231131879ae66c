"""``research/saved_gap.py``'s arithmetic: the oracle's groups line up with the steps (the pool scored after
step t's update is the model that generates step t + 1), and the gap splits into the three factors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from saved_gap import DAPO, _oracle_groups, _read, _spread_table, decompose

from snooze.core.saved import Shape, expected_rounds, saved_from_metrics

ARM = "snooze-f1-carry"


def _line(step: int, gen: int, drawn: int, rate: float, audit: int, audit_rate: float, skipped: int) -> dict:
    return {
        "step": step,
        "gen/groups": gen,
        "snooze/drawn/groups": drawn,
        "snooze/drawn/signal_rate": rate,
        "snooze/audit/groups": audit,
        "snooze/audit/signal_rate": audit_rate,
        "snooze/skipped": skipped,
    }


def _run(folder: Path, lines: list[dict], qs: list[float], logged: float) -> None:
    folder.mkdir(parents=True)
    total = sum(x["gen/groups"] for x in lines)
    lines[-1] = {**lines[-1], "total/gen_groups": total, "total/saved_dapo_groups": logged}
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = [{"step": t, "pool": {"q": q, "pass": 0.5}, "test": {"q": q, "pass": 0.5}} for t, q in enumerate(qs)]
    (folder / "oracle.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_gap_splits_into_estimator_drift_and_formula(tmp_path: Path) -> None:
    regime = tmp_path / "default"
    dapo_lines = [_line(t, 48, 48, 0.4, 0, 0.0, 0) for t in range(4)]
    arm_lines = [_line(t, 32, 30, 0.5, 2, 0.5, 12) for t in range(4)]
    # five oracle rows for four steps: the last scores the model after the last update, which generates nothing
    _run(regime / DAPO / "seed0", dapo_lines, [0.40, 0.38, 0.36, 0.34, 0.0], logged=190.0)
    _run(regime / ARM / "seed0", arm_lines, [0.45, 0.43, 0.41, 0.39, 0.0], logged=170.0)
    shape = Shape(16, 16, 8)
    want_dapo = sum(16 * expected_rounds(16, 16, q, 8) for q in (0.40, 0.38, 0.36, 0.34))
    lines, rows = _read(regime / DAPO / "seed0")
    assert _oracle_groups(rows, len(lines), shape) == pytest.approx(want_dapo)
    r = decompose(tmp_path, ["default"], ARM, [0], family=True)["default/seed0"]
    arm_metrics = [json.loads(x) for x in (regime / ARM / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert r["estimate"] == pytest.approx(saved_from_metrics(arm_metrics, shape))
    assert r["estimate_logged"] == 170.0 and r["dapo_true"] == 4 * 48
    assert r["formula"] == pytest.approx(want_dapo / (4 * 48))
    assert r["drift"] == pytest.approx(r["oracle_arm"] / want_dapo) and r["drift"] < 1.0  # the arm's model: more signal
    assert math.isclose(r["estimate_over_true"], r["estimator"] * r["drift"] * r["formula"])
    assert r["logged_over_true"] == pytest.approx(170.0 / 192)


def test_the_spread_compares_pass_rate_and_signal_chance_over_the_second_half(tmp_path: Path) -> None:
    """Equal pass rates, a higher signal chance for the arm's model: the spread table reads it per regime."""
    regime = tmp_path / "default"
    lines = [_line(t, 32, 30, 0.5, 2, 0.5, 12) for t in range(4)]
    _run(regime / DAPO / "seed0", [dict(x) for x in lines], [0.40, 0.38, 0.36, 0.34, 0.30], logged=1.0)
    _run(regime / ARM / "seed0", [dict(x) for x in lines], [0.45, 0.43, 0.41, 0.39, 0.35], logged=1.0)
    r = decompose(tmp_path, ["default"], ARM, [0], family=True)
    # five rows: the second half is rows 2-4
    assert r["default/seed0"]["late_pass_gap"] == 0.0
    assert r["default/seed0"]["late_pool_q_ratio"] == pytest.approx((0.41 + 0.39 + 0.35) / (0.36 + 0.34 + 0.30))
    assert "| default | +0.000 to +0.000 | 1.15-1.15 | 1.15-1.15 |" in _spread_table(r)
