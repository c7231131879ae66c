"""``research/screening_dev.py``'s arithmetic: ratios of totals over the seeds paired with DAPO, gaps in points by
seed, the stopped share, and the pooled geometric mean."""

from __future__ import annotations

import math

import pytest

from snooze.core.policies import POLICIES
from snooze.experiments.compare import RECOMMENDED_ARM, SCREEN_ARMS

_REGISTERED = set(POLICIES)
from screening_dev import ALARM_REGIMES, ARMS, DAPO, cells, pooled, table  # noqa: E402  (registers research's "spaced" policy)

for _name in set(POLICIES) - _REGISTERED:  # importing it registers retention_dev's policy: leave the registry as
    POLICIES._classes.pop(_name)  # it was, for the tests that pin the built-ins (they are collected with this one)


def _run(rollouts: float, tokens: float, late: float, screened: float = 0.0, stopped: float = 0.0) -> dict:
    trained, rounds = 100.0 - stopped, 10.0 + screened / 10  # made-up but distinct per run
    return {"rollouts": rollouts, "tokens": tokens, "late": late, "screened": screened, "stopped": stopped,
            "trained": trained, "rounds": rounds}  # fmt: skip


def test_the_arms_are_dapo_the_recommended_setting_and_the_screening_arms() -> None:
    wider = [
        "dynamic_sampling-screen2-gb32",
        "dynamic_sampling-screen2-gb64",
        "dynamic_sampling-screen4-gb32",
        f"{RECOMMENDED_ARM}-screen4-gb32",
        f"{RECOMMENDED_ARM}-screen4-gb16",
        f"{RECOMMENDED_ARM}-screen2-gb32",
        f"{RECOMMENDED_ARM}-screen3",
        "snooze-f2-carry-screen4",
        "dynamic_sampling-screen4",  # the ablation of the candidate: the screen alone, the candidate without carry
        "snooze-f1-screen4",
    ]
    assert list(ARMS) == [DAPO, RECOMMENDED_ARM, *SCREEN_ARMS, *wider]
    assert ARMS["dynamic_sampling-screen2-gb32"].settings == {"screen_size": 2, "gen_batch_size": 32}
    # at G=16 (al-mix-g16) each screening arm's round holds DAPO's round of 8 groups of 16: 128 rollouts
    g16 = ALARM_REGIMES["al-mix-g16"]
    for name in wider[1:4]:
        k, gen = ARMS[name].settings["screen_size"], ARMS[name].settings["gen_batch_size"]
        assert k * gen == g16.batch_size * g16.group_size == 128
    # at G=8 (the al-* regimes) the recommended setting's screens hold DAPO's round of 8 groups of 8: 64 rollouts
    g8 = ALARM_REGIMES["al-mix"]
    for name in wider[4:6]:
        k, gen = ARMS[name].settings["screen_size"], ARMS[name].settings["gen_batch_size"]
        assert k * gen == g8.batch_size * g8.group_size == 64
    # the rest size their rounds at SchedulerConfig's default with screening: the same 64 rollouts, rounded up
    for name in wider[6:]:
        cfg = ARMS[name].config(g8, [])
        assert cfg.gen_batch_size is None and cfg.gen_size == -(-64 // cfg.screen_size), name
    assert ARMS["snooze-f1-screen4"].config(g8, []).carry_surplus is False  # the ablation's one difference
    assert ARMS["dynamic_sampling-screen4"].config(g8, []).screen_size == 4


def test_cells_pair_by_seed_and_pool_geometrically() -> None:
    arm = "dynamic_sampling-screen2"
    runs = {
        ("a", DAPO, 100): _run(800, 8000, 0.50),
        ("a", DAPO, 101): _run(1200, 12000, 0.60),
        ("a", arm, 100): _run(500, 4000, 0.51, screened=100, stopped=40),
        ("a", arm, 101): _run(500, 6000, 0.58, screened=100, stopped=20),
        ("a", arm, 102): _run(1, 1, 0.0, screened=1, stopped=1),  # DAPO has no seed 102: left out
        ("b", DAPO, 100): _run(900, 900, 0.40),
        ("b", arm, 100): _run(1000, 900, 0.40, screened=10, stopped=0),
    }
    got = cells(runs, ["a", "b"], [DAPO, arm])
    a = got["a", arm]
    assert a["seeds"] == [100, 101]
    assert a["rollout_ratio"] == pytest.approx(2000 / 1000) and a["token_ratio"] == pytest.approx(20000 / 10000)
    assert a["gaps"] == pytest.approx([1.0, -2.0]) and a["stopped_share"] == pytest.approx(60 / 200)
    assert a["trained_ratio"] == pytest.approx((60 + 80) / 200) and a["rounds_ratio"] == pytest.approx(40 / 20)
    assert a["per_trained_ratio"] == pytest.approx((2000 / 200) / (1000 / 140))
    assert math.isnan(got["a", DAPO]["stopped_share"]) and got["a", DAPO]["rollout_ratio"] == 1.0
    p = pooled(got, arm)
    assert p["regimes"] == 2 and p["runs"] == 3
    assert p["rollout_ratio"] == pytest.approx(math.sqrt(2.0 * 0.9))
    assert p["trained_ratio"] == pytest.approx(math.sqrt(0.7 * 1.0))
    assert p["rounds_ratio"] == pytest.approx(math.sqrt(2.0 * 1.1))
    assert (p["gap_mean"], p["gap_min"], p["gap_max"]) == pytest.approx((-1 / 3, -2.0, 1.0))
    text = table(got, ["a", "b"], [DAPO, arm])
    assert f"| a | {arm} | 2 | 2.00x | 2.00x | -0.50 [-2.00, +1.00] | 30% | 0.70 | 1.40x | 2.00 |" in text
    assert f"| pooled (2 regimes) | {arm} | 3 runs | 1.34x |" in text
