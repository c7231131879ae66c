"""Plug-ins that break their contract (issue 51): each ends in a PolicyConformanceError or a clean error, never a
hang, and a refused call leaves the scheduler as it was. Also the registry's names, options read back, and the
config's weights."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from _driver import state_hash

import snooze
from snooze.core.options import POLICIES
from snooze.core.policies import Changes, Options, Policy, register_policy


@pytest.fixture
def registered() -> Iterator[Any]:
    """``registered(name, cls)`` registers a policy for the test and unregisters it after."""
    names: list[str] = []

    def add(name: str, cls: type) -> type:
        register_policy(name)(cls)
        names.append(name)
        return cls

    yield add
    for name in names:
        POLICIES.unregister(name)


def _scheduler(policy: str, n: int = 6, **cfg: Any) -> snooze.Scheduler:
    config = snooze.SchedulerConfig(batch_size=2, group_size=2, audit=0.0, policy=policy, **cfg)
    return snooze.Scheduler({"a": [{"id": i} for i in range(n)]}, config, seed=0)


class _Raises(Policy):
    """Writes the memory of its report's prompts, then raises."""

    def report(self, memory: Any, report: Any) -> None:
        memory.columns["counter"][report.group_rows] = 5
        memory.columns["streak"][report.group_rows] = 7
        raise RuntimeError("a bug in the policy")


class _BadAudit(Policy):
    """Learns from its report, and returns refused changes for its audit groups."""

    def report(self, memory: Any, report: Any) -> Changes:
        memory.columns["streak"][report.group_rows] = 1
        return Changes(new=np.zeros(len(report.prompts().rows), dtype=bool))

    def audited(self, memory: Any, report: Any) -> Changes:
        memory.columns["counter"][report.group_rows] = 3
        return Changes(new=np.zeros(len(report) + 1, dtype=bool))

    def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
        return rows % 2 == 1  # odd rows skipped: the audit rolls some out


class _ListMask(Policy):
    def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> Any:
        return [False] * rows.shape[0]


class _IntMask(Policy):
    def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> Any:
        return np.int64(0)


class _EndStepRaises(Policy):
    def end_step(self, steps: int) -> None:
        raise RuntimeError("end_step failed")


def test_a_plug_in_call_that_fails_changes_nothing(registered: Any) -> None:
    """One cause: a call into a plug-in that raised or was refused left what it had done so far. Cases:

    - through a hand-driven ``report()``, a policy that raises after writing memory left the memory changed while
      the candidates stayed pending (a retry then counted its groups twice);
    - an ``audited()`` whose changes are refused, likewise (and ``report()``'s changes were counted already);
    - a list mask counted the round before it failed (``TypeError``), an int mask crashed the walk with an
      ``IndexError`` after spending encounters; both are now a PolicyConformanceError naming the mask;
    - an ``end_step()`` that raises lost the caller's batch: the step was closed, the next one opened.

    Each call now leaves the whole state as it was; the policy's own error (or the conformance error) goes on."""
    sched = _scheduler(registered("test_raises", _Raises).name)
    cands, before = sched.propose(), None
    before = state_hash(sched)
    with pytest.raises(RuntimeError, match="a bug in the policy"):
        sched.report(cands, np.ones((len(cands), 2)))
    assert state_hash(sched) == before and len(sched.pending_candidates()) == len(cands)

    cfg = {"audit": 0.5}
    registered("test_bad_audit", _BadAudit)
    sched = snooze.Scheduler(
        {"a": [{"id": i} for i in range(40)]},
        snooze.SchedulerConfig(batch_size=20, group_size=2, policy="test_bad_audit", **cfg),
        seed=0,
    )
    cands = sched.propose()
    assert any(c.id % 2 for c in cands)  # the report has audit groups (odd rows are masked)
    before = state_hash(sched)
    with pytest.raises(snooze.PolicyConformanceError, match=r"Changes.new is ndarray bool \(\d+,\), not a bool array"):
        sched.report(cands, np.ones((len(cands), 2)))
    assert state_hash(sched) == before and len(sched.pending_candidates()) == len(cands)

    for name, cls, shown in (("test_list_mask", _ListMask, "list"), ("test_int_mask", _IntMask, "int64")):
        sched = _scheduler(registered(name, cls).name)
        before = state_hash(sched)
        with pytest.raises(snooze.PolicyConformanceError, match=rf"skip_mask\(\) returned {shown}.* Nothing was drawn"):
            sched.propose()
        assert state_hash(sched) == before and sched.round == 0

    sched = _scheduler(registered("test_end_step", _EndStepRaises).name)
    sched.report(cands := sched.propose(), np.array([[1.0, 0.0]] * len(cands)))  # two signal groups: a full batch
    before = state_hash(sched)
    with pytest.raises(RuntimeError, match="end_step failed"):
        sched.finish_step()
    assert state_hash(sched) == before and sched.step_index == 0
    assert sched.step_record().counts()["trained"] == 2  # the batch is kept: a retry can close the step


class _RelaxForever(Policy):
    def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
        return np.ones(rows.shape[0], dtype=bool)

    def relax(self, d: int) -> bool:
        return True


class _NegativeCounter(Policy):
    def report(self, memory: Any, report: Any) -> None:
        memory.columns["counter"][report.group_rows] = -1


class _NegativeElsewhere(Policy):
    def report(self, memory: Any, report: Any) -> None:
        if 5 not in report.group_rows:
            memory.columns["counter"][5] = -1  # the last prompt, not in this report


@pytest.mark.timeout(60)
def test_a_plug_in_that_never_lets_a_draw_end_is_named_not_walked_for_ever(registered: Any) -> None:
    """One cause: the draw walk trusted a plug-in to end it. Cases:

    - a ``relax()`` that always says True (and a mask that still skips everything) made ``check_policy`` itself,
      and any ``propose()``, loop for ever; a draw now allows it ``RELAX_BOUND`` times in a row;
    - a policy writing a negative snooze counter (a prompt neither awake nor asleep) hung every later draw; the
      report that writes it is now refused, naming the row, and undone; one written outside the report's rows is
      refused by the draw that meets it, which changes nothing."""
    cls = registered("test_relax_forever", _RelaxForever)
    with pytest.raises(snooze.PolicyConformanceError, match=r"relax\(\d\) returned True 65 times in a row"):
        snooze.check_policy(cls)
    sched = _scheduler(cls.name)
    before = state_hash(sched)
    with pytest.raises(snooze.PolicyConformanceError, match="relax.* must return False once it cannot skip less"):
        sched.propose()
    assert state_hash(sched) == before

    sched = _scheduler(registered("test_negative", _NegativeCounter).name)
    cands = sched.propose()
    before = state_hash(sched)
    with pytest.raises(snooze.PolicyConformanceError, match=r"wrote counter=-1, flags=0 into memory row \d"):
        sched.report(cands, np.ones((len(cands), 2)))
    assert state_hash(sched) == before
    with pytest.raises(snooze.PolicyConformanceError, match="wrote counter=-1"):
        snooze.check_policy(type(sched._parts.policy))

    sched = _scheduler(registered("test_negative_elsewhere", _NegativeElsewhere).name)
    sched.report(cands := sched.propose(), np.ones((len(cands), 2)))  # wrote a row outside its report: unseen
    before = state_hash(sched)
    with pytest.raises(snooze.PolicyConformanceError, match=r"row 5 has snooze counter -1: .* outside the rows"):
        while True:  # the draw that meets the row refuses it (it walked past it for ever)
            sched.report(cands := sched.propose(), np.ones((len(cands), 2)))
            before = state_hash(sched)
    assert state_hash(sched) == before


class _LoadRaises(Policy):
    def state_dict(self) -> dict[str, Any]:
        return {"seen": 1}

    def load_state_dict(self, state: Any) -> None:
        raise snooze.StateError("cannot read my own state")


def test_a_load_state_dict_that_refuses_its_own_state_fails_the_check(registered: Any) -> None:
    """It escaped check_policy as a StateError, as if the check's checkpoint were damaged; now it is the round-trip
    rule broken, named."""
    with pytest.raises(
        snooze.PolicyConformanceError,
        match=r"state round-trip broken at step 8: loading the state its own run saved failed \(StateError: "
        r".*cannot read my own state",
    ):
        snooze.check_policy(registered("test_load_raises", _LoadRaises))


def test_a_name_the_registry_could_never_choose_is_refused() -> None:
    """``register_policy("dapo")`` was accepted, yet ``policy="dapo"`` means ``dynamic_sampling``; one class
    registered under two names took the second name for both (``cls.name``), so the first named the wrong class's
    options and state. Both are refused, saying what to do, and nothing is registered."""
    with pytest.raises(snooze.ConfigError, match="'dapo' is another spelling of 'dynamic_sampling'"):
        register_policy("dapo")(type("Dapo", (Policy,), {}))
    assert "dapo" not in POLICIES and snooze.SchedulerConfig(policy="dapo").policy == "dynamic_sampling"

    cls = register_policy("test_first_name")(type("Twice", (Policy,), {}))
    try:
        with pytest.raises(snooze.ConfigError, match="registered as policy 'test_first_name' already: one class"):
            register_policy("test_second_name")(cls)
        assert cls.name == "test_first_name" and "test_second_name" not in POLICIES
    finally:
        POLICIES.unregister("test_first_name")


@dataclass(frozen=True)
class _PairOptions(Options):
    pair: tuple[int, int] = (1, 2)
    words: tuple[str, ...] = ()


class _Pair(Policy):
    Options = _PairOptions


def test_tuple_options_come_back_as_tuples(registered: Any) -> None:
    """Options read back from their dict (a saved state, a run's metadata) held lists where tuples were given, and
    the config no longer compared equal to the one written."""
    registered("test_pair", _Pair)
    cfg = snooze.SchedulerConfig(policy="test_pair", options=_PairOptions(pair=(3, 4), words=("a", "b")))
    back = snooze.SchedulerConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert back == cfg and back.options.pair == (3, 4) and back.options.words == ("a", "b")
    assert snooze.SchedulerConfig(policy="test_pair", options={"pair": [3, 4], "words": ["a", "b"]}) == cfg


def test_the_configs_weights_are_read_only_and_plain() -> None:
    """``SchedulerConfig.weights`` was a mutable dict inside a frozen config: changing it changed the config (and
    its hash) under a running scheduler. It is now a read-only dict: still equal to a dict, written by json, copied
    by deepcopy, and no mappingproxy (which json refuses)."""
    cfg = snooze.SchedulerConfig(weights={"a": 2, "b": 1})
    with pytest.raises(snooze.ConfigError, match="cannot be changed in place"):
        cfg.weights["a"] = 5.0  # type: ignore[index]
    with pytest.raises(snooze.ConfigError, match="cannot be changed in place"):
        cfg.weights.update(a=5.0)  # type: ignore[attr-defined]
    assert cfg.weights == {"a": 2.0, "b": 1.0} and isinstance(cfg.weights, dict)
    assert json.loads(json.dumps(cfg.weights)) == {"a": 2.0, "b": 1.0}
    assert copy.deepcopy(cfg) == cfg and hash(copy.deepcopy(cfg)) == hash(cfg)
    assert type(cfg.to_dict()["weights"]) is dict
    assert snooze.SchedulerConfig.from_dict(cfg.to_dict()) == cfg


def _carrying(batch_size: int = 2) -> snooze.Scheduler:
    cfg = snooze.SchedulerConfig(batch_size=batch_size, gen_batch_size=6, group_size=2, audit=0.0, carry_surplus=True)
    return snooze.Scheduler({"a": [{"id": i} for i in range(12)]}, cfg, seed=0)


def test_a_boundary_state_with_carried_groups_loads_with_a_smaller_batch() -> None:
    """A state saved at a step boundary holding carried groups, loaded with a smaller batch, was refused as "saved
    mid-step", against concepts.md (at a boundary the batch size may change freely): now the carried groups that fit
    enter the batch, the rest are discarded, as when the step began."""
    sched = _carrying()
    sched.step(lambda c: np.array([[1.0, 0.0]] * len(c)))  # 6 signal groups: 2 trained, 4 carried
    assert sched.step_record().counts() == {**sched.step_record().counts(), "trained": 2, "discarded": 2}
    small = _carrying(batch_size=1)
    small.load_state_dict(sched.state_dict())
    record = small.step_record()
    assert record.counts()["trained"] == 1 and record.counts()["discarded"] == 3  # of the 4 carried, 1 fits
    assert len(small.finish_step().candidates) == 1


def test_a_state_loaded_under_a_stricter_out_of_range_names_the_change(tmp_path: Any) -> None:
    """A valid state saved under ``out_of_range="accept"`` holding rewards outside the range, loaded under the
    default ``"raise"``, was called corrupt: now a StateMismatchError naming the change and what to do."""
    accept = snooze.SchedulerConfig(batch_size=4, group_size=2, out_of_range="accept")
    loose = snooze.Scheduler({"a": [{"id": i} for i in range(8)]}, accept, seed=0)
    loose.report(cands := loose.propose(), np.array([[2.0, 0.0]] * len(cands)))
    loose.save(tmp_path / "s")
    with pytest.raises(snooze.StateMismatchError, match=r"out_of_range='accept' \(saved\), which out_of_range='raise'"):
        snooze.Scheduler.load(
            tmp_path / "s", {"a": [{"id": i} for i in range(8)]}, accept.replace(out_of_range="raise")
        )
    assert snooze.Scheduler.load(tmp_path / "s", {"a": [{"id": i} for i in range(8)]}, accept).round == 1


def test_drop_carried_after_a_late_report_names_the_reason() -> None:
    """``drop_carried()`` after a late report (no round drawn in the step yet) refused with "has drawn 0 round(s)
    already"; now it names the late report."""
    sched = _carrying()
    late = sched.propose()
    sched.finish_step()  # the step closes with its candidates out (an asynchronous trainer)
    sched.report(late, np.array([[1.0, 0.0]] * len(late)))
    with pytest.raises(snooze.ReportError, match=r"holds 6 group\(s\) reported in it already .*reported late"):
        sched.drop_carried()
