"""The replay's walk: each prompt's chain of encounters through the core's policy, linear in the log.

Prompts are ordered by how often they were logged (their *depth*). While at least :data:`LONE` prompts
have a ``j``-th encounter, the ``j``-th encounters of all of them are one vectorised report (every
first encounter together, then every second one, ...), so the many shallow prompts of a log cost a
report per depth, not per prompt. The few deep prompts left (fewer than :data:`LONE` have an
encounter that deep) go on alone, each from the state the vectorised walk left it in, with a
*transition cache*: the policy's answer to a prompt state and an outcome (and the group's rewards,
if the policy read them for that answer), taken from a real call of the policy's own ``report`` and
reused whenever the same question comes again. A prompt logged 20,000 times costs a few real calls,
not 20,000.

Both walks assume what the replay assumes anyway (``snooze.analysis.replay``): a replayable policy's
answer for a prompt depends only on that prompt's columns and its group. ``walk(..., lone=0)``
reports every depth together, with no cache: the straightforward walk, which the tests and
``benchmarks/replay_skewed.py`` compare against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snooze.core.memory import PromptMemory, passed_over, policy_memory
from snooze.core.policies import Policy, Report

__all__ = ["Encounters", "walk", "LONE"]

LONE = 32
"""Below this many prompts at a depth, the prompts left are walked alone (with the transition cache)."""


class Encounters:
    """The log's groups by prompt (CSR), prompts ordered by how often they were logged: the prompts with a
    ``j``-th encounter are the first ``active[j]``, their ``j``-th groups ``line[start + j]``. O(N) memory."""

    def __init__(self, prompt: np.ndarray, n_prompts: int) -> None:
        self.line = np.argsort(prompt, kind="stable")  # [N] groups by prompt, log order within a prompt
        self.counts = np.bincount(prompt, minlength=n_prompts)
        starts = np.concatenate(([0], np.cumsum(self.counts)[:-1]))
        self.by_count = np.argsort(-self.counts, kind="stable")  # [P] most encountered first
        self.start = starts[self.by_count]
        self.depth = self.counts[self.by_count]  # [P] each row's number of encounters
        deepest = int(self.counts.max()) if n_prompts else 0
        self.active = np.searchsorted(-self.depth, -np.arange(deepest), side="left")  # [J] prompts with a j-th one


class _Watched(Report):
    """A report that notes whether the policy read its rewards (then its answer may depend on them)."""

    read = False

    @property  # type: ignore[override]
    def rewards(self) -> np.ndarray:
        self.read = True
        return self._rewards

    @rewards.setter
    def rewards(self, value: np.ndarray) -> None:
        self._rewards = value


class _Transitions:
    """The policy's answers for one prompt, by ``(state, outcome)`` or, where the policy read the rewards,
    by ``(state, outcome, rewards)``: each ``(state after, regressed)``, from a real call of its ``report``."""

    def __init__(self, policy: Policy, names: list[str], reward_range: tuple[float, float]) -> None:
        self.policy, self.names, self.reward_range = policy, names, reward_range
        self.scratch = policy_memory(1, policy)  # one prompt, row 0
        self.by_outcome: dict[tuple[Any, ...], Any] = {}
        self.by_rewards: dict[tuple[Any, ...], tuple[tuple[Any, ...], int]] = {}
        self.zero = np.zeros(1, dtype=np.int64)
        self.calls = 0

    def answer(
        self, state: tuple[Any, ...], outcome: int, at: int, outcomes: np.ndarray, rewards: np.ndarray
    ) -> tuple[tuple[Any, ...], int]:
        hit = self.by_outcome.get((state, outcome))
        if hit is not None and hit is not _Transitions:
            return hit  # type: ignore[no-any-return]
        if hit is _Transitions:  # this answer depends on the rewards
            seen = self.by_rewards.get((state, outcome, rewards[at].tobytes()))
            if seen is not None:
                return seen
        cols = self.scratch.columns
        for name, value in zip(self.names, state):
            cols[name][0] = value
        report = _Watched(self.zero, self.zero, outcomes[at : at + 1], rewards[at : at + 1], self.reward_range)
        changes = self.policy.report(self.scratch, report)
        self.calls += 1
        regressed = 0
        if changes is not None and changes.regressed is not None:
            regressed = int(np.count_nonzero(changes.regressed))
        result = (tuple(cols[name][0].item() for name in self.names), regressed)
        if report.read:
            self.by_outcome[(state, outcome)] = _Transitions
            self.by_rewards[(state, outcome, rewards[at].tobytes())] = result
        else:
            self.by_outcome[(state, outcome)] = result
        return result


def _alone(
    lines: np.ndarray, state: tuple[Any, ...], cache: _Transitions, outcomes: np.ndarray, rewards: np.ndarray
) -> tuple[np.ndarray, int]:
    """One prompt's remaining encounters (``lines``, in log order) from ``state``: which are skipped, and its
    regressions. Asleep stretches are passed in one go; each rolled-out encounter is one cache look-up."""
    c, f = cache.names.index("counter"), cache.names.index("flags")
    codes = outcomes[lines].tolist()
    n, pos, regressed = lines.shape[0], 0, 0
    skip = np.zeros(n, dtype=bool)
    while pos < n:
        if passed_over(state[f]):  # retired: every later encounter is passed over
            skip[pos:] = True
            break
        count = state[c]
        if count > 0:  # asleep: skipped, the counter counts down
            step = min(count, n - pos)
            skip[pos : pos + step] = True
            state = state[:c] + (count - step,) + state[c + 1 :]
            pos += step
            continue
        state, r = cache.answer(state, codes[pos], int(lines[pos]), outcomes, rewards)
        regressed += r
        pos += 1
    return lines[skip], regressed


def _together(
    enc: Encounters, memory: PromptMemory, policy: Policy, data: tuple[np.ndarray, np.ndarray, Any], lone: int
) -> tuple[np.ndarray, int, int]:
    """The vectorised walk over the depths with at least ``lone`` prompts: skipped lines ``bool [N]``,
    regressions, and the first depth not walked. A stretch of depths where every prompt left is asleep
    or retired is passed over in one go (as many depths as the shortest snooze, within the depths those
    prompts all have), so a long-logged prompt costs a report only at its rolled-out encounters."""
    outcomes, rewards, reward_range = data
    counter, flags = memory.columns["counter"], memory.columns["flags"]
    skipped = np.zeros(outcomes.shape[0], dtype=bool)
    zeros = np.zeros(enc.by_count.shape[0], dtype=np.int64)
    active, regressed, j = enc.active, 0, 0
    depth = int(np.count_nonzero(active >= max(lone, 1)))
    last = np.searchsorted(-active, -active, side="right")  # [J] first depth with fewer prompts than depth j's
    while j < depth:
        n = int(active[j])
        rows, lines = enc.by_count[:n], enc.line[enc.start[:n] + j]
        count = counter[rows]
        asleep = count > 0
        passed = asleep | passed_over(flags[rows])
        if passed.all():  # nothing rolled out for a while: skip ahead
            step = int(min(last[j], j + (count[asleep].min() if asleep.any() else depth))) - j
            skipped[enc.line[(enc.start[:n, None] + j + np.arange(step)[None, :]).ravel()]] = True
            counter[rows[asleep]] -= step
            j += step
            continue
        skipped[lines[passed]] = True
        counter[rows[asleep]] -= 1
        keep = ~passed
        rolled, at = rows[keep], lines[keep]
        changes = policy.report(
            memory, Report(zeros[: rolled.shape[0]], rolled, outcomes[at], rewards[at], reward_range)
        )
        if changes is not None and changes.regressed is not None:
            regressed += int(np.count_nonzero(changes.regressed))
        j += 1
    return skipped, regressed, depth


def walk(
    enc: Encounters,
    policy: Policy,
    outcomes: np.ndarray,
    rewards: np.ndarray,
    reward_range: tuple[float, float],
    lone: int | None = None,
) -> tuple[np.ndarray, int]:
    """Skip mask ``bool [N]`` and the number of regressions of ``policy`` over every prompt's encounters:
    depths with at least ``lone`` (``None``: :data:`LONE`) prompts together, the prompts deeper than that
    alone (module docstring)."""
    lone = LONE if lone is None else lone
    memory = policy_memory(enc.by_count.shape[0], policy)
    skipped, regressed, j = _together(enc, memory, policy, (outcomes, rewards, reward_range), lone)
    deep = int(enc.active[j]) if j < enc.active.shape[0] else 0
    if not deep:
        return skipped, regressed
    cache = _Transitions(policy, list(memory.columns), reward_range)
    for i in range(deep):  # prompts are ordered by depth: the first ``deep`` have a j-th encounter
        start, row = int(enc.start[i]), int(enc.by_count[i])
        lines = enc.line[start + j : start + int(enc.depth[i])]
        state = tuple(col[row].item() for col in memory.columns.values())
        passed, r = _alone(lines, state, cache, outcomes, rewards)
        skipped[passed] = True
        regressed += r
    return skipped, regressed
