"""Cost in rollouts and tokens (snooze.core._cost; issue 52 item 1): every rollout reported is counted, audit ones
too, tokens where the trainer reports them, scoring passes converted to rollouts. Values worked out by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _driver import state_hash
from helpers_core import bernoulli_roller, id_pool

import snooze
from snooze.core._cost import SCORE_PASS_ROLLOUTS, cost_rollouts, cost_tokens

G = 4
COST_KEYS = ("gen/rollouts", "gen/tokens", "gen/tokens_missing", "gen/score_passes", "gen/score_tokens")


def _sched(**cfg: Any) -> snooze.Scheduler:
    config = snooze.SchedulerConfig(**{"batch_size": 2, "group_size": G, "max_gen_rounds": 4, **cfg})
    return snooze.Scheduler(id_pool(20), config, seed=0)


def test_a_scoring_pass_is_one_rollout_and_its_tokens_count_one_for_one() -> None:
    assert SCORE_PASS_ROLLOUTS == 1
    assert cost_rollouts(40, 3) == 43 and cost_tokens(500, 120) == 620


def test_each_count_of_a_step_and_its_totals_by_hand() -> None:
    """Round 1: two groups with 10 + 7 tokens (one too easy); round 2: two groups reported without tokens;
    3 scoring passes over 30 tokens. Step 2: one group of 5 tokens."""
    sched = _sched()
    c = sched.propose()
    sched.report(c, [[1, 0, 1, 0], [1, 1, 1, 1]], tokens=[10, 7])
    sched.report_scoring(3, 30)
    c = sched.propose()
    sched.report(c, [[0, 0, 0, 0], [0, 1, 0, 0]])
    m = sched.finish_step().metrics
    assert {k: m[k] for k in COST_KEYS} == {
        "gen/rollouts": 16,  # 4 groups x 4
        "gen/tokens": 17,
        "gen/tokens_missing": 2,
        "gen/score_passes": 3,
        "gen/score_tokens": 30,
    }
    assert m["gen/cost_rollouts"] == 19 and m["gen/cost_tokens"] == 47
    assert m["snooze/saved/dapo_rollouts"] == G * m["snooze/saved/dapo_groups"]
    assert m["snooze/saved/rollouts"] == m["snooze/saved/dapo_rollouts"] - 19
    c = sched.propose(1)
    sched.report(c, [[0, 1, 1, 1]], tokens=np.array([5], dtype=np.uint8))
    m = sched.finish_step().metrics
    assert (m["gen/rollouts"], m["gen/tokens"], m["gen/tokens_missing"], m["gen/cost_rollouts"]) == (4, 5, 0, 4)
    assert (m["total/rollouts"], m["total/gen_tokens"], m["total/tokens_missing"]) == (20, 22, 2)
    assert (m["total/score_passes"], m["total/score_tokens"]) == (3, 30)
    assert (m["total/cost_rollouts"], m["total/cost_tokens"]) == (23, 52)
    assert m["total/saved_dapo_rollouts"] == pytest.approx(G * m["total/saved_dapo_groups"])
    assert m["total/saved_rollout_ratio"] == pytest.approx(m["total/saved_dapo_rollouts"] / 23)


def test_step_reports_the_tokens_a_rollout_fn_returns_with_generated() -> None:
    sched, seen = _sched(), []
    roll = bernoulli_roller(np.full(20, 0.5), seed=1, group_size=G)

    def with_tokens(cands: snooze.Candidates) -> snooze.Generated:
        seen.extend(cands.row.tolist())
        return snooze.Generated(roll(cands), cands.row.astype(np.int64) + 1)  # prompt i: i + 1 tokens a group

    m = sched.step(with_tokens).metrics
    assert m["gen/tokens"] == sum(seen) + len(seen) and m["gen/tokens_missing"] == 0
    assert m["gen/rollouts"] == G * len(seen) == G * m["gen/groups"]
    plain = sched.step(roll).metrics
    assert plain["gen/tokens"] == 0 and plain["gen/tokens_missing"] == plain["gen/groups"]
    assert plain["total/gen_tokens"] == m["gen/tokens"]


def test_audit_rollouts_are_counted() -> None:
    """Under snooze with an audit, every audit group is generated: its rollouts are in gen/rollouts."""
    config = snooze.SchedulerConfig(
        batch_size=4, group_size=G, options=snooze.SnoozeOptions(factor=3), audit=0.5, max_gen_rounds=3
    )
    sched = snooze.Scheduler(id_pool(12), config, seed=3)
    p = np.where(np.arange(12) < 8, 1.0, 0.5)  # most prompts too easy: they sleep, and the audit rolls some out
    roll = bernoulli_roller(p, seed=0, group_size=G)
    audits = rollouts = groups = 0
    for _ in range(12):
        m = sched.step(roll).metrics
        audits += m["snooze/audit/groups"]
        rollouts += m["gen/rollouts"]
        groups += m["gen/groups"]
        assert m["gen/rollouts"] == G * m["gen/groups"]
    assert audits > 0 and rollouts == G * groups == m["total/rollouts"] == m["total/cost_rollouts"]


@pytest.mark.parametrize(
    ("tokens", "match"),
    [
        ([10], r"shape \(1,\)"),
        ([10.0, 3.0], "must be integers"),
        ([True, False], "must be integers"),
        ([4, -1], r"tokens=...\)\[1\] = -1"),
        (["4", "1"], "must be integers"),
        ([[1, 2], [3, 4]], "shape"),
        ([1, 2**64 - 1], r"tokens=...\)\[1\]"),
    ],
)
def test_bad_tokens_are_refused_and_nothing_is_recorded(tokens: Any, match: str) -> None:
    sched = _sched()
    c = sched.propose()
    before = state_hash(sched)
    if tokens == [1, 2**64 - 1]:
        tokens = np.array(tokens, dtype=np.uint64)
    with pytest.raises(snooze.RewardError, match=match):
        sched.report(c, [[1, 0, 1, 0], [1, 1, 1, 1]], tokens=tokens)
    assert state_hash(sched) == before


@pytest.mark.parametrize(("passes", "tokens", "name"), [(-1, 0, "passes"), (1.0, 3, "passes"), (2, None, "tokens")])
def test_bad_scoring_counts_are_refused_and_nothing_is_counted(passes: Any, tokens: Any, name: str) -> None:
    sched = _sched()
    before = state_hash(sched)
    with pytest.raises(snooze.ConfigError, match=rf"report_scoring\({name}\)"):
        sched.report_scoring(passes, tokens)
    assert state_hash(sched) == before


def test_a_withdrawn_round_takes_its_tokens_back() -> None:
    sched = _sched()

    def fails(cands: snooze.Candidates) -> snooze.Generated:
        return snooze.Generated(np.zeros((len(cands), G)), [-1] * len(cands))

    with pytest.raises(snooze.RewardError):
        sched.step(fails)
    assert sched.round == 0
    c = sched.propose()
    sched.report(c, [[1, 0, 1, 0], [1, 0, 0, 0]], tokens=[2, 3])
    m = sched.finish_step().metrics
    assert (m["gen/tokens"], m["gen/rollouts"], m["gen/tokens_missing"]) == (5, 8, 0)


def test_the_counts_survive_save_and_load(tmp_path: Any) -> None:
    sched = _sched()
    c = sched.propose()
    sched.report(c, [[1, 0, 1, 0], [1, 1, 1, 1]], tokens=[10, 7])
    sched.report_scoring(2, 9)
    sched.save(tmp_path)  # mid-step: the step's counts are in the state too
    again = snooze.Scheduler.load(tmp_path, id_pool(20))
    m, n = sched.finish_step().metrics, again.finish_step().metrics
    assert {k: m[k] for k in m if "tokens" in k or "cost" in k or "score" in k} == {
        k: n[k] for k in n if "tokens" in k or "cost" in k or "score" in k
    }
    assert n["total/gen_tokens"] == 17 and n["total/cost_rollouts"] == 8 + 2


def test_a_state_saved_before_the_cost_counts_loads_with_its_groups_counted_as_tokens_missing() -> None:
    """A state of the release before rollouts were counted per report and tokens at all (its metrics hold none of
    ``gen_tokens``, ``tokens_missing``, ``score_passes``, ``score_tokens``) loads, at a step's boundary and mid-step:
    no tokens were reported then, so every group it generated is ``tokens_missing``, and a step's rollouts were its
    groups x G. A state holding some of the new counts and not the others is corrupt, and refused."""
    import copy

    def run(partial: bool) -> snooze.Scheduler:
        sched = snooze.Scheduler(
            {"d": [{"id": i} for i in range(50)]}, snooze.SchedulerConfig(batch_size=4, group_size=4)
        )
        rng = np.random.default_rng(0)
        for _ in range(3):
            sched.step(lambda c: (rng.random((len(c), 4)) < 0.5).astype(float))
        if partial:
            cands = sched.propose()
            sched.report(cands, (rng.random((len(cands), 4)) < 0.5).astype(float))
        return sched

    for partial in (False, True):
        sched = run(partial)
        old = copy.deepcopy(sched.state_dict())
        metrics = old["meta"]["metrics"]
        for key in ("gen_tokens", "tokens_missing", "score_passes", "score_tokens"):
            del metrics["totals"][key]
        for key in ("gen/rollouts", "gen/tokens", "gen/tokens_missing", "gen/score_passes", "gen/score_tokens"):
            del metrics["scalars"][key]
        fresh = snooze.Scheduler(
            {"d": [{"id": i} for i in range(50)]}, snooze.SchedulerConfig(batch_size=4, group_size=4)
        )
        fresh.load_state_dict(old)
        loaded = fresh.state_dict()["meta"]["metrics"]
        want = sched.state_dict()["meta"]["metrics"]
        assert loaded["totals"] == want["totals"], partial  # no tokens were reported in either: all missing
        assert loaded["scalars"] == want["scalars"], partial
        assert loaded["totals"]["tokens_missing"] == loaded["totals"]["gen_groups"] > 0

    half = copy.deepcopy(run(False).state_dict())
    del half["meta"]["metrics"]["totals"]["score_tokens"]  # one of the four gone: not an older state, a broken one
    with pytest.raises(snooze.StateError):
        snooze.Scheduler(
            {"d": [{"id": i} for i in range(50)]}, snooze.SchedulerConfig(batch_size=4, group_size=4)
        ).load_state_dict(half)
