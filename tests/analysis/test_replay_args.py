"""Arguments of the replay API (replay, replay_policies, policy_names, ReplayPolicy, StepShape.infer): a wrong
one is a ConfigError naming it, never a builtin error, a lost result or a hang; checked before any work."""

from __future__ import annotations

from pathlib import Path

import pytest

import snooze
from snooze.analysis import policy_names, replay, replay_policies
from snooze.analysis.replay import ReplayPolicy, StepShape
from snooze.logs import RewardLog, RewardLogWriter, read_reward_log

G = 4


@pytest.fixture
def log(tmp_path: Path) -> RewardLog:
    path = tmp_path / "log.jsonl"
    with RewardLogWriter(path) as w:
        for step in range(4):
            w.write(step, ["m", "m"], ["a", "b"], [[1.0] * G, [1.0, 0.0, 1.0, 0.0]])
    return read_reward_log(path)


def test_two_policies_of_one_name_are_refused_not_one_result_lost(log: RewardLog) -> None:
    with pytest.raises(snooze.ConfigError, match="'x'"):
        replay_policies(log, [ReplayPolicy("x", 1), ReplayPolicy("x", None)])


def test_a_repeated_factor_is_refused_not_collapsed() -> None:
    with pytest.raises(snooze.ConfigError, match="factor 2 is given twice"):
        policy_names([2, 2])


def test_generators_are_read_once(log: RewardLog) -> None:
    assert [p.name for p in policy_names(k for k in [1, 2])] == ["filter", "snooze:1", "snooze:2"]
    by_list = replay_policies(log, policy_names([1, 2]))
    by_gen = replay_policies(log, (p for p in policy_names([1, 2])))
    assert list(by_gen) == ["filter", "snooze:1", "snooze:2"] and by_gen == by_list


POL = ReplayPolicy("filter", None)


@pytest.mark.parametrize(
    "call, named",
    [
        (lambda log: replay("path.jsonl", POL), "log"),
        (lambda log: replay(None, POL), "log"),
        (lambda log: replay({}, POL), "log"),
        (lambda log: replay(log, "filter"), "policy"),
        (lambda log: replay_policies(log, POL), "policies"),
        (lambda log: replay_policies(log, ["filter"]), "ReplayPolicy"),
        (lambda log: replay_policies(log, None), "policies"),
        (lambda log: replay(log, POL, config={}), "config"),
        (lambda log: replay(log, POL, shape=(8, 8, 2)), "shape"),
        (lambda log: StepShape.infer(None), "log"),
        (lambda log: ReplayPolicy("x", 2, config={"policy": "snooze"}), "config"),
        (lambda log: ReplayPolicy("x", 2, config="filter"), "config"),
        (lambda log: ReplayPolicy(["a"], 2), "name"),
        (lambda log: ReplayPolicy("x", 2, snooze_hard="no"), "True or False"),
        (lambda log: ReplayPolicy("x", "2"), "factor"),
        (lambda log: policy_names(None), "factors"),
        (lambda log: policy_names(3), "factors"),
        (lambda log: policy_names("12"), "factors"),
        (lambda log: policy_names([1], snooze_hard="x"), "True or False"),
        (lambda log: replay_policies(log, policy_names([1]), resamples=10**12), "resamples"),
        (lambda log: replay_policies(log, policy_names([1]), resamples=100_001), "resamples"),
        (lambda log: replay_policies(log, policy_names([1]), resamples=0), "resamples"),
    ],
)
def test_a_wrong_argument_is_a_config_error_naming_it(log: RewardLog, call, named: str) -> None:
    with pytest.raises(snooze.ConfigError, match=named):
        call(log)


def test_max_resamples_is_accepted(log: RewardLog) -> None:
    out = replay_policies(log, policy_names([1]), resamples=200)
    assert out["snooze:1"]["headline"]["resamples"] == 200
