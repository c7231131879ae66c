"""The hot paths' shortcuts give exactly what the plain computations give.

Each shortcut (classification without a std, one pass over all datasets' tables, a report found as
a run of pending tickets, cached interleaving) is checked against the straightforward version on
random inputs, including the inputs that take the slow branch.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import snooze
from snooze.core.classify import FLAT, SIGNAL, TOO_EASY, TOO_HARD
from snooze.core.mixing import interleave, interleave_order
from snooze.core.pending import PendingSet
from snooze.core.prompts import PromptMemory, PromptTable, _apply_snooze_repeated, apply_outcomes


def plain_classify(r: np.ndarray, lo: float, hi: float, easy: float, hard: float, tol: float) -> np.ndarray:
    norm = (r - lo) / (hi - lo)
    out = np.full(r.shape[0], FLAT)
    out[norm.mean(axis=1) >= easy] = TOO_EASY
    out[norm.mean(axis=1) <= hard] = TOO_HARD
    out[norm.std(axis=1) > tol] = SIGNAL
    return out


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**16), G=st.integers(2, 16), scale=st.sampled_from([0.0, 1e-7, 1e-6, 3e-6, 1e-5, 1.0]))
def test_classify_matches_the_std_rule(seed, G, scale):
    rng = np.random.default_rng(seed)
    base = rng.choice([0.0, 0.5, 1.0 - 4e-5, 2.0], size=(64, 1))
    r = np.clip(base + scale * rng.random((64, G)) * (rng.random((64, 1)) < 0.7), 0.0, 2.0)
    args = (0.0, 2.0, 0.99, 0.01, 1e-6)
    assert snooze.classify_groups(r, args[:2], *args[2:]).tolist() == plain_classify(r, *args).tolist()


def test_classify_tiny_spread_needs_the_exact_std():
    # G=8, tol=1e-6: both ranges are below tol * sqrt(2G) = 4e-6, so only the exact std decides.
    # Half at each end of a 3.5e-6 range: std 1.75e-6 > tol (signal). One outlier 2.5e-6 away:
    # std 2.5e-6 * sqrt(7) / 8 = 0.83e-6 <= tol (no signal).
    half = np.array([[0.5] * 4 + [0.5 + 3.5e-6] * 4])
    one = np.array([[0.5] * 7 + [0.5 + 2.5e-6]])
    assert snooze.classify_groups(half).tolist() == [SIGNAL]
    assert snooze.classify_groups(one).tolist() == [FLAT]


def _random_table(rng: np.random.Generator, n: int) -> PromptTable:
    t = PromptTable(n)
    t.counter[:] = rng.integers(0, 3, n) * (rng.random(n) < 0.4)
    t.flags[:] = rng.integers(0, 8, n).astype(np.uint8)
    t.streak[:] = rng.integers(0, 4, n).astype(np.uint8)
    t.recount()
    return t


def _copy(t: PromptTable) -> PromptTable:
    out = PromptTable(0)
    out.counter, out.flags, out.streak = t.counter.copy(), t.flags.copy(), t.streak.copy()
    out.recount()
    return out


CONFIGS = [
    snooze.SchedulerConfig(policy="snooze", snooze_factor=3),
    snooze.SchedulerConfig(policy="snooze", snooze_factor=2, backoff=2.0, max_snooze=9),
    snooze.SchedulerConfig(policy="snooze", snooze_factor=2, snooze_hard=True, hard_snooze_factor=1),
    snooze.SchedulerConfig(policy="snooze", snooze_factor=0),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=["plain", "backoff", "hard", "factor0"])
@pytest.mark.parametrize("seed", range(20))
def test_distinct_rows_fast_path_equals_the_general_update(cfg, seed):
    rng = np.random.default_rng(seed)
    n = 50
    fast, slow = _random_table(rng, n), None
    slow = _copy(fast)
    rows = rng.permutation(n)[: rng.integers(1, n)]
    outcomes = rng.integers(0, 4, rows.shape[0]).astype(np.int8)
    got = apply_outcomes(fast, rows, outcomes, cfg)
    want = _apply_snooze_repeated(slow, rows, outcomes == TOO_EASY, outcomes == TOO_HARD, cfg)
    for name in ("counter", "flags", "streak"):
        assert getattr(fast, name).tolist() == getattr(slow, name).tolist(), name
    for a, b in zip(got, want):
        assert a.tolist() == b.tolist()


@pytest.mark.parametrize("policy", ["snooze", "filter", "dynamic_sampling"])
@pytest.mark.parametrize("seed", range(15))
def test_one_pass_over_all_datasets_equals_one_table_at_a_time(policy, seed):
    rng = np.random.default_rng(seed)
    sizes = [7, 1, 12]
    cfg = snooze.SchedulerConfig(policy=policy, snooze_factor=2)
    memory = PromptMemory(sizes)
    alone = [_random_table(rng, n) for n in sizes]
    memory.install(alone)
    alone = [_copy(t) for t in alone]
    ds = rng.integers(0, 3, 30)
    rows = np.array([rng.integers(0, sizes[d]) for d in ds])  # repeats included: the add.at branch
    outcomes = rng.integers(0, 4, 30).astype(np.int8)
    got = memory.apply(ds, rows, outcomes, cfg)
    want = {"new": 0, "regressed": 0, "retired": 0}
    for d in range(3):
        part = alone[d].apply(rows[ds == d], outcomes[ds == d], cfg)
        want = {k: want[k] + part[k] for k in want}
    assert got == want
    for mine, theirs in zip(memory.tables, alone):
        for name in ("counter", "flags", "streak"):
            assert getattr(mine, name).tolist() == getattr(theirs, name).tolist()
        assert (mine.n_asleep, mine.n_retired, mine.n_blocked) == (theirs.n_asleep, theirs.n_retired, theirs.n_blocked)
        before = (mine.n_asleep, mine.n_retired, mine.n_blocked)
        mine.recount()  # the cached totals were kept right, not just equal by accident
        assert (mine.n_asleep, mine.n_retired, mine.n_blocked) == before


def test_a_prompt_reported_twice_counts_once():
    t = PromptTable(4)
    cfg = snooze.SchedulerConfig(policy="snooze", snooze_factor=3)
    counts = t.apply(np.array([2, 2, 1]), np.array([TOO_EASY, TOO_EASY, SIGNAL], dtype=np.int8), cfg)
    assert counts == {"new": 1, "regressed": 0, "retired": 0}
    assert t.counter.tolist() == [0, 0, 6, 0] and t.streak[2] == 2 and t.asleep() == 1
    f = PromptTable(4)
    counts = f.apply(
        np.array([3, 3]), np.array([SIGNAL, TOO_EASY], dtype=np.int8), snooze.SchedulerConfig(policy="filter")
    )
    assert counts["retired"] == 1 and f.retired() == 1 and f.n_blocked == 1


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
        hits = np.arange(tickets.shape[0]) if isinstance(found, slice) else found
        assert [(h >= 0) if not isinstance(found, slice) else True for h in hits] == [int(t) in ref for t in tickets]
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
