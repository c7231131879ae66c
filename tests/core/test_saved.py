"""``snooze/saved/*``: the groups DAPO's dynamic sampling would have generated for a run's batches, estimated
online from the run's own draws and the audit (snooze.core.saved.dapo_step_groups; docs/metrics.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers_core import bernoulli_roller, id_pool

import snooze
from snooze.analysis import saved_dapo_groups
from snooze.core._diagnosis import Diagnosis
from snooze.core.saved import PRIOR_GROUPS, Shape, dapo_step_groups, expected_rounds, saved_from_metrics

G = 4
FULL = {"snooze/audit/groups": 1, "snooze/audit/signal_rate": 0.0, "snooze/drawn/groups": 12}
FULL |= {"snooze/drawn/signal_rate": 0.5, "snooze/skipped": 4}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_on_a_pool_that_does_not_learn_the_estimate_matches_a_real_dapo_run(seed: int) -> None:
    """Where nothing learns there is no drift between a skipping run's model and DAPO's (docs/metrics.md), so
    what the snooze run estimates DAPO would have generated must be what a DAPO run on the same pool generates:
    within 6% over 120 steps (over 8 seeds the ratio was 0.96-1.02, standard deviation 0.02), while the snooze
    run generated at least 1.1x fewer groups, so the estimate had something to find."""
    rng = np.random.default_rng(seed)
    n = 1500
    kind = rng.choice(3, n, p=[0.5, 0.25, 0.25])  # always solved, never solved, in between
    p = np.select([kind == 0, kind == 1], [1.0, 0.0], rng.uniform(0.2, 0.6, n))
    base = {"batch_size": 16, "group_size": G, "max_gen_rounds": 8}
    dapo = snooze.Scheduler(id_pool(n), snooze.SchedulerConfig(**base, policy="dynamic_sampling"), seed=seed)
    skip = snooze.Scheduler(
        id_pool(n),
        snooze.SchedulerConfig(**base, policy="snooze", options=snooze.SnoozeOptions(factor=1), audit=0.2),
        seed=seed,
    )
    for sched, roll_seed in ((dapo, seed + 10), (skip, seed + 20)):
        roll = bernoulli_roller(p, roll_seed)
        for _ in range(150):
            sched.step(roll)
    truth, m = dapo.metrics()["total/gen_groups"], skip.metrics()
    assert truth >= 1.1 * m["total/gen_groups"]
    assert m["total/audit_groups"] >= 100
    assert m["total/saved_dapo_groups"] == pytest.approx(truth, rel=0.06)
    # and DAPO's own estimate of itself is its real generation: the rounds formula, checked
    assert dapo.metrics()["total/saved_dapo_groups"] == pytest.approx(truth, rel=0.04)


def _steps(drawn_rates: np.ndarray, rho: float, skipped: int = 40, drawn: int = 60, audited: int = 4) -> list[dict]:
    """Step counts as :class:`Diagnosis` keeps them, with the audit finding exactly ``rho`` x the drawn rate."""
    return [
        {
            "drawn_groups": drawn,
            "drawn_signal": drawn * d,
            "audit_groups": audited,
            "audit_signal": audited * rho * d,
            "skips": skipped + audited,
        }
        for d in drawn_rates
    ]


def test_a_falling_signal_rate_does_not_carry_the_early_rates_into_late_steps() -> None:
    """The signal rate falls as a model learns (drawn encounters from 0.6 to 0.2 here) and skipped encounters
    carry signal at half the drawn rate all along. At the last step the estimate is DAPO's groups at the true
    rate of the step's encounters (within 1%): the audit is read as a ratio to the drawn rate. The audited rate
    pooled over the run would put the early, higher rates into the last step: it says 0.2 where the truth is
    0.1, and its estimate is 16% low."""
    shape = Shape(16, 16, 8)
    steps = _steps(np.linspace(0.6, 0.2, 200), rho=0.5)
    totals = {"audit_signal": 0.0, "audit_drawn": 0.0}
    for s in steps:
        totals["audit_signal"] += s["audit_signal"]
        totals["audit_drawn"] += s["audit_groups"] * s["drawn_signal"] / s["drawn_groups"]
    true_rate = (60 * 0.2 + 44 * 0.1) / 104  # the last step: 60 drawn, 4 audited and 40 skipped encounters
    want = shape.gen * expected_rounds(16, 16, true_rate, 8)
    assert dapo_step_groups(steps[-1], totals, shape) == pytest.approx(want, rel=0.01)
    pooled = sum(s["audit_signal"] for s in steps) / sum(s["audit_groups"] for s in steps)
    assert pooled == pytest.approx(0.2)
    pooled_rate = (60 * 0.2 + 4 * 0.1 + 40 * pooled) / 104
    assert shape.gen * expected_rounds(16, 16, pooled_rate, 8) < 0.85 * want


def test_without_the_audit_no_saving_is_claimed() -> None:
    """Audit off: skipped encounters are taken at the drawn rate, so the estimate is what the run's own
    encounters say and skipping is credited nothing; with a few audit groups the prior still leans that way."""
    shape = Shape(16, 16, 8)
    step = _steps(np.array([0.3]), rho=0.0, audited=0)[0]
    assert dapo_step_groups(step, {"audit_signal": 0.0, "audit_drawn": 0.0}, shape) == pytest.approx(
        shape.gen * expected_rounds(16, 16, 0.3, 8)
    )
    one = _steps(np.array([0.3]), rho=0.0, audited=1)[0]  # one audit group, no signal
    totals = {"audit_signal": 0.0, "audit_drawn": 0.3}
    rho = PRIOR_GROUPS * 0.3 / (0.3 + PRIOR_GROUPS * 0.3)
    rate = (60 * 0.3 + 40 * rho * 0.3) / 101
    assert dapo_step_groups(one, totals, shape) == pytest.approx(shape.gen * expected_rounds(16, 16, rate, 8))
    assert dapo_step_groups({**one, "skips": 0, "audit_groups": 0, "drawn_groups": 0}, totals, shape) == 0.0


def test_the_estimate_recomputed_from_the_metrics_log_is_the_one_the_run_logged(tmp_path: Path) -> None:
    """``saved_from_metrics`` replays a run's per-step metrics through the estimator: on a run's own lines it
    gives its ``total/saved_dapo_groups`` (to float rounding), so a finished run can be re-estimated."""
    rng = np.random.default_rng(5)
    p = np.select([rng.random(300) < 0.4], [1.0], rng.uniform(0.1, 0.9, 300))
    cfg = snooze.SchedulerConfig(
        batch_size=8, group_size=G, options=snooze.SnoozeOptions(factor=1), audit=0.1, carry_surplus=True
    )
    sched = snooze.Scheduler(id_pool(300), cfg, seed=3)
    roll = bernoulli_roller(p, 4)
    lines = [dict(sched.step(roll).metrics) for _ in range(80)]
    assert lines[-1]["total/audit_groups"] > 0 and lines[-1]["total/skipped"] > 0
    assert saved_from_metrics(lines, Shape(8, 8, cfg.max_gen_rounds)) == pytest.approx(
        lines[-1]["total/saved_dapo_groups"], rel=1e-9
    )
    # the public face: the run's lines, or its metrics.jsonl, and its config
    assert saved_dapo_groups(lines, cfg) == saved_from_metrics(lines, Shape(8, 8, cfg.max_gen_rounds))
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert saved_dapo_groups(path, cfg) == pytest.approx(lines[-1]["total/saved_dapo_groups"], rel=1e-9)
    assert saved_dapo_groups(str(tmp_path), cfg) == saved_dapo_groups(path, cfg)


@pytest.mark.parametrize(
    ("metrics", "config", "error", "match"),
    [
        ([], {"batch_size": 8}, snooze.ConfigError, "config must be the run's SchedulerConfig, not dict"),
        (7, snooze.SchedulerConfig(), snooze.ConfigError, "metrics must be a run directory.*not int"),
        ([3], snooze.SchedulerConfig(), snooze.DataError, "line 0 is a int, not a mapping"),
        ([{**FULL, "snooze/drawn/groups": "12"}], snooze.SchedulerConfig(), snooze.DataError, "drawn/groups is '12'"),
        ([{**FULL, "snooze/skipped": -1}], snooze.SchedulerConfig(), snooze.DataError, "skipped is -1, not a finite"),
        ([{**FULL, "snooze/audit/groups": True}], snooze.SchedulerConfig(), snooze.DataError, "groups is True"),
        (
            [{**FULL, "snooze/audit/signal_rate": None}],
            snooze.SchedulerConfig(),
            snooze.DataError,
            "has no snooze/audit/signal_rate",
        ),
        (
            [{**FULL, "snooze/audit/groups": 10**400}],
            snooze.SchedulerConfig(),
            snooze.DataError,
            "audit/groups is <an integer of .* bits>, not a finite number",
        ),
        ([{**FULL, "snooze/skipped": 10**400}], snooze.SchedulerConfig(), snooze.DataError, "not a finite number"),
        ([{**FULL, "snooze/audit/signal_rate": 5}], snooze.SchedulerConfig(), snooze.DataError, "not a rate in"),
        ([{**FULL, "snooze/drawn/signal_rate": 1.5}], snooze.SchedulerConfig(), snooze.DataError, "not a rate in"),
        (b"metrics", snooze.SchedulerConfig(), snooze.ConfigError, "metrics must be .*not bytes"),
        (bytearray(b"m"), snooze.SchedulerConfig(), snooze.ConfigError, "metrics must be .*not bytearray"),
    ],
)
def test_bad_metrics_or_config_are_refused_naming_what_is_wrong(metrics, config, error, match) -> None:
    with pytest.raises(error, match=match):
        saved_dapo_groups(metrics, config)


def test_a_log_without_the_audit_metrics_is_refused_naming_them() -> None:
    with pytest.raises(snooze.DataError, match=r"line 0 has no snooze/audit/groups.*full"):
        saved_from_metrics([{"gen/groups": 3}], Shape(8, 8, 8))


def test_a_state_written_before_audit_drawn_takes_the_runs_drawn_rate_for_it() -> None:
    diag = Diagnosis()
    state = diag.state_dict()
    state["totals"].update(audit_groups=10, audit_signal=2, drawn_groups=200, drawn_signal=50)
    del state["totals"]["audit_drawn"]
    diag.load_state_dict(state)
    assert diag.totals["audit_drawn"] == pytest.approx(10 * 50 / 200)
    state["totals"]["audit_drawn"] = 1.5  # written by this version: read as it is
    diag.load_state_dict(state)
    assert diag.totals["audit_drawn"] == 1.5
