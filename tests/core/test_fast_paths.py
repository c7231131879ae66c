"""The hot paths' shortcuts give exactly what the plain computations give.

Each shortcut (the reward check by min and max, classification without a std, a report whose prompts
are distinct updated without counting each prompt's groups, one pass over all datasets' prompt memory,
a report found as a run of pending tickets, cached interleaving) is checked against the straightforward
version on random inputs, including the inputs that take the slow branch.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import snooze
from snooze.core._memory import PromptMemory
from snooze.core._mixing import interleave, interleave_order
from snooze.core._pending import PendingSet
from snooze.core.classify import FLAT, SIGNAL, TOO_EASY, TOO_HARD
from snooze.core.policies import Context, Report, make_policy


def plain_classify(r: np.ndarray, lo: float, hi: float, easy: float, hard: float, tol: float) -> np.ndarray:
    norm = (r - lo) / (hi - lo)
    out = np.full(r.shape[0], FLAT)
    out[norm.mean(axis=1) >= easy] = TOO_EASY
    out[norm.mean(axis=1) <= hard] = TOO_HARD
    out[r.std(axis=1) > tol * np.maximum(1.0, np.abs(r).max(axis=1))] = SIGNAL  # the rewards' size, not the range's
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), G=st.integers(2, 16), scale=st.sampled_from([0.0, 1e-7, 1e-6, 3e-6, 1e-5, 1.0]))
def test_classify_matches_the_std_rule(seed, G, scale):
    rng = np.random.default_rng(seed)
    base = rng.choice([0.0, 0.5, 1.0 - 4e-5, 2.0], size=(64, 1))
    r = np.clip(base + scale * rng.random((64, G)) * (rng.random((64, 1)) < 0.7), 0.0, 2.0)
    args = (0.0, 2.0, 0.99, 0.01, 1e-6)
    assert snooze.classify_groups(r, args[:2], *args[2:]).tolist() == plain_classify(r, *args).tolist()


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.sampled_from([0.0, 0.5, 1.0, -1e-9, 1.0 + 1e-9, np.nan, np.inf, -np.inf, 2.0]), min_size=0, max_size=12
    ),
    seed=st.integers(0, 2**16),
)
def test_reward_check_by_min_and_max_equals_the_elementwise_rule(values, seed):
    rng = np.random.default_rng(seed)
    r = rng.choice([0.0, 0.25, 1.0], size=(6, 2))
    flat = r.reshape(-1)
    flat[rng.permutation(flat.shape[0])[: len(values)]] = values[: flat.shape[0]]
    plain_bad = ~np.isfinite(r) | (r < 0.0) | (r > 1.0)
    if plain_bad.any():
        with pytest.raises(snooze.RewardError, match=f"{int(plain_bad.sum())} bad value"):
            snooze.check_rewards(r, 6, 2, (0.0, 1.0))
    else:
        assert snooze.check_rewards(r, 6, 2, (0.0, 1.0)).tolist() == r.tolist()


def test_classify_tiny_spread_needs_the_exact_std():
    # G=8, tol=1e-6: both ranges are below tol * sqrt(2G) = 4e-6, so only the exact std decides.
    # Half at each end of a 3.5e-6 range: std 1.75e-6 > tol (signal). One outlier 2.5e-6 away:
    # std 2.5e-6 * sqrt(7) / 8 = 0.83e-6 <= tol (no signal).
    half = np.array([[0.5] * 4 + [0.5 + 3.5e-6] * 4])
    one = np.array([[0.5] * 7 + [0.5 + 2.5e-6]])
    assert snooze.classify_groups(half).tolist() == [SIGNAL]
    assert snooze.classify_groups(one).tolist() == [FLAT]


def _memory(sizes: list[int]) -> PromptMemory:
    return PromptMemory(sizes)


def _randomise(memory: PromptMemory, rng: np.random.Generator) -> PromptMemory:
    n = memory.columns["counter"].shape[0]
    memory.columns["counter"][:] = rng.integers(0, 3, n) * (rng.random(n) < 0.4)
    memory.columns["flags"][:] = rng.integers(0, 8, n).astype(np.uint8)
    memory.columns["streak"][:] = rng.integers(0, 4, n).astype(np.uint8)
    for t in memory.tables:
        t.recount()
    return memory


def _copy(memory: PromptMemory) -> PromptMemory:
    out = PromptMemory(memory.sizes)
    for name, column in memory.columns.items():
        out.columns[name][:] = column
    for t in out.tables:
        t.recount()
    return out


class _General(Report):
    """A report that always takes the general path (each prompt's groups counted with np.unique)."""

    repeated = True


def _apply(memory: PromptMemory, cfg, ds, rows, outcomes, report=Report) -> dict[str, int]:
    """One report through the policy, as Scheduler.report does it; the counts it adds to the metrics."""
    rewards = np.zeros((rows.shape[0], 2))
    watched = memory.watch(memory.offsets[ds] + rows)
    context = Context(tuple(f"d{d}" for d in range(len(memory.sizes))), tuple(memory.sizes), 2, 0)
    policy = make_policy(cfg.policy, cfg.options, context)
    changes = policy.report(memory, report(ds, memory.offsets[ds] + rows, outcomes, rewards, (0.0, 1.0)))
    memory.settle(watched)
    if changes is None:
        return {"new": 0, "regressed": 0, "retired": 0}
    return {k: int(np.count_nonzero(getattr(changes, k))) for k in ("new", "regressed", "retired")}


CONFIGS = [
    snooze.SchedulerConfig(policy="snooze", options=snooze.SnoozeOptions(factor=3)),
    snooze.SchedulerConfig(policy="snooze", options=snooze.SnoozeOptions(factor=2, backoff=2.0, max=9)),
    snooze.SchedulerConfig(policy="snooze", options=snooze.SnoozeOptions(factor=2, hard=True, hard_factor=1)),
    snooze.SchedulerConfig(policy="snooze", options=snooze.SnoozeOptions(factor=0)),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=["plain", "backoff", "hard", "factor0"])
@pytest.mark.parametrize("seed", range(20))
def test_distinct_rows_fast_path_equals_the_general_update(cfg, seed):
    rng = np.random.default_rng(seed)
    n = 50
    fast = _randomise(_memory([n]), rng)
    slow = _copy(fast)
    rows = rng.permutation(n)[: rng.integers(1, n)]
    outcomes = rng.integers(0, 4, rows.shape[0]).astype(np.int8)
    ds = np.zeros(rows.shape[0], dtype=np.int64)
    got = _apply(fast, cfg, ds, rows, outcomes)
    want = _apply(slow, cfg, ds, rows, outcomes, report=_General)
    for name in ("counter", "flags", "streak"):
        assert fast.columns[name].tolist() == slow.columns[name].tolist(), name
    assert got == want
    t, u = fast.tables[0], slow.tables[0]
    assert (t.n_asleep, t.n_retired, t.n_blocked) == (u.n_asleep, u.n_retired, u.n_blocked)


@pytest.mark.parametrize("policy", ["snooze", "filter", "dynamic_sampling"])
@pytest.mark.parametrize("seed", range(15))
def test_one_pass_over_all_datasets_equals_one_table_at_a_time(policy, seed):
    rng = np.random.default_rng(seed)
    sizes = [7, 1, 12]
    cfg = snooze.SchedulerConfig(policy=policy, options={"factor": 2} if policy == "snooze" else None)
    memory = _randomise(_memory(sizes), rng)
    alone = [_memory([n]) for n in sizes]
    for d, single in enumerate(alone):
        for name in single.columns:
            single.columns[name][:] = memory.tables[d].columns[name]
        single.tables[0].recount()
    ds = rng.integers(0, 3, 30)
    rows = np.array([rng.integers(0, sizes[d]) for d in ds])  # repeats included: the general branch
    outcomes = rng.integers(0, 4, 30).astype(np.int8)
    got = _apply(memory, cfg, ds, rows, outcomes)
    want = {"new": 0, "regressed": 0, "retired": 0}
    for d in range(3):
        mine = ds == d
        part = _apply(alone[d], cfg, np.zeros(int(mine.sum()), dtype=np.int64), rows[mine], outcomes[mine])
        want = {k: want[k] + part[k] for k in want}
    assert got == want
    for mine, theirs in zip(memory.tables, (m.tables[0] for m in alone)):
        for name in ("counter", "flags", "streak"):
            assert getattr(mine, name).tolist() == getattr(theirs, name).tolist()
        assert (mine.n_asleep, mine.n_retired, mine.n_blocked) == (theirs.n_asleep, theirs.n_retired, theirs.n_blocked)
        before = (mine.n_asleep, mine.n_retired, mine.n_blocked)
        mine.recount()  # the cached totals were kept right, not just equal by accident
        assert (mine.n_asleep, mine.n_retired, mine.n_blocked) == before


def test_a_prompt_reported_twice_counts_once():
    m = _memory([4])
    cfg = snooze.SchedulerConfig(policy="snooze", options=snooze.SnoozeOptions(factor=3))
    ds = np.zeros(3, dtype=np.int64)
    counts = _apply(m, cfg, ds, np.array([2, 2, 1]), np.array([TOO_EASY, TOO_EASY, SIGNAL], dtype=np.int8))
    t = m.tables[0]
    assert counts == {"new": 1, "regressed": 0, "retired": 0}
    assert t.counter.tolist() == [0, 0, 6, 0] and t.streak[2] == 2 and t.asleep() == 1
    f = _memory([4])
    counts = _apply(
        f,
        snooze.SchedulerConfig(policy="filter"),
        ds[:2],
        np.array([3, 3]),
        np.array([SIGNAL, TOO_EASY], dtype=np.int8),
    )
    assert counts["retired"] == 1 and f.tables[0].retired() == 1 and f.tables[0].n_blocked == 1


@settings(max_examples=80, deadline=None)
@given(
    n=st.integers(0, 30),
    picks=st.lists(st.integers(0, 40), max_size=12),
    start=st.integers(0, 30),
    run=st.integers(0, 12),
)
def test_pending_find_and_pop_match_a_dict(n, picks, start, run):
    p = PendingSet()
    p.add(np.arange(n) * 2, np.arange(n) % 3, np.arange(n) + 100)
    ref = {2 * i: (i % 3, i + 100) for i in range(n)}
    for tickets in (np.array(picks, dtype=np.int64), np.arange(start, start + run) * 2):  # scattered, then a run
        found = p.find(tickets)
        assert [bool(h >= 0) for h in found] == [int(t) in ref for t in tickets]
        if all(int(t) in ref for t in tickets) and len(set(tickets.tolist())) == tickets.shape[0]:
            ds, row = p.pop(found)
            assert list(zip(ds.tolist(), row.tolist())) == [ref.pop(int(t)) for t in tickets]
        assert p.ticket.tolist() == sorted(ref) and p.row.tolist() == [ref[t][1] for t in sorted(ref)]


@given(counts=st.lists(st.integers(0, 9), min_size=1, max_size=5))
def test_interleave_order_places_each_datasets_items_in_order(counts):
    order = interleave_order(np.array(counts))
    owners = interleave(np.array(counts))
    grouped_owner = np.repeat(np.arange(len(counts)), counts)
    assert grouped_owner[order].tolist() == owners.tolist()
    for d in range(len(counts)):  # each dataset's items keep their own order
        mine = order[owners == d]
        assert mine.tolist() == sorted(mine.tolist())
    assert not order.flags.writeable  # cached: callers cannot corrupt the cache
