"""The multi-process layout of ``SnoozeGRPOTrainer`` rounds, and the rank check (pure; no TRL, no torch)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import snooze
from snooze.integrations.trl import _dist as dist


@pytest.mark.parametrize(
    "groups, G, world, per_rank, pad",
    [
        (8, 8, 8, 8, 0),  # one group a rank
        (4, 16, 8, 8, 0),  # each group spans two ranks, as TRL's own layout with per_device_train_batch_size=8
        (3, 4, 2, 6, 0),  # 12 rows: the middle group spans the ranks
        (3, 3, 2, 6, 1),  # 9 rows -> 12 (lcm(2, 3) = 6): one inert group
        (5, 4, 8, 3, 1),  # 20 rows -> 24 (lcm(8, 4) = 8): one inert group, 3 rows a rank
        (1, 8, 1, 8, 0),  # one process: the round as it is
    ],
)
def test_round_layout_by_hand(groups: int, G: int, world: int, per_rank: int, pad: int) -> None:
    layout = dist.round_layout(groups, G, world)
    assert (layout.rows_per_rank, layout.pad_groups) == (per_rank, pad)


def test_candidates_are_dealt_to_the_ranks_in_turn() -> None:
    layout = dist.round_layout(3, 4, 2)  # slots: rows 0-3 | 4-7 | 8-11; rank 0 holds rows 0-5, rank 1 rows 6-11
    assert layout.slots.tolist() == [0, 2, 1]  # first slot of rank 0, first of rank 1, second of rank 0
    assert [layout.spread(i).tolist() for i in range(3)] == [[4, 0], [0, 4], [2, 2]]  # candidate 2 spans
    assert [layout.local(2, r) for r in range(2)] == [(4, 6), (0, 2)]
    assert layout.local(1, 0) == (0, 0)  # nothing of candidate 1 on rank 0
    assert layout.candidates_of(1).tolist() == [2, 2, 1, 1, 1, 1]
    assert dist.round_layout(3, 3, 2).candidates_of(1).tolist() == [1, 1, 1, -1, -1, -1]  # the pad goes last
    per_slot = np.arange(12.0).reshape(3, 4)  # TRL's gathered rewards, one row per slot
    assert layout.group_rewards(per_slot).tolist() == [per_slot[0].tolist(), per_slot[2].tolist(), per_slot[1].tolist()]


def test_one_process_keeps_issue_order() -> None:
    layout = dist.round_layout(5, 4, 1)
    assert layout.slots.tolist() == [0, 1, 2, 3, 4] and layout.pad_groups == 0
    assert layout.candidates_of(0).tolist() == np.repeat(np.arange(5), 4).tolist()


@given(st.integers(1, 40), st.integers(2, 17), st.integers(1, 9))
def test_every_row_is_placed_once_and_ranks_are_equal(groups: int, G: int, world: int) -> None:
    layout = dist.round_layout(groups, G, world)
    assert layout.rows_per_rank * world == (groups + layout.pad_groups) * G  # whole groups, equal ranks
    assert 0 <= layout.pad_groups * G < np.lcm(world, G)  # the least padding that does both
    assert sorted(layout.slots.tolist()) == list(range(groups + layout.pad_groups))  # each slot once
    rows = np.concatenate([layout.candidates_of(r) for r in range(world)])  # what the ranks roll out, gathered
    assert (rows[rows >= 0].reshape(-1, G) == rows[rows >= 0].reshape(-1, G)[:, :1]).all()  # G copies a slot
    assert np.bincount(rows[rows >= 0], minlength=groups).tolist() == [G] * groups
    if layout.rows_per_rank % G == 0:  # whole groups: any first k candidates are spread as evenly as can be
        home = layout.slots * G // layout.rows_per_rank  # the rank of each candidate's group
        for k in range(1, groups + 1):
            per_rank = np.bincount(home[:k], minlength=world)
            assert per_rank.max() - per_rank.min() <= 1
    for i in range(groups):
        spread = layout.spread(i)
        assert spread.sum() == G and (spread > 0).sum() <= -(-G // layout.rows_per_rank) + 1
        assert [hi - lo for lo, hi in (layout.local(i, r) for r in range(world))] == spread.tolist()
    if groups % world == 0:  # the usual case: the round splits evenly, every group lies on one rank
        assert all((layout.spread(i) > 0).sum() == 1 for i in range(groups))


def test_pad_rows_to_by_hand() -> None:
    assert dist.pad_rows_to(np.array([6, 2]), 2, floor=4) == 6
    assert dist.pad_rows_to(np.array([5, 2]), 2, floor=4) == 6  # rounded up to the accumulation split
    assert dist.pad_rows_to(np.array([0, 0]), 3, floor=4) == 6  # nothing kept: one group's worth, rounded up


def test_round_layout_rejects_nonsense() -> None:
    with pytest.raises(snooze.IntegrationError, match="must be >= 1"):
        dist.round_layout(0, 4, 2)


def test_check_agree_names_the_place_and_the_field() -> None:
    fields = ("step", "issued", "reports")
    dist.check_agree(np.array([3, 12, 7, 3, 12, 7]), fields, "after step 2")  # equal: nothing raised
    with pytest.raises(snooze.IntegrationError, match=r"^after step 2: .*issued: rank 0 12 vs rank 2 13"):
        dist.check_agree(np.array([[3, 12, 7], [3, 12, 7], [3, 13, 7]]), fields, "after step 2")


def test_digests_follow_the_scheduler() -> None:
    records = [{"id": f"p{i}", "prompt": "x"} for i in range(6)]
    cfg = snooze.SchedulerConfig(batch_size=2, group_size=2, policy="snooze")
    a, b = snooze.Scheduler({"d": records}, cfg, seed=0), snooze.Scheduler({"d": records}, cfg, seed=0)
    assert dist.start_digest(a) == dist.start_digest(b)
    assert dist.start_digest(a) != dist.start_digest(snooze.Scheduler({"d": records[::-1]}, cfg, seed=0))
    ca, cb = a.propose(), b.propose()
    assert dist.round_digest(a, ca) == dist.round_digest(b, cb)
    rewards = np.array([[1.0, 1.0], [0.0, 1.0]])
    a.report(ca, rewards)
    b.report(cb, rewards)
    a.finish_step(), b.finish_step()
    crc = dist.report_crc(ca, rewards, 0)
    assert dist.step_digest(a, crc) == dist.step_digest(b, dist.report_crc(cb, rewards, 0))
    assert crc != dist.report_crc(ca, rewards[::-1], 0)  # the same prompts with other rewards differ
