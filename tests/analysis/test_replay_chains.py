"""The replay's walk (snooze.analysis._chains): deep prompts walked alone with the transition cache give
exactly what the straightforward walk (every depth one vectorised report, no cache) gives, for every
replayable policy, on random logs and skewed ones; and a deep prompt costs few real policy calls."""

from __future__ import annotations

import numpy as np
import pytest

import snooze
from snooze.analysis._chains import LONE, Encounters, walk
from snooze.core._memory import PromptMemory
from snooze.core.classify import classify
from snooze.core.policies import Column, Context, NoOptions, Policy, Report, make_policy

RANGE = (0.0, 1.0)
CONTEXT = Context(("log",), (1,), 4, 0)  # what the replay builds its policies with (snooze.analysis.replay)


def _policy(cfg: snooze.SchedulerConfig) -> Policy:
    return make_policy(cfg.policy, cfg.options, CONTEXT)


class _RewardSnooze(Policy):
    """A policy whose answer reads the rewards (not only the outcome): sleeps for as many encounters as
    the group had correct rollouts beyond half, and keeps a column of its own."""

    columns = (Column("seen", np.uint8),)

    def report(self, memory: PromptMemory, report: Report) -> None:
        correct = (report.rewards > 0.5).sum(axis=1)
        rows = report.group_rows
        memory.columns["counter"][rows] += np.maximum(correct - report.rewards.shape[1] // 2, 0).astype(np.int32)
        seen = memory.columns["seen"]
        seen[rows] = np.minimum(seen[rows].astype(np.int64) + 1, 3)


class _Counting:
    """A policy wrapped to count its real ``report`` calls."""

    def __init__(self, policy: Policy) -> None:
        self.policy, self.calls = policy, 0
        self.columns, self.skip_mask = policy.columns, None

    def report(self, memory: PromptMemory, report: Report) -> object:
        self.calls += 1
        return self.policy.report(memory, report)


def _policies() -> list[tuple[str, Policy]]:
    configs = {
        "filter": snooze.SchedulerConfig(policy="filter"),
        "snooze:1": snooze.SchedulerConfig(options=snooze.SnoozeOptions(factor=1)),
        "snooze:3": snooze.SchedulerConfig(options=snooze.SnoozeOptions(factor=3)),
        "snooze-hard:2": snooze.SchedulerConfig(options=snooze.SnoozeOptions(factor=2, hard=True)),
        "backoff": snooze.SchedulerConfig(options=snooze.SnoozeOptions(factor=1, backoff=2.0, max=40)),
        "dynamic_sampling": snooze.SchedulerConfig(policy="dynamic_sampling"),
        "grpo": snooze.SchedulerConfig(policy="grpo"),
    }
    out = [(name, _policy(cfg)) for name, cfg in configs.items()]
    return out + [("reads-rewards", _RewardSnooze(NoOptions(), CONTEXT))]


def _log(rng: np.random.Generator, skewed: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(prompt [N], rewards [N, 4])``: random prompts, or a few deep ones among many shallow ones."""
    if skewed:
        deep = rng.integers(1, 4)
        prompt = np.concatenate([rng.integers(0, deep, size=rng.integers(100, 600)), deep + np.arange(300)])
        prompt = np.concatenate([prompt, rng.integers(deep, deep + 300, size=200)])  # shallow ones, some twice
        prompt = prompt[rng.permutation(prompt.shape[0])]
    else:
        prompt = rng.integers(0, rng.integers(1, 80), size=rng.integers(1, 500))
    _, prompt = np.unique(prompt, return_inverse=True)  # dense
    p = rng.random((prompt.shape[0], 1))
    rewards = (rng.random((prompt.shape[0], 4)) < p).astype(np.float64)
    rewards[rng.random(prompt.shape[0]) < 0.1] = 0.5  # some flat groups
    return prompt, rewards


@pytest.mark.parametrize("skewed", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_walking_alone_equals_the_straightforward_walk(seed: int, skewed: bool) -> None:
    rng = np.random.default_rng(seed)
    prompt, rewards = _log(rng, skewed)
    outcomes = classify(rewards, RANGE, 0.99, 0.01, 1e-6, None)
    enc = Encounters(prompt, int(prompt.max()) + 1)
    for name, policy in _policies():
        want = walk(enc, policy, outcomes, rewards, RANGE, lone=0)
        for lone in (2, LONE, 10**9):  # some alone, the default, every prompt alone
            got = walk(enc, policy, outcomes, rewards, RANGE, lone=lone)
            assert got[1] == want[1], (name, lone)
            np.testing.assert_array_equal(got[0], want[0], err_msg=f"{name}, lone={lone}")
    skips = walk(enc, _policies()[2][1], outcomes, rewards, RANGE)[0]
    assert skips.any() and not skips.all()  # the comparison is of a walk that skips some, not none or all


def test_a_deep_prompt_costs_few_real_policy_calls() -> None:
    rng = np.random.default_rng(0)
    n = 20_000
    prompt = np.concatenate([np.zeros(n, dtype=np.int64), 1 + np.arange(n)])[rng.permutation(2 * n)]
    rewards = (rng.random((2 * n, 4)) < rng.random((2 * n, 1))).astype(np.float64)
    outcomes = classify(rewards, RANGE, 0.99, 0.01, 1e-6, None)
    enc = Encounters(prompt, n + 1)
    for lone, most in ((LONE, 50), (0, None)):
        counted = _Counting(_policy(snooze.SchedulerConfig(options=snooze.SnoozeOptions(factor=1))))
        walk(enc, counted, outcomes, rewards, RANGE, lone=lone)  # type: ignore[arg-type]
        if most is not None:
            assert counted.calls < most  # 1 report of the shallow prompts, then a handful of distinct states
        else:
            assert counted.calls > 1_000  # the straightforward walk reports every rolled-out encounter


def test_an_answer_that_reads_rewards_is_not_reused_for_other_rewards() -> None:
    # one prompt, every group too hard for the outcome classes' purpose but with different correct counts
    rewards = np.array([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]] * 5)
    prompt = np.zeros(rewards.shape[0], dtype=np.int64)
    outcomes = classify(rewards, RANGE, 0.99, 0.01, 1e-6, None)
    enc = Encounters(prompt, 1)
    policy = _RewardSnooze(NoOptions(), CONTEXT)
    want = walk(enc, policy, outcomes, rewards, RANGE, lone=0)
    got = walk(enc, policy, outcomes, rewards, RANGE)
    np.testing.assert_array_equal(got[0], want[0])
    assert want[0].any()
