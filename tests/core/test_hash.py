"""The scheduler's one stateless hash (snooze.core._hash; issue 49 build 1): the audit's picks, the rounds'
budgets and the skip rules' coin flips are one function's streams, each equal, bit for bit, to the plain
construction it was before the two hashes were made one (so every run replays as before), and apart from
each other."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from snooze.core._audit import audit_budget
from snooze.core._hash import audit_uniform, encounter_uniform, stable_uniform

M64 = 2**64 - 1


def _fin(x: int, shifts: tuple[int, int, int]) -> int:
    a, b, c = shifts
    x = ((x ^ (x >> a)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> b)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> c)


def _unit(h: int) -> float:
    return (h >> 11) * 2.0**-53


def _audit_ref(seed: int, key: int, epoch: int, row: int) -> float:
    """The audit's construction in Python integers: splitmix64's finaliser chained over seed (salted), key, epoch."""
    sm = (30, 27, 31)
    base = _fin(_fin((seed % 2**64) ^ 0x5A0D17A0D17C0FFE, sm) ^ (key % 2**64), sm)
    base = _fin(base ^ (epoch % 2**64), sm)
    return _unit(_fin(base ^ row, sm))


def _skip_ref(seed: int, key: int, epoch: int, row: int) -> float:
    """The skip rules' construction in Python integers: one linear combination, one finaliser (31, 31, 29)."""
    base = ((seed * 0x9E3779B1 + key) * 0x85EBCA77 + epoch * 0xC2B2AE3D) & M64
    return _unit(_fin(row ^ base, (31, 31, 29)))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**40),
    key=st.integers(0, 2**32 - 1),
    epoch=st.integers(0, 10**6),
    rows=st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=20),
)
def test_each_stream_is_its_plain_construction_bit_for_bit(seed: int, key: int, epoch: int, rows: list[int]) -> None:
    arr = np.array(rows, dtype=np.int64)
    assert audit_uniform(seed, key, epoch, arr).tolist() == [_audit_ref(seed, key, epoch, r) for r in rows]
    assert encounter_uniform(seed, key, epoch, arr).tolist() == [_skip_ref(seed, key, epoch, r) for r in rows]
    assert stable_uniform(seed, key, epoch, arr, "audit").tolist() == audit_uniform(seed, key, epoch, arr).tolist()
    budget = stable_uniform(seed, key, epoch, arr, "budget").tolist()
    assert budget == [_audit_ref(seed, 2**40 + 0xB0D6E7, epoch, r) for r in rows]  # its own key, whatever key says


def test_the_streams_are_uniform_and_apart() -> None:
    """Over 20,000 encounters each stream is uniform (every tenth of [0, 1) within 5 standard deviations) and
    the audit's numbers do not follow the skip rules' (correlation within 5 / sqrt(n))."""
    rows = np.arange(20_000)
    a, s = audit_uniform(7, 123, 2, rows), encounter_uniform(7, 123, 2, rows)
    for u in (a, s):
        assert ((u >= 0) & (u < 1)).all()
        counts = np.bincount((u * 10).astype(int), minlength=10)
        assert np.abs(counts - 2000).max() < 5 * np.sqrt(20_000 * 0.1 * 0.9)
    assert abs(np.corrcoef(a, s)[0, 1]) < 5 / np.sqrt(rows.size)


def test_a_rounds_budget_is_its_share_rounded_at_random() -> None:
    """``share x n`` rounded down or up, up with probability its fraction (over 4,000 rounds, within 5 sd)."""
    budgets = np.array([audit_budget(0.05, 30, 3, step, 1) for step in range(4000)])
    assert set(budgets.tolist()) == {1, 2}
    assert abs((budgets == 2).mean() - 0.5) < 5 * np.sqrt(0.25 / 4000)
    assert audit_budget(0.0, 30, 3, 0, 1) == 0
