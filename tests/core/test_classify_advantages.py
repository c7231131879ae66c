"""Classification and advantages on values worked out by hand."""

import numpy as np
import pytest

import snooze
from snooze import FLAT, SIGNAL, TOO_EASY, TOO_HARD


def test_classify_by_hand():
    rewards = np.array(
        [
            [1, 0, 0, 0],  # spread -> signal
            [1, 1, 1, 1],  # all correct -> too easy
            [0, 0, 0, 0],  # all wrong -> too hard
            [0.5, 0.5, 0.5, 0.5],  # constant partial reward -> flat
            [1, 1, 1, 1 - 1e-9],  # float noise below the tolerance -> too easy, not signal
        ]
    )
    assert snooze.classify_groups(rewards).tolist() == [SIGNAL, TOO_EASY, TOO_HARD, FLAT, TOO_EASY]


def test_classify_uses_fractions_of_the_range():
    # Range [-1, 1]: all -1 is too hard, all +1 too easy, all 0 flat (mid-range).
    rewards = np.array([[-1.0] * 3, [1.0] * 3, [0.0] * 3, [-1.0, 1.0, 1.0]])
    out = snooze.classify_groups(rewards, reward_range=(-1.0, 1.0))
    assert out.tolist() == [TOO_HARD, TOO_EASY, FLAT, SIGNAL]


def test_thresholds_move_the_easy_line():
    rewards = np.full((1, 4), 0.95)
    assert snooze.classify_groups(rewards, easy_threshold=0.99).tolist() == [FLAT]
    assert snooze.classify_groups(rewards, easy_threshold=0.9).tolist() == [TOO_EASY]


def test_group_std_advantages_by_hand():
    # mean .25; sample std sqrt((.75^2 + 3 * .25^2) / 3) = .5 -> (r - .25) / .5
    adv = snooze.grpo_advantages(np.array([[1.0, 0, 0, 0]]))
    np.testing.assert_allclose(adv, [[1.5, -0.5, -0.5, -0.5]], atol=1e-5)


def test_dr_grpo_advantages_are_only_centred():
    adv = snooze.grpo_advantages(np.array([[1.0, 0, 0, 0], [1, 1, 0, 0]]), scale="none")
    np.testing.assert_allclose(adv, [[0.75, -0.25, -0.25, -0.25], [0.5, 0.5, -0.5, -0.5]])


def test_batch_std_advantages_by_hand():
    r = np.array([[1.0, 0.0], [1.0, 1.0]])
    # centred: [[.5, -.5], [0, 0]]; batch sample std of [1, 0, 1, 1] = sqrt(.75 / 3) = .5
    np.testing.assert_allclose(snooze.grpo_advantages(r, scale="batch"), [[1.0, -1.0], [0.0, 0.0]], atol=1e-5)


def test_zero_spread_group_has_zero_advantage():
    assert np.all(snooze.grpo_advantages(np.ones((2, 8))) == 0.0)


def test_unknown_scale_is_a_config_error():
    with pytest.raises(snooze.ConfigError, match="advantage scale"):
        snooze.grpo_advantages(np.ones((1, 2)), scale="nope")


@pytest.mark.parametrize(
    "bad, match",
    [([[0.5, float("nan")]], "not finite"), ([[0.5, 1.5]], "outside reward_range"), ([[0.5, 0.5, 0.5]], "shape")],
)
def test_check_rewards_rejects(bad, match):
    with pytest.raises(snooze.RewardError, match=match):
        snooze.check_rewards(bad, 1, 2, (0.0, 1.0))


@pytest.mark.parametrize(
    "args, match",
    [
        ((2, 4, "ab"), r"reward_range='ab': must be \(low, high\)"),
        ((2, 4, None), r"reward_range=None: must be \(low, high\)"),
        ((2, 4, (1.0, 0.0)), "finite low < high"),
        (("x", 4, (0, 1)), "n_groups='x': must be an integer"),
        ((2, 4.0, (0, 1)), "group_size=4.0: must be an integer"),
        ((True, 4, (0, 1)), "n_groups=True: must be an integer"),
    ],
)
def test_check_rewards_bad_arguments_are_config_errors(args, match):
    with pytest.raises(snooze.ConfigError, match=match):
        snooze.check_rewards(np.zeros((2, 4)), *args)


@pytest.mark.parametrize("outside", ["maybe", None, "Accept"])
def test_check_rewards_unknown_outside_is_refused_not_read_as_raise(outside):
    with pytest.raises(snooze.ConfigError, match="outside=.*must be 'raise' or 'accept'"):
        snooze.check_rewards(np.full((2, 4), 5.0), 2, 4, (0.0, 1.0), outside=outside)
    assert snooze.check_rewards(np.full((2, 4), 5.0), 2, 4, (0.0, 1.0), outside="accept").tolist() == [[5.0] * 4] * 2


def _direct(r, scale, eps=1e-6):
    """The formulas as they were before the overflow fallback (the reference for ordinary rewards)."""
    centred = r - np.ascontiguousarray(r.T).sum(axis=0)[:, None] / r.shape[1]
    if scale == "group":
        return centred / (np.sqrt(np.square(centred.T).sum(axis=0) / (r.shape[1] - 1))[:, None] + eps)
    if scale == "batch":
        return centred / (r.std(ddof=1) + eps)
    return centred


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_ordinary_rewards_keep_bit_identical_advantages(scale):
    rng = np.random.default_rng(0)
    for r in (rng.random((64, 8)), rng.integers(0, 2, (32, 4)).astype(float), rng.normal(0, 1e100, (16, 5))):
        assert snooze.grpo_advantages(r, scale).tobytes() == _direct(r, scale).tobytes()


@pytest.mark.parametrize("scale", ["group", "batch"])
def test_huge_rewards_get_the_advantages_of_their_pattern_not_zeros_or_nan(scale):
    """Sums and squares of rewards near 1e160 and 1.7e308 overflow float64: the advantages are those of
    the same pattern at scale 1 (the eps term aside), and a row that does not overflow is untouched."""
    small = np.array([[1.0, 0.0, 0.0, 1.0]])
    for big in (1e160, 1.7e308):
        r = np.vstack([small * big, [[0.5, 0.25, 0.0, 1.0]]])
        with np.errstate(over="raise", invalid="raise"):  # no overflow warning leaks either
            adv = snooze.grpo_advantages(r, scale)
        assert np.isfinite(adv).all()
        expected = snooze.grpo_advantages(small, scale) if scale == "group" else np.sign(small - 0.5) * 1.0
        if scale == "group":
            np.testing.assert_allclose(adv[:1], expected, rtol=1e-5)
            assert adv[1].tobytes() == _direct(r[1:], "group")[0].tobytes()
        else:
            assert (np.sign(adv[0]) == expected[0]).all() and np.abs(adv[0]).min() > 0.5
    adv = snooze.grpo_advantages([[1e308, -1e308, 0.0, 1.0]])
    np.testing.assert_allclose(adv[0, :2], [1.2247449, -1.2247449], rtol=1e-6)  # was all zeros


def test_scheduler_advantages_of_rewards_near_the_float_limit():
    for high in (1e160, 1.7e308):
        cfg = snooze.SchedulerConfig(batch_size=2, group_size=4, reward_range=(0.0, high))
        sched = snooze.Scheduler({"t": [{"id": i} for i in range(10)]}, cfg)
        with np.errstate(over="raise", invalid="raise"):
            b = sched.step(lambda cs, h=high: np.tile([h, 0.0, 0.0, h], (len(cs), 1)))
        assert b.signal.all()
        np.testing.assert_allclose(b.advantages, np.tile([0.8660254, -0.8660254, -0.8660254, 0.8660254], (2, 1)))


def test_group_means_of_huge_rewards_are_finite():
    from snooze.core.classify import group_means

    with np.errstate(over="raise", invalid="raise"):
        assert group_means(np.array([[1.7e308, 1.7e308], [1.0, 2.0]])).tolist() == [1.7e308, 1.5]


def test_centred_rewards_beyond_float64_are_refused_not_inf():
    with pytest.raises(snooze.RewardError, match="exceed float64"):
        snooze.grpo_advantages([[1.7e308, -1.7e308, -1.7e308, -1.7e308]], "none")
