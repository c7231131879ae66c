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
