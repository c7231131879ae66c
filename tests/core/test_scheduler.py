"""The scheduler as its users drive it: the step loop, what propose/report/cancel accept, one count each,
and a state that is its components' states, loaded all or nothing."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from _driver import state_hash
from helpers_core import records, rewards_for

import snooze


def _sched(options: snooze.SnoozeOptions | None = None, **cfg) -> snooze.Scheduler:
    """``policy="snooze"``, factor 2 unless ``options`` say otherwise."""
    kinds = ["signal", "easy", "hard", "signal", "easy", "flat", "signal", "easy", "signal"]
    options = snooze.SnoozeOptions(factor=2) if options is None else options
    config = snooze.SchedulerConfig(batch_size=3, group_size=4, options=options, **cfg)
    return snooze.Scheduler({"a": records(kinds, "a"), "b": records(kinds[::-1], "b")}, config, seed=2)


def test_step_is_exactly_the_loop_by_hand() -> None:
    auto, hand = _sched(), _sched()
    for _ in range(6):
        got = auto.step(rewards_for)
        while not hand.batch_full and hand.round < hand.config.max_gen_rounds:
            cands = hand.propose()
            if not cands:
                break
            hand.report(cands, rewards_for(cands))
        want = hand.finish_step()
        assert [c.key for c in got.candidates] == [c.key for c in want.candidates] and got.metrics == want.metrics
    assert state_hash(auto) == state_hash(hand)


def test_round_and_step_index_are_the_metrics_counts() -> None:
    s = _sched()
    s.propose()
    s.propose(2)
    assert s.round == 2
    batch = s.finish_step()
    assert (s.round, s.step_index, batch.step) == (0, 1, 0)
    assert (
        batch.metrics["gen/rounds"] == 2 and batch.metrics["total/steps"] == 1 == s._parts.step_metrics.totals["steps"]
    )


def test_the_step_batch_is_asked_not_read_the_old_names_are_gone() -> None:
    s = _sched()
    for old in ("batch", "surplus", "padding", "parts", "counts", "zero", "mix", "memory"):
        assert not hasattr(s, old), old
    cands = s.propose()
    s.report(cands, rewards_for(cands))
    record = s.step_record()
    assert record.tickets("trained").tolist() == cands.ticket[s.in_batch(cands)].tolist()
    assert s.room() == 3 - len(record.tickets("trained")) and s.wants_round() == (s.room() > 0)


def test_a_seed_that_is_not_an_integer_at_least_0_is_refused() -> None:
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(snooze.ConfigError, match="must be an integer >= 0"):
            snooze.Scheduler({"a": records(["signal"], "a")}, seed=bad)
    assert snooze.Scheduler({"a": records(["signal"], "a")}, seed=np.int64(3)).seed == 3


def test_propose_zero_is_no_round_and_bad_n_is_refused() -> None:
    s = _sched()
    before = state_hash(s)
    empty = s.propose(0)
    assert len(empty) == 0 and isinstance(empty, snooze.Candidates) and state_hash(s) == before
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(snooze.ConfigError, match="n must be an integer >= 0"):
            s.propose(bad)
    assert state_hash(s) == before


def test_bad_reports_record_nothing() -> None:
    s = _sched()
    cands = s.propose()
    other = _sched().propose()  # another scheduler's, with another run id
    forged = snooze.Candidates(s.sources, cands.ds[:1].copy(), cands.row[:1].copy(), cands.ticket[:1] + 1000, s.run_id)
    before = state_hash(s)
    for report, rewards, match in [
        ([cands[0], "x"], np.zeros((2, 4)), "item 1 of the report is a str"),
        (other[:1], np.zeros((1, 4)), "issued by another scheduler"),
        (forged, np.zeros((1, 4)), "was never issued"),
        (cands[:1], np.full((1, 4), np.nan), "not finite"),
        ([cands[0], cands[0]], np.zeros((2, 4)), "appears 2 times"),
    ]:
        with pytest.raises((snooze.ReportError, snooze.RewardError), match=match):
            s.report(report, rewards)
        assert state_hash(s) == before
    s.report(cands[:1], rewards_for(cands[:1]))
    with pytest.raises(snooze.ReportError, match="already reported"):
        s.report(cands[:1], rewards_for(cands[:1]))


def test_cancel_withdraws_candidates_and_counts_them() -> None:
    s = _sched()
    cands = s.propose()
    assert s.cancel(cands[1:]) == len(cands) - 1
    assert [c.ticket for c in s.pending_candidates()] == [cands[0].ticket]
    s.report(cands[:1], rewards_for(cands[:1]))
    assert s.finish_step().metrics["gen/cancelled"] == len(cands) - 1


def test_the_state_is_the_components_states_in_format_1() -> None:
    s = _sched(snooze.SnoozeOptions(factor=2, skip="history"), mix="quota")
    s.step(rewards_for)
    s.propose()
    state = s.state_dict()
    assert set(state["meta"]) == {
        "format",
        "version",
        "seed",
        "config",
        "weights",
        "next_ticket",
        "run_id",
        "drawn",
        "metrics",
        "pending_audit",
        "step_batch",
        "datasets",
    }
    columns = {f"ds{d}.{c}" for d in (0, 1) for c in ("counter", "flags", "streak", "history")}
    step = {f"step.{c}" for c in ("ds", "row", "ticket", "outcome", "rewards", "audit", "carried_in", "place", "slot")}
    assert set(state["arrays"]) == columns | step | {"pending", "pending_step"}
    assert state["meta"]["datasets"][1] == {
        "name": "b",
        "size": 9,
        "fingerprint": s.sources[1].fingerprint,
        **s._parts.streams[1].state_dict(),
    }
    assert state["meta"]["next_ticket"] == s._parts.pending.next_ticket and np.array_equal(
        state["arrays"]["pending"], s._parts.pending.state_dict()["pending"]
    )
    assert state["arrays"]["pending_step"].tolist() == [1] * len(
        s.pending_candidates()
    )  # drawn at step 1, after one step
    state["arrays"]["ds0.counter"][:] = 7  # a snapshot: changing it does not change the scheduler
    assert not (s._parts.memory.tables[0].counter == 7).all()


def test_a_load_refused_by_any_component_leaves_every_component_as_it_was() -> None:
    s = _sched()
    for _ in range(3):
        s.step(rewards_for)
    cands = s.propose()
    s.report(cands, rewards_for(cands))  # mid-step: the batch holds groups
    good = s.state_dict()
    assert (good["arrays"]["step.slot"] >= 0).any()
    target = _sched()
    target.step(rewards_for)
    before = state_hash(target)
    for damage in (
        lambda st: st["meta"]["metrics"]["totals"].pop("rollouts"),  # the last component to load
        lambda st: st["meta"]["datasets"][1].update(cursor=99),  # a stream
        lambda st: st["arrays"].update({"step.row": st["arrays"]["step.row"] + 50}),  # rows beyond the data
    ):
        bad = copy.deepcopy(good)
        damage(bad)
        with pytest.raises(snooze.StateError):
            target.load_state_dict(bad)
        assert state_hash(target) == before
    target.load_state_dict(good)
    assert state_hash(target) == state_hash(s)


def test_candidates_carry_the_run_id_under_one_name() -> None:
    s = _sched()
    cands = s.propose()
    assert cands.run_id == cands[0].run_id == s.run_id and len(s.run_id) == 16
    assert not hasattr(cands, "issuer") and not hasattr(cands[0], "issuer")  # the old name is gone


def test_the_scheduler_answers_and_hands_out_none_of_its_parts() -> None:
    """Issue 50: ``streams``, ``policy``, ``tables``, ``pending`` and ``step_metrics`` were its live components
    (a caller could change a prompt's counter or the pending set behind its back), ``weights`` and ``drawn``
    its own arrays. What it says now are plain values; its parts are ``_parts``, the scheduler's own."""
    s = _sched()
    s.step(rewards_for)
    s.propose()
    for name in (n for n in dir(s) if not n.startswith("_")):
        value = getattr(s, name)
        if callable(value) and not isinstance(value, np.ndarray):
            continue
        for item in value if isinstance(value, list) else [value]:
            module = type(item).__module__
            assert not module.startswith(("snooze.core._", "snooze.core.policies")), f"Scheduler.{name}: {item!r}"
    before = state_hash(s)
    s.weights[:] = 9.0
    s.drawn[:] = 9
    assert state_hash(s) == before and s.weights.tolist() == [1.0, 1.0]


def test_progress_is_the_passes_over_the_pool() -> None:
    s = snooze.Scheduler({"a": records(["signal"] * 6, "a")}, snooze.SchedulerConfig(batch_size=2, group_size=4))
    assert s.progress() == 0.0
    s.propose(3)
    assert s.progress() == 0.5
    s.propose(6)  # the rest of the first pass, and half of the second
    assert s.progress() == 1.5 == len(s.pending_candidates()) / 6
