"""Curriculum stages on a real Scheduler, metric conditions, state, and file errors."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_core import snapshot

import snooze
from snooze.core.errors import ConfigError, DataError, StateError
from snooze.curriculum import Curriculum

FILE = {
    "version": 1,
    "drop": {"a": [0, 1]},
    "stages": [
        {"name": "one", "weights": {"a": 1.0}, "exclude": {"a": [2, 3, 4, 5]}, "advance": [{"step": 2}]},
        {"name": "two", "weights": None, "exclude": {}},
    ],
}


def test_the_curriculum_is_its_own_package_and_the_root_exports_it() -> None:
    """``snooze.Curriculum`` is the class of :mod:`snooze.curriculum`; the core no longer holds or exports it."""
    assert snooze.Curriculum is Curriculum and "Curriculum" in snooze.__all__
    assert Curriculum.__module__ == "snooze.curriculum.stages"
    assert "Curriculum" not in snooze.core.__all__ and not hasattr(snooze.core, "Curriculum")


def _signal(cands: list[snooze.Candidate]) -> np.ndarray:
    return np.tile([1.0, 0.0], (len(cands), 1))  # [N, 2]: every group has signal


def _drawn(sched: snooze.Scheduler) -> set[tuple[str, Any]]:
    batch = sched.step(_signal)
    return {(c.dataset, c.id) for c in batch.candidates}


def test_stages_switch_at_the_step_and_change_what_is_drawn(tmp_path: Path) -> None:
    data = {name: [{"id": i} for i in range(10)] for name in ("a", "b")}
    sched = snooze.Scheduler(data, snooze.SchedulerConfig(batch_size=4, group_size=2, policy="snooze"), seed=1)
    (tmp_path / "c.json").write_text(json.dumps(FILE))
    cur = Curriculum.from_file(tmp_path / "c.json")
    cur.apply(sched)
    stage_one: set[tuple[str, Any]] = set()
    for step in range(2):
        stage_one |= _drawn(sched)
        assert cur.update(sched) is (step == 1)  # {"step": 2}: stage two starts at step 2
    assert stage_one <= {("a", i) for i in range(6, 10)} and len(stage_one) == 4
    assert cur.current.name == "two"
    stage_two: set[tuple[str, Any]] = set()
    for _ in range(6):
        stage_two |= _drawn(sched)
    assert any(d == "b" for d, _ in stage_two)  # weights None: b (weight 0 in stage one) is drawn now
    assert any(d == "a" and i in (2, 3, 4, 5) for d, i in stage_two)  # let back in
    assert not any(d == "a" and i in (0, 1) for d, i in stage_two)  # dropped for good


class _Stub:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def set_stage(self, weights: Any, exclude: dict[str, list[Any]], include: dict[str, list[Any]]) -> int:
        self.calls.append(("w", weights))
        self.calls += [("x", name, tuple(ids), False) for name, ids in include.items() if ids]
        self.calls += [("x", name, tuple(ids), True) for name, ids in exclude.items() if ids]
        return 0


METRIC = {
    "stages": [
        {
            "weights": {"m": 1.0},
            "exclude": {"m": [9]},
            "advance": [{"metric": "dataset/m/signal_rate", "op": "<", "value": 0.25, "for_steps": 2}],
        },
        {"weights": {"m": 1.0}},
    ]
}


def test_metric_condition_needs_consecutive_steps_and_state_round_trips() -> None:
    cur, stub = Curriculum.from_dict(METRIC), _Stub()
    values = [0.3, 0.1, math.nan, 0.1, 0.1]  # streak 0, 1, 0 (NaN never holds), 1, 2 -> fires at the 5th
    fired = []
    for step, v in enumerate(values):
        if step == 3:  # restore mid-streak into a fresh object: same outcome
            state = json.loads(json.dumps(cur.state_dict()))
            cur = Curriculum.from_dict(METRIC)
            cur.load_state_dict(state)
        fired.append(cur.update(stub, {"step": step, "dataset/m/signal_rate": v}))
    assert fired == [False, False, False, False, True]
    assert ("x", "m", (9,), False) in stub.calls  # stage 2 lets the excluded prompt back in
    assert cur.update(stub, {"step": 5, "dataset/m/signal_rate": 0.0}) is False  # last stage: stays


def test_unknown_metric_is_named() -> None:
    cur = Curriculum.from_dict(METRIC)
    with pytest.raises(ConfigError, match=r"dataset/m/signal_rate.*similar keys: \['dataset/x/signal_rate'\]"):
        cur.update(_Stub(), {"step": 0, "dataset/x/signal_rate": 0.5})


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"stages": []}, "stages"),
        ({"stages": [{"weights": {"a": 1}}, {}]}, r"stages\[0\].advance"),
        ({"stages": [{"advance": [{"metric": "x", "op": "!=", "value": 1}]}, {}]}, r"stages\[0\].advance\[0\].op"),
        ({"stages": [{"advance": [{"metric": "x", "op": [], "value": 1}]}, {}]}, r"stages\[0\].advance\[0\].op"),
        ({"stages": [{"weights": {"a": -1}}]}, r"stages\[0\].weights"),
        ({"stages": [{"exclude": {"a": [True]}}]}, r"stages\[0\].exclude"),
        ({"stages": [{"colour": 1}]}, r"stages\[0\]: unknown key"),
    ],
)
def test_bad_file_names_the_field(data: dict, where: str) -> None:
    with pytest.raises(ConfigError, match=where):
        Curriculum.from_dict(data, source="c.json")


def test_state_from_another_curriculum_is_refused() -> None:
    cur = Curriculum.from_dict({"stages": [{}]})
    with pytest.raises(StateError):
        cur.load_state_dict({"stage": 1, "streaks": [0], "n_stages": 2})


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p.mkdir(), "cannot read the curriculum file"),
        (lambda p: p.write_bytes(b"\xff\xfe{}"), "not UTF-8 text"),
        (lambda p: None, "curriculum file not found"),
    ],
)
def test_a_curriculum_path_that_is_not_a_readable_file_is_a_config_error(tmp_path: Path, make, match: str) -> None:
    path = tmp_path / "c.json"
    make(path)
    with pytest.raises(ConfigError, match=match):
        Curriculum.from_file(path)


def _two_datasets() -> snooze.Scheduler:
    data = {name: [{"id": i} for i in range(10)] for name in ("a", "b")}
    sched = snooze.Scheduler(data, snooze.SchedulerConfig(batch_size=4, group_size=2, policy="snooze"), seed=1)
    sched.step(_signal)  # mid-run: counters, memory and the mix's counts are not at their start
    return sched


@pytest.mark.parametrize(
    ("stage", "error", "match"),
    [
        (
            {"weights": {"a": 0.9, "b": 0.1}, "exclude": {"a": [1, 2], "b": [99]}},
            DataError,
            r"'b' has no prompt\(s\) with id \[99\]",
        ),
        ({"weights": {"a": 1.0}, "exclude": {"a": [1], "c": [0]}}, DataError, "unknown dataset 'c'"),
        ({"weights": {"a": 1.0, "c": 1.0}, "exclude": {"a": [1]}}, ConfigError, "c"),
    ],
)
def test_a_stage_the_scheduler_cannot_take_is_refused_whole(stage: dict, error: type, match: str) -> None:
    """A stage naming an id, a dataset or a weight the scheduler lacks changes nothing, not its weights nor
    the exclusions listed before the bad one, and the error names the stage."""
    sched = _two_datasets()
    before = snapshot(sched)
    cur = Curriculum.from_dict({"stages": [{"name": "first", **stage}]})
    with pytest.raises(error, match=match) as info:
        cur.apply(sched)
    assert "curriculum stage 'first'" in str(info.value)
    assert snapshot(sched) == before


def test_set_stage_lets_back_in_then_excludes_and_counts_the_changes() -> None:
    sched = _two_datasets()
    assert sched.set_excluded("a", [0, 1, 2]) == 3
    assert (
        sched.set_stage({"a": 1.0}, exclude={"a": [2, 3]}, include={"a": [0, 1, 2]}) == 3
    )  # 0, 1 back; 3 out; 2 stays out
    drawn = set()
    for _ in range(4):
        drawn |= _drawn(sched)
    assert {d for d, _ in drawn} == {"a"}  # b has weight 0
    assert not drawn & {("a", 2), ("a", 3)}
    assert ("a", 0) in drawn or ("a", 1) in drawn
    with pytest.raises(DataError, match="exclude must map dataset names"):
        sched.set_stage(None, exclude=[1, 2])  # type: ignore[arg-type]


def _one_dataset() -> snooze.Scheduler:
    data = {"t": [{"id": i} for i in range(10)]}
    return snooze.Scheduler(data, snooze.SchedulerConfig(batch_size=2, group_size=2), seed=1)


def test_a_refused_update_leaves_the_streaks_as_they_were() -> None:
    """The first condition holds, the second names a missing metric: the error changes no streak, however
    often it is retried, and a good call afterwards counts from where the curriculum was."""
    two = [{"metric": "gen/rounds", "op": ">=", "value": 0, "for_steps": 3}, {"metric": "nope/x", "value": 1}]
    cur = Curriculum.from_dict({"stages": [{"advance": two}, {}]})
    sched = _one_dataset()
    cur.apply(sched)
    metrics = sched.step(_signal).metrics
    for _ in range(2):
        with pytest.raises(ConfigError, match="'nope/x' is not in the step metrics"):
            cur.update(sched, metrics)
        assert (cur.stage, cur.streaks) == (0, [0, 0])
    assert cur.update(sched, {**metrics, "nope/x": 5.0}) is False
    assert cur.streaks == [1, 0]


class _Refusing(_Stub):
    """A scheduler-like object without datasets (nothing is checked at apply) that refuses stage 2's weights."""

    def set_stage(self, weights: Any, exclude: dict[str, list[Any]], include: dict[str, list[Any]]) -> int:
        if weights == {"zzz": 1.0}:
            raise ConfigError("weights name unknown dataset(s) ['zzz']")
        return super().set_stage(weights, exclude, include)


def test_a_next_stage_the_scheduler_refuses_leaves_the_curriculum_in_its_stage() -> None:
    cur = Curriculum.from_dict({"stages": [{"advance": [{"step": 1}]}, {"weights": {"zzz": 1.0}}]})
    stub = _Refusing()
    cur.apply(stub)
    for _ in range(2):  # retried: the same error, never a silent stage 2 the scheduler does not have
        with pytest.raises(ConfigError, match="curriculum stage 'stage-2': weights name unknown"):
            cur.update(stub, {"step": 0})
        assert (cur.stage, cur.streaks, len(stub.calls)) == (0, [0], 1)


def test_apply_refuses_a_later_stage_the_scheduler_cannot_take() -> None:
    """Checked up front against the scheduler's datasets: refused before step 1, not at the switch."""
    sched = _one_dataset()
    before = snapshot(sched)
    for later, match in [
        ({"weights": {"zzz": 1.0}}, r"unknown dataset\(s\) \['zzz'\]"),
        ({"exclude": {"t": [99]}}, r"no prompt\(s\) with id \[99\]"),
        ({"exclude": {"u": [1]}}, "unknown dataset 'u'"),
    ]:
        cur = Curriculum.from_dict({"stages": [{"advance": [{"step": 1}]}, {"name": "later", **later}]})
        with pytest.raises((ConfigError, DataError), match=match) as info:
            cur.apply(sched)
        assert "curriculum stage 'later'" in str(info.value)
        assert snapshot(sched) == before and cur.stage == 0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: Curriculum.from_file(None), r"from_file\(path=None\)"),  # type: ignore[arg-type]
        (lambda: Curriculum.from_file("a\0b"), "not a usable file path"),
        (lambda: Curriculum.from_file(""), "path must be a file path"),
        (lambda: Curriculum("abc"), r"Curriculum\(stages=str\)"),  # type: ignore[arg-type]
        (lambda: Curriculum([1]), r"item 0 is int, not a Stage"),  # type: ignore[list-item]
        (lambda: Curriculum.from_dict({"stages": [{"name": {"a": 1}}]}), r"stages\[0\].name: \{'a': 1\}"),
        (lambda: Curriculum.from_dict({"stages": [{"name": None}]}), r"stages\[0\].name: None is not a string"),
    ],
)
def test_bad_curriculum_arguments_are_config_errors(call: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        call()


@pytest.mark.parametrize(
    ("sched", "metrics", "match"),
    [
        ("sched", {"gen/rounds": None}, "'gen/rounds' is None, not a number"),
        ("sched", {"gen/rounds": "abc"}, "'gen/rounds' is 'abc', not a number"),
        ("sched", {"gen/rounds": True}, "'gen/rounds' is True, not a number"),
        ("sched", [1], r"update\(metrics=list\): metrics must map"),
        (None, None, r"update\(sched=NoneType\)"),
    ],
)
def test_bad_update_arguments_are_config_errors_and_change_nothing(sched: Any, metrics: Any, match: str) -> None:
    cur = Curriculum.from_dict({"stages": [{"advance": [{"metric": "gen/rounds", "op": ">=", "value": 0}]}, {}]})
    real = _one_dataset()
    cur.apply(real)
    with pytest.raises(ConfigError, match=match):
        cur.update(real if sched == "sched" else sched, metrics)
    assert (cur.stage, cur.streaks) == (0, [0])
    with pytest.raises(ConfigError, match=r"apply\(sched=NoneType\)"):
        cur.apply(None)


def test_a_step_condition_without_an_integer_step_metric_is_named() -> None:
    cur = Curriculum.from_dict({"stages": [{"advance": [{"step": 2}]}, {}]})
    for metrics in ({}, {"step": "3"}, {"step": 1.0}):
        with pytest.raises(ConfigError, match=r"needs the integer metrics\['step'\]"):
            cur.update(_Stub(), metrics)
    assert cur.update(_Stub(), {"step": 1}) is True
