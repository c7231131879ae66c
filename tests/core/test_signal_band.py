"""What counts as signal (DAPO's rule, whatever the reward range), the reward band, rewards outside the
range, and streams in dataset order: by hand, and against a plain re-implementation of docs/concepts.md."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import snooze
from snooze import FLAT, SIGNAL, TOO_EASY, TOO_HARD

# -- signal: any spread, with a float-noise tolerance that follows the rewards, not the range ------------------


def test_a_wide_reward_range_does_not_turn_spread_into_no_signal() -> None:
    """The tolerance was a fraction of the range: with (-1e6, 1e6) a group needed a std above 2 to count, so
    every 0/1 group was no-signal (on a TRL case trained groups per step fell from 1.0 to 0.275)."""
    groups = np.array([[1.0, 0, 0, 0], [1, 1, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0]])
    for rr in [(0.0, 1.0), (-1.0, 1.0), (-1e6, 1e6), (0.0, 1e9)]:
        assert snooze.classify_groups(groups, rr)[:2].tolist() == [SIGNAL, SIGNAL], rr
    # the range still places a zero-spread group: all-1 is too easy on [0, 1], flat in the middle of (-1e6, 1e6)
    assert snooze.classify_groups(groups, (-1e6, 1e6))[2:].tolist() == [FLAT, FLAT]


def test_the_scheduler_keeps_every_group_with_spread_under_a_wide_range() -> None:
    cfg = snooze.SchedulerConfig(batch_size=4, group_size=4, policy="dynamic_sampling", reward_range=(-1e6, 1e6))
    sched = snooze.Scheduler({"d": [{"id": i} for i in range(8)]}, cfg, seed=0)
    batch = sched.step(lambda cands: np.tile([1.0, 0.0, 0.0, 1.0], (len(cands), 1)))
    assert len(batch) == 4 and batch.metrics["gen/rounds"] == 1 and batch.metrics["groups/signal"] == 4


def test_float_noise_is_judged_against_the_rewards_own_size() -> None:
    big = 1e6  # float32 keeps ~6e-8 of a value: one ulp at 1e6 is 0.0625
    assert snooze.classify_groups([[big, big + 0.0625]], (0.0, 2e6)).tolist() == [FLAT]  # rounding, not signal
    assert snooze.classify_groups([[big, big + 10.0]], (0.0, 2e6)).tolist() == [SIGNAL]
    assert snooze.classify_groups([[0.5, 0.5 + 1e-9]]).tolist() == [FLAT]  # within [-1, 1]: signal_tol itself
    assert snooze.classify_groups([[0.5, 0.5 + 1e-9]], signal_tol=0.0).tolist() == [SIGNAL]  # 0: DAPO's std > 0


def old_rule(r: np.ndarray, easy: float = 0.99, hard: float = 0.01, tol: float = 1e-6) -> list[int]:
    """The classification before the change, on reward_range (0, 1) (a std above tol of the range)."""
    out = np.full(r.shape[0], FLAT)
    out[r.mean(axis=1) >= easy] = TOO_EASY
    out[r.mean(axis=1) <= hard] = TOO_HARD
    out[r.std(axis=1) > tol] = SIGNAL
    return out.tolist()


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**16), G=st.integers(2, 16), noise=st.sampled_from([0.0, 1e-8, 1e-7, 1e-6, 3e-6, 1e-3]))
def test_rewards_in_zero_one_are_classified_as_before(seed: int, G: int, noise: float) -> None:
    rng = np.random.default_rng(seed)
    base = rng.choice([0.0, 0.005, 0.5, 0.995, 1.0 - 4e-6, 1.0], size=(48, 1))
    r = np.clip(base + noise * rng.standard_normal((48, G)) * (rng.random((48, 1)) < 0.7), 0.0, 1.0)
    r[:8] = rng.integers(0, 2, size=(8, G))  # 0/1 rewards, as in the reference experiment
    assert snooze.classify_groups(r).tolist() == old_rule(r)


# -- the reward band ------------------------------------------------------------------------------------------


def reference_outcome(
    group: list[float], rr: tuple[float, float], easy: float, hard: float, band: tuple[float, float] | None
) -> int:
    """docs/concepts.md, "Prompts, groups, outcomes", read plainly. The rewards come from a grid of eighths,
    so every mean below is exact and every spread is far above the float-noise tolerance."""
    low, high = rr
    mean = (sum(group) / len(group) - low) / (high - low)
    if band is not None and mean > band[1]:
        return TOO_EASY
    if band is not None and mean < band[0]:
        return TOO_HARD
    if max(group) > min(group):
        return SIGNAL
    return TOO_EASY if mean >= easy else TOO_HARD if mean <= hard else FLAT


RANGES = [(0.0, 1.0), (-1.0, 1.0), (0.0, 2.0), (-4.0, 4.0)]
eighths = st.integers(0, 8).map(lambda k: k / 8)


@st.composite
def band_cases(draw: st.DrawFn) -> tuple[np.ndarray, tuple[float, float], tuple[float, float] | None]:
    rr = draw(st.sampled_from(RANGES))
    G = draw(st.sampled_from([2, 4, 8]))
    n = draw(st.integers(1, 12))
    fractions = draw(st.lists(st.lists(eighths, min_size=G, max_size=G), min_size=n, max_size=n))
    rewards = rr[0] + (rr[1] - rr[0]) * np.array(fractions)
    lo, hi = sorted(draw(st.lists(st.integers(0, 16), min_size=2, max_size=2, unique=True)))
    band = draw(st.sampled_from([None, (lo / 16, hi / 16)]))
    return rewards, rr, band


@settings(max_examples=150, deadline=None)
@given(case=band_cases())
def test_classification_with_a_band_matches_the_reference(case) -> None:
    rewards, rr, band = case
    got = snooze.classify_groups(rewards, rr, reward_band=band).tolist()
    assert got == [reference_outcome(g, rr, 0.99, 0.01, band) for g in rewards.tolist()]


@settings(max_examples=40, deadline=None)
@given(case=band_cases(), policy=st.sampled_from(["dynamic_sampling", "snooze"]))
def test_the_scheduler_applies_the_band_as_the_reference_says(case, policy: str) -> None:
    """One round through a real Scheduler: the batch holds the reference's signal groups (in report order, up
    to batch_size), the metrics count its outcomes, and under snooze its too-easy prompts fall asleep."""
    rewards, rr, band = case
    n, G = rewards.shape
    cfg = snooze.SchedulerConfig(
        batch_size=n, group_size=G, policy=policy, reward_range=rr, reward_band=band, max_gen_rounds=1
    )
    sched = snooze.Scheduler({"d": [{"id": i} for i in range(n)]}, cfg, seed=0)
    cands = sched.propose()
    expect = [reference_outcome(g, rr, 0.99, 0.01, band) for g in rewards.tolist()]
    assert sched.report(cands, rewards).tolist() == expect
    batch = sched.finish_step()
    assert [c.id for c in batch.candidates] == [c.id for c, o in zip(cands, expect) if o == SIGNAL]
    for name, code in [("signal", SIGNAL), ("too_easy", TOO_EASY), ("too_hard", TOO_HARD), ("flat", FLAT)]:
        assert batch.metrics[f"groups/{name}"] == expect.count(code)
    assert sched.metrics()["snooze/asleep"] == (expect.count(TOO_EASY) if policy == "snooze" else 0)


def test_a_band_by_hand() -> None:
    r = np.array([[1.0, 1, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0], [0.5, 0.5, 0.5, 0.5], [0.9] * 4])
    assert snooze.classify_groups(r).tolist() == [SIGNAL, SIGNAL, SIGNAL, FLAT, FLAT]
    # means .75, .25, .5, .5, .9 against [0.3, 0.7]: above -> too easy, below -> too hard, constant inside -> flat
    assert snooze.classify_groups(r, reward_band=(0.3, 0.7)).tolist() == [TOO_EASY, TOO_HARD, SIGNAL, FLAT, TOO_EASY]
    assert snooze.classify_groups(r, reward_band=(0.25, 0.75)).tolist() == [
        SIGNAL,
        SIGNAL,
        SIGNAL,
        FLAT,
        TOO_EASY,
    ]  # closed


@pytest.mark.parametrize(
    "band", [(0.8, 0.2), (0.5, 0.5), (-0.1, 0.5), (0.2, 1.5), (0.2,), "0.2,0.8", (True, 0.5), (np.nan, 0.5)]
)
def test_a_bad_band_is_a_config_error_that_names_it(band) -> None:
    with pytest.raises(snooze.ConfigError, match=r"reward_band=.*0 <= lo < hi <= 1"):
        snooze.SchedulerConfig(reward_band=band)


def test_band_and_the_new_fields_round_trip() -> None:
    cfg = snooze.SchedulerConfig(reward_band=[0.2, 0.8], out_of_range="accept", shuffle=False)
    assert cfg.reward_band == (0.2, 0.8)
    assert snooze.SchedulerConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(snooze.ConfigError, match="out_of_range='clip'"):
        snooze.SchedulerConfig(out_of_range="clip")
    with pytest.raises(snooze.ConfigError, match="shuffle=1"):
        snooze.SchedulerConfig(shuffle=1)


# -- rewards outside the range ---------------------------------------------------------------------------------


def test_out_of_range_accept_records_rewards_as_they_are_and_places_constant_groups() -> None:
    r = np.array([[2.0, 2.0], [-1.0, -1.0], [2.0, -1.0], [0.5, 0.5]])
    with pytest.raises(
        snooze.RewardError, match=r"reward 2.0 at group 0, rollout 0 is outside reward_range.*out_of_range='accept'"
    ):
        snooze.classify_groups(r)
    assert snooze.classify_groups(r, out_of_range="accept").tolist() == [TOO_EASY, TOO_HARD, SIGNAL, FLAT]
    with pytest.raises(snooze.RewardError, match="not finite"):
        snooze.classify_groups([[np.nan, 0.0]], out_of_range="accept")
    with pytest.raises(snooze.RewardError, match="not finite"):
        snooze.classify_groups([[np.inf, 0.0]], out_of_range="accept")


def test_accepted_rewards_outside_the_range_survive_a_save_and_load(tmp_path) -> None:
    cfg = snooze.SchedulerConfig(
        batch_size=1,
        gen_batch_size=3,
        group_size=2,
        policy="dynamic_sampling",
        out_of_range="accept",
        carry_surplus=True,
    )
    recs = [{"id": i} for i in range(6)]
    sched = snooze.Scheduler({"d": recs}, cfg, seed=0)
    batch = sched.step(lambda c: np.tile([3.0, -2.0], (len(c), 1)))  # surplus carried, rewards outside
    assert batch.rewards.tolist() == [[3.0, -2.0]] and sched.step_record().carried_in.sum() >= 1
    sched.save(tmp_path / "s")  # the carried groups are in the state (the load checked them against (0, 1) before)
    again = snooze.Scheduler.load(tmp_path / "s", {"d": recs})
    held = again.state_dict()["arrays"]["step.rewards"].tolist()
    assert held and held == sched.state_dict()["arrays"]["step.rewards"].tolist()
    assert again.finish_step().rewards.tolist() == sched.finish_step().rewards.tolist() == [[3.0, -2.0]]


# -- streams in dataset order ----------------------------------------------------------------------------------


def test_shuffle_false_draws_each_epoch_in_dataset_order() -> None:
    cfg = snooze.SchedulerConfig(batch_size=2, group_size=2, policy="grpo", shuffle=False)
    sched = snooze.Scheduler({"d": [{"id": f"r{i}"} for i in range(5)]}, cfg, seed=3)
    seen = [c.id for _ in range(5) for c in sched.step(lambda c: np.ones((len(c), 2))).candidates]
    assert seen == [f"r{i}" for i in [0, 1, 2, 3, 4] * 2]
    shuffled = snooze.Scheduler({"d": [{"id": f"r{i}"} for i in range(5)]}, cfg.replace(shuffle=True), seed=3)
    assert [c.id for c in shuffled.propose()] != ["r0", "r1"] or [c.id for c in shuffled.propose()] != ["r2", "r3"]
