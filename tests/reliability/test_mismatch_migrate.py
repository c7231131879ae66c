"""Issue 6.3: a state loaded against other data, seed, group size or weights is refused unless the
caller asks to migrate; the migration (``snooze.core._state._migrate``) does what its docstring says."""

from __future__ import annotations

from pathlib import Path

import _driver as D
import numpy as np
import pytest

import snooze

SEED = 4


def _trained(steps: int = 8) -> snooze.Scheduler:
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
    D.drive(sched, steps, [])
    assert sum(t.asleep() for t in sched._parts.memory.tables) > 0
    return sched


def _memory(sched: snooze.Scheduler, name: str) -> dict[int, tuple[int, int, int]]:
    d = sched.names.index(name)
    t, src = sched._parts.memory.tables[d], sched.sources[d]
    return {src.id_of(r): (int(t.counter[r]), int(t.flags[r]), int(t.streak[r])) for r in range(len(src))}


CHANGES = {
    "seed": (lambda: D.datasets(), lambda: D.config(), SEED + 1),
    "group_size": (lambda: D.datasets(), lambda: D.config(group_size=8), SEED),
    "weights": (lambda: D.datasets(), lambda: D.config(weights={"add": 1.0, "rev": 1.0, "mul": 1.0}), SEED),
    "data": (lambda: D.datasets((37, 60, 91)), lambda: D.config(), SEED),
    "reward_range": (lambda: D.datasets(), lambda: D.config(reward_range=(-1.0, 1.0)), SEED),
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_mismatch_is_refused_without_migrate(tmp_path: Path, what: str) -> None:
    data, cfg, seed = CHANGES[what]
    sched = _trained()
    sched.save(tmp_path)
    with pytest.raises(snooze.StateMismatchError) as info:
        snooze.Scheduler.load(tmp_path, data(), config=cfg(), seed=seed)
    assert str(tmp_path) in str(info.value)
    fresh = snooze.Scheduler(data(), cfg(), seed=seed)
    with pytest.raises(snooze.StateMismatchError, match="migrate=True"):
        fresh.load_state_dict(sched.state_dict())
    assert fresh.step_index == 0 and sum(t.asleep() for t in fresh._parts.memory.tables) == 0  # nothing half-loaded


@pytest.mark.parametrize("what", ["seed", "group_size", "weights", "reward_range"])
def test_migrate_same_data_keeps_memory_and_totals(what: str) -> None:
    data, cfg, seed = CHANGES[what]
    sched = _trained()
    sched.propose()  # a step in progress: dropped by the migration
    new = snooze.Scheduler(data(), cfg(), seed=seed)
    new.load_state_dict(sched.state_dict(), migrate=True)
    for name in sched.names:
        assert _memory(new, name) == _memory(sched, name)
    assert new.step_index == sched.step_index and new.next_ticket == sched.next_ticket
    assert new._parts.step_metrics.totals == sched._parts.step_metrics.totals
    assert (
        not new._parts.pending
        and len(new.step_record().ticket) == 0
        and new.round == 0
        and new.room() == new.config.batch_size
    )
    for old_st, new_st in zip(sched._parts.streams, new._parts.streams):
        assert new_st.epoch == old_st.epoch
        assert new_st.cursor == (old_st.cursor if what != "seed" else 0)
    D.drive(new, new.step_index + 3, [])  # and it runs on
    assert new.step_index == sched.step_index + 3


def test_migrate_changed_data_maps_memory_by_id() -> None:
    sched = _trained()
    old_mem = _memory(sched, "rev")
    new_data = D.datasets((37, 60, 91))  # "rev" gains 7 prompts; reorder it too
    rev_ids = np.arange(1000, 1060)[::-1].copy()
    new_data["rev"] = snooze.Source.from_ids("rev", rev_ids)
    new = snooze.Scheduler(new_data, D.config(), seed=SEED)
    with pytest.raises(snooze.StateMismatchError, match="previous_datasets"):
        new.load_state_dict(sched.state_dict(), migrate=True)
    with pytest.raises(snooze.StateMismatchError, match="not the data"):
        new.load_state_dict(
            sched.state_dict(), migrate=True, previous_datasets={"rev": D.datasets((37, 52, 91))["rev"]}
        )
    new.load_state_dict(sched.state_dict(), migrate=True, previous_datasets=D.datasets())
    mem = _memory(new, "rev")
    assert {i: mem[i] for i in old_mem} == old_mem  # every old prompt keeps its memory, wherever its row went
    assert all(mem[i] == (0, 0, 0) for i in range(1053, 1060))  # new prompts start fresh
    assert new._parts.memory.tables[1].asleep() == sched._parts.memory.tables[1].asleep()
    assert _memory(new, "add") == _memory(sched, "add")
    rev = new._parts.streams[1]
    assert (rev.epoch, rev.cursor) == (sched._parts.streams[1].epoch, 0)  # starts over at its epoch
    assert (new._parts.streams[0].epoch, new._parts.streams[0].cursor) == (
        sched._parts.streams[0].epoch,
        sched._parts.streams[0].cursor,
    )


def test_migrate_drops_removed_prompts_and_datasets() -> None:
    sched = _trained()
    smaller = {"add": snooze.Source.from_ids("add", np.arange(0, 20)), "mul": D.datasets()["mul"]}
    cfg = D.config(weights={"add": 1.0, "mul": 3.0})
    new = snooze.Scheduler(smaller, cfg, seed=SEED)
    new.load_state_dict(sched.state_dict(), migrate=True, previous_datasets=D.datasets())
    old_add = _memory(sched, "add")
    assert _memory(new, "add") == {i: old_add[i] for i in range(20)}
    assert _memory(new, "mul") == _memory(sched, "mul")
    D.drive(new, new.step_index + 2, [])


def test_matching_state_with_migrate_is_an_exact_restore() -> None:
    sched = _trained()
    sched.propose()
    new = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
    new.load_state_dict(sched.state_dict(), migrate=True)
    assert D.state_hash(new) == D.state_hash(sched)


def _predictive(seed: int = SEED) -> snooze.Scheduler:
    sched = snooze.Scheduler(D.datasets(), D.config(policy="predictive"), seed=seed)
    D.drive(sched, 8, [])
    assert sched._parts.policy.clock > 0
    return sched


@pytest.mark.parametrize("what", ["seed", "data"])
def test_migrate_carries_the_predictive_policy_state(what: str) -> None:
    """A predictive run migrates like any other (its run-level state was refused as 'corrupt')."""
    sched = _predictive()
    data, seed = (D.datasets((37, 60, 91)), SEED) if what == "data" else (D.datasets(), SEED + 1)
    new = snooze.Scheduler(data, D.config(policy="predictive"), seed=seed)
    new.load_state_dict(sched.state_dict(), migrate=True, previous_datasets=D.datasets())
    assert new._parts.policy.clock == sched._parts.policy.clock and np.array_equal(
        new._parts.policy.rate, sched._parts.policy.rate
    )
    D.drive(new, 2, [])


@pytest.mark.parametrize(("saved", "now"), [("snooze", "predictive"), ("predictive", "snooze")])
def test_a_change_to_or_from_predictive_is_refused_unless_migrate(saved: str, now: str) -> None:
    """Its run-level state is read only by the policy that wrote it: the refusal names both policies (it said
    'the state is corrupt'), changes nothing, and migrate=True carries the prompts' memory over."""
    sched = _predictive() if saved == "predictive" else _trained()
    fresh = snooze.Scheduler(D.datasets(), D.config(policy=now), seed=SEED)
    before = D.state_hash(fresh)
    with pytest.raises(
        snooze.StateMismatchError, match=f"policy '{saved}' \\(saved\\) != '{now}' \\(now\\).*migrate=True"
    ):
        fresh.load_state_dict(sched.state_dict())
    assert D.state_hash(fresh) == before
    fresh.load_state_dict(sched.state_dict(), migrate=True)
    assert _memory(fresh, "add") == _memory(sched, "add") and fresh.step_index == sched.step_index
    assert (
        snooze.Scheduler(D.datasets(), D.config(policy="filter"), seed=SEED).load_state_dict(_trained().state_dict())
        is None
    )
    D.drive(fresh, 2, [])
