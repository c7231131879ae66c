"""Issue 27, items 1, 2, 3, 8 and 13: values the scheduler cannot hold, the round that exhausts a dataset
under quotas, a refused finish_step, and crafted states. Each bad input is the project's error, and a
refused call leaves the whole state as it was (its hash compared)."""

from __future__ import annotations

import logging
import math
import warnings

import numpy as np
import pytest
from _driver import state_hash

import snooze
from snooze.core.policies.snooze import MAX_PERIOD


def _ids(n: int, prefix: str = "p") -> list[dict]:
    return [{"id": f"{prefix}{i}"} for i in range(n)]


def _easy(cands, G: int = 4) -> np.ndarray:
    return np.ones((len(cands), G))


def _signal(cands, G: int = 4) -> np.ndarray:
    return np.tile([1.0, 0.0, 1.0, 0.0], (len(cands), G // 4))


# -- item 1: the int32 snooze counter never wraps -----------------------------------------------------
def test_copies_of_a_prompt_reported_too_easy_at_once_never_wrap_its_counter(tmp_path, caplog) -> None:
    """One prompt issued 4 times in a round, factor 2**30: 4 x 2**30 wrapped to 0 (awake again) and past
    it to negative counters (never drawn again, and the run's own checkpoint refused as corrupt). Now the
    counter holds at its most, 2**31 - 1, with a warning; save and load work."""
    cfg = snooze.SchedulerConfig(
        batch_size=1, gen_batch_size=4, group_size=4, options=snooze.SnoozeOptions(factor=2**30), max_gen_rounds=1
    )
    s = snooze.Scheduler({"d": _ids(1)}, cfg)
    cands = s.propose()
    assert len(cands) == 4  # the one prompt, four encounters (four epochs)
    with caplog.at_level(logging.WARNING, logger="snooze.core.policies.snooze"):
        s.report(cands, _easy(cands))
    assert s._parts.memory.tables[0].counter.tolist() == [2**31 - 1]
    assert "most a snooze counter holds" in caplog.text
    assert s._parts.memory.tables[0].asleep() == 1
    s.save(tmp_path)
    back = snooze.Scheduler.load(tmp_path, {"d": _ids(1)})
    assert back._parts.memory.tables[0].counter.tolist() == [2**31 - 1]


@pytest.mark.parametrize("field", ["factor", "hard_factor", "max"])
@pytest.mark.parametrize("value", [2**31, 2**40, 10**400])
def test_a_period_beyond_the_counter_is_a_config_error(field: str, value: int) -> None:
    """They were accepted and failed at Scheduler(...) with OverflowError (np.int32(2**40); 10**400 in k/(k+1))."""
    with pytest.raises(snooze.ConfigError, match=f"^{field}=.*at most {MAX_PERIOD} encounters.*policy='filter'"):
        snooze.SchedulerConfig(policy="snooze", options={field: value})
    snooze.SchedulerConfig(policy="snooze", options={field: MAX_PERIOD})  # the largest is taken as it is


@pytest.mark.parametrize("skip", ["counter", "history"])
def test_the_largest_period_builds_and_runs(skip: str) -> None:
    cfg = snooze.SchedulerConfig(
        batch_size=2,
        group_size=4,
        options=snooze.SnoozeOptions(factor=MAX_PERIOD, hard=True, skip=skip),
        max_gen_rounds=2,
    )
    s = snooze.Scheduler({"d": _ids(10)}, cfg)
    for _ in range(3):
        s.step(_easy)


# -- item 8: floats whose products overflow -----------------------------------------------------------
@pytest.mark.parametrize("fields", [{"backoff": 1e308}, {"backoff": 1e20}, {"recheck": 1e306}])
def test_a_predictive_period_that_overflows_is_a_config_error(fields: dict) -> None:
    """backoff=1e308 built a config and failed at Scheduler(...) with OverflowError (backoff**16)."""
    with pytest.raises(
        snooze.ConfigError, match=f"^{next(iter(fields))}=.*longest re-look period.*must be a finite number"
    ):
        snooze.SchedulerConfig(policy="predictive", options=fields)  # the error leads with the option given


def test_factor_zero_under_a_huge_backoff_snoozes_nothing() -> None:
    """0 x inf (backoff**k past the largest float) was NaN, cast to int64's minimum: counters wrapped."""
    cfg = snooze.SchedulerConfig(
        batch_size=2, group_size=4, options=snooze.SnoozeOptions(factor=0, backoff=1e300), max_gen_rounds=1
    )
    s = snooze.Scheduler({"d": _ids(4)}, cfg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "invalid value encountered in cast" before the fix
        for _ in range(6):
            s.step(_easy)
    assert s._parts.memory.tables[0].counter.tolist() == [0, 0, 0, 0]


def test_a_huge_backoff_caps_each_period_at_max() -> None:
    cfg = snooze.SchedulerConfig(
        batch_size=1,
        group_size=4,
        options=snooze.SnoozeOptions(factor=3, backoff=1e300, max=MAX_PERIOD),
        max_gen_rounds=1,
    )
    s = snooze.Scheduler({"d": _ids(1)}, cfg)
    s.step(_easy)
    s._parts.memory.tables[0].counter[:] = 0  # wake it: its second too-easy outcome gets 3 x 1e300, capped at max
    s._parts.memory.tables[0].recount()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "overflow encountered in multiply" before the fix
        s.step(_easy)
    assert s._parts.memory.tables[0].counter.tolist() == [MAX_PERIOD]


# -- item 2: the round that exhausts a dataset under quotas is trained on ------------------------------
@pytest.mark.parametrize("carry", [False, True])
def test_quota_mix_trains_the_signal_groups_of_the_round_that_exhausts_a_dataset(carry: bool) -> None:
    """A 2-prompt dataset with one epoch beside a 6-prompt one: its 2 signal groups were generated and
    then discarded (its quota fell to 0 when its stream ran out, before its groups were placed): 8
    generated, 4 trained. Now every generated signal group is trained."""
    cfg = snooze.SchedulerConfig(
        batch_size=4, group_size=4, mix="quota", epochs=1, max_gen_rounds=4, carry_surplus=carry
    )
    s = snooze.Scheduler({"a": _ids(2, "a"), "b": _ids(6, "b")}, cfg)
    trained = {"a": 0, "b": 0}
    while not s.exhausted:
        batch = s.step(_signal)
        for c in batch.candidates:
            trained[c.dataset] += 1
    m = s.metrics()
    assert trained == {"a": 2, "b": 6}
    assert m["total/train_groups"] == m["total/gen_groups"] == 8


# -- item 3: a refused finish_step leaves the state as it was -----------------------------------------
def test_a_refused_finish_step_in_quota_mode_changes_nothing() -> None:
    """on_short='raise' moved surplus into the batch before raising: the retry the message suggests then
    built a batch of 3 'a' groups, breaking a 2/2 quota."""
    cfg = snooze.SchedulerConfig(
        batch_size=4, gen_batch_size=6, group_size=4, mix="quota", on_short="raise", max_gen_rounds=1
    )
    s = snooze.Scheduler({"a": _ids(8, "a"), "b": _ids(8, "b")}, cfg)
    cands = s.propose()
    s.report(cands, np.array([[1.0, 0, 1, 0] if c.dataset == "a" else [1.0] * 4 for c in cands]))
    placed = s.step_record().counts()
    assert (placed["trained"], placed["surplus"]) == (2, 1)
    before = state_hash(s)
    for _ in range(2):  # the retry is refused the same way
        with pytest.raises(snooze.BatchShortError, match="only 2 of batch_size=4"):
            s.finish_step()
        assert state_hash(s) == before


def test_finish_step_raises_only_when_the_surplus_cannot_fill_the_batch() -> None:
    """Starved slots still go to the other datasets' surplus: a batch the surplus fills is not short."""
    cfg = snooze.SchedulerConfig(
        batch_size=4, gen_batch_size=8, group_size=4, mix="quota", on_short="raise", max_gen_rounds=1
    )
    s = snooze.Scheduler({"a": _ids(8, "a"), "b": _ids(8, "b")}, cfg)
    cands = s.propose()
    s.report(cands, np.array([[1.0, 0, 1, 0] if c.dataset == "a" else [1.0] * 4 for c in cands]))
    batch = s.finish_step()
    assert [c.dataset for c in batch.candidates] == ["a"] * 4


# -- item 13: crafted states that pass the checksum -----------------------------------------------------
def _sched() -> snooze.Scheduler:
    return snooze.Scheduler({"a": _ids(4, "a"), "b": _ids(4, "b")}, snooze.SchedulerConfig(batch_size=2, group_size=4))


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda sd: sd["meta"].__setitem__("weights", [1e308, 1e308]), "weights.*finite"),
        (lambda sd: sd["meta"].__setitem__("next_ticket", 2**63), "next_ticket"),
        (lambda sd: sd["meta"].__setitem__("next_ticket", 2**70), "next_ticket"),
    ],
    ids=["weights-sum-overflows", "ticket-past-int64", "ticket-far-past-int64"],
)
def test_a_crafted_state_is_refused_at_load_not_at_the_next_step(edit, match) -> None:
    """They loaded, and the next step failed: NaN mix shares from an infinite weight sum, OverflowError
    issuing ticket 2**63."""
    src = _sched()
    src.step(_signal)
    sd = src.state_dict()
    edit(sd)
    dst = _sched()
    before = state_hash(dst)
    with pytest.raises(snooze.StateError, match=match):
        dst.load_state_dict(sd)
    assert state_hash(dst) == before
    dst.step(_signal)


def test_the_last_ticket_is_issued_and_the_next_one_refused() -> None:
    s = _sched()
    sd = s.state_dict()
    sd["meta"]["next_ticket"] = 2**63 - 3
    s.load_state_dict(sd)
    cands = s.propose(2)
    assert [c.ticket for c in cands] == [2**63 - 3, 2**63 - 2]
    before = state_hash(s)
    with pytest.raises(snooze.StateError, match="ticket"):
        s.propose(2)
    assert state_hash(s) == before
    assert math.isfinite(float(s.next_ticket))
