"""Bad states and files: a state loaded into a scheduler it does not fit, a state with one field
damaged, and the operating system's errors on reading and saving. Each is the project's error, saying
what is wrong, and leaves the scheduler exactly as it was (its whole state compared)."""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers_core import rewards_for, small_scheduler, snapshot

import snooze


# -- case 5: a mid-step state loaded with a smaller batch size ----------------------------------------------
def test_a_mid_step_batch_larger_than_the_new_batch_size_is_refused() -> None:
    data = {"a": [{"id": i, "kind": "signal"} for i in range(24)]}
    big = snooze.Scheduler(data, snooze.SchedulerConfig(batch_size=8, gen_batch_size=6, group_size=4), seed=1)
    cands = big.propose()
    big.report(cands, rewards_for(cands))
    state = big.state_dict()
    assert int((state["arrays"]["step.slot"] >= 0).sum()) == 6  # six groups in the step's batch
    small = snooze.Scheduler(data, snooze.SchedulerConfig(batch_size=4, gen_batch_size=6, group_size=4), seed=1)
    before = snapshot(small)
    with pytest.raises(snooze.StateMismatchError, match="6 groups in its batch, more than batch_size=4"):
        small.load_state_dict(state)
    assert snapshot(small) == before
    fits = snooze.Scheduler(data, snooze.SchedulerConfig(batch_size=7, gen_batch_size=6, group_size=4), seed=1)
    fits.load_state_dict(state)
    assert len(fits.step(rewards_for).candidates) == 7  # the batch size holds


# -- case 6: load_state_dict checks every field before it changes anything ------------------------------------
def _set(path: str, value):
    def damage(st):
        *keys, last = path.split(".")
        where = st["arrays"] if keys == ["arrays"] else st["meta"]
        for k in keys[1:] if keys[:1] in (["arrays"], ["meta"]) else keys:
            where = where[int(k)] if isinstance(where, list) else where[k]
        where[last] = value(where.get(last)) if callable(value) else value

    return damage


DAMAGES = {
    "counter as float": lambda st: st["arrays"].update({"ds0.counter": st["arrays"]["ds0.counter"] + 0.5}),
    "flags unknown bit": lambda st: st["arrays"]["ds0.flags"].__setitem__(0, 64),
    "metrics total a string": _set("meta.metrics.totals.rollouts", "3"),
    "metrics total a float": _set("meta.metrics.totals.rollouts", 1.5),
    "metrics total negative": _set("meta.metrics.totals.rollouts", -1),
    "metrics ds too short": _set("meta.metrics.ds.gen_groups", [1]),
    "outcomes wrong shape": _set("meta.metrics.outcomes", [1, 2]),
    "drawn a float": _set("meta.drawn", [1.5, 0]),
    "pending floats": lambda st: st["arrays"].update({"pending": st["arrays"]["pending"].astype(float)}),
    "step outcome code 9": lambda st: st["arrays"]["step.outcome"].__setitem__(0, 9),
    "step reward NaN": lambda st: st["arrays"]["step.rewards"].__setitem__((0, 0), np.nan),
    "step reward outside the range": lambda st: st["arrays"]["step.rewards"].__setitem__((0, 0), 7.0),
    "step rewards of another group size": lambda st: st["arrays"].update(
        {"step.rewards": st["arrays"]["step.rewards"][:, :2]}
    ),
    "next_ticket a string": _set("meta.next_ticket", "12"),
    # integers beyond int64: each would wrap or raise OverflowError at the next step or save
    "finished steps beyond int64": _set("meta.metrics.totals.steps", 2**63),
    "drawn beyond int64": _set("meta.drawn", lambda d: [2**63] * len(d)),
    "metrics ds beyond int64": _set("meta.metrics.ds.gen_groups", lambda v: [2**63] * len(v)),
    "metrics outcomes beyond int64": _set("meta.metrics.outcomes", lambda v: [2**63] * len(v)),
    # the saved config, as SchedulerConfig.from_dict checks it
    "config policy a list": _set("meta.config.policy", ["x"]),
    "config audit NaN": _set("meta.config.audit", float("nan")),
    "config batch_size a string": _set("meta.config.batch_size", "x"),
    "config field missing": lambda st: st["meta"]["config"].pop("epochs"),
    "config unknown field": _set("meta.config.batch_sise", 3),
    # each dataset's size: a non-negative int64, the data's own when its ids are the same
    "dataset size None": _set("meta.datasets.0.size", None),
    "dataset size negative": _set("meta.datasets.0.size", -1),
    "dataset size a string": _set("meta.datasets.0.size", "x"),
    "dataset size beyond int64": _set("meta.datasets.0.size", 2**63),
    "dataset size not the data's": _set("meta.datasets.0.size", lambda n: n + 1),
    "dataset size missing": lambda st: st["meta"]["datasets"][0].pop("size"),
}


@pytest.mark.parametrize("name", sorted(DAMAGES))
def test_a_malformed_field_is_refused_before_anything_changes(name: str) -> None:
    src = small_scheduler()
    src.step(rewards_for)
    src.step(rewards_for)
    cands = src.propose()
    src.report(cands[:2], rewards_for(cands[:2]))  # mid-step: groups in the batch, candidates pending
    assert (src.state_dict()["arrays"]["step.slot"] >= 0).any()
    state = copy.deepcopy(src.state_dict())
    DAMAGES[name](state)
    target = small_scheduler()
    target.step(rewards_for)
    before = snapshot(target)
    with pytest.raises(snooze.StateError):
        target.load_state_dict(state)
    assert snapshot(target) == before
    more = target.propose()
    target.report(more, rewards_for(more))  # and it goes on working


@pytest.mark.parametrize(
    ("damage", "match"),
    [
        (_set("meta.metrics.totals.steps", 2**63), r"metrics totals\['steps'\]=9223372036854775808 is out of range"),
        (_set("meta.drawn", lambda d: [2**63] * len(d)), "array drawn holds values outside"),
        (_set("meta.config.policy", ["x"]), r"config: policy=\['x'\]: must be one of"),
        (_set("meta.config.audit", float("nan")), "config: audit=nan: must be a finite number"),
        (lambda st: st["meta"]["config"].pop("epochs"), r"config lacks field\(s\) \['epochs'\]"),
        (_set("meta.datasets.0.size", -1), r"datasets\[0\].size=-1 is out of range"),
        (lambda st: st["meta"]["datasets"][0].pop("size"), r"datasets\[0\] lacks its size"),
        (_set("meta.datasets.0.size", 5), "dataset 'a': size=5 in the state, but its ids match this data's 9"),
    ],
)
def test_a_damaged_counter_config_or_size_is_a_state_error_naming_the_field(damage, match) -> None:
    """A counter beyond int64 loaded and then raised OverflowError at the next step (or was wrapped in the next
    save, whose file was refused); a saved config or dataset size that ``Scheduler.load`` would refuse loaded
    with a warning at most. Each is refused on load, naming the field, and the scheduler is left as it was."""
    src = small_scheduler()
    src.step(rewards_for)
    state = copy.deepcopy(src.state_dict())
    damage(state)
    target = small_scheduler()
    before = snapshot(target)
    with pytest.raises(snooze.StateError, match=match):
        target.load_state_dict(state)
    assert snapshot(target) == before


def test_a_state_at_the_int64_limit_loads_and_its_own_checkpoint_reloads(tmp_path: Path) -> None:
    """The bound is int64's, not lower: counters at 2**63 - 1 load, save and load again unchanged."""
    src = small_scheduler()
    src.step(rewards_for)
    state = copy.deepcopy(src.state_dict())
    state["meta"]["drawn"][0] = state["meta"]["metrics"]["ds"]["gen_groups"][0] = 2**63 - 1
    target = small_scheduler()
    target.load_state_dict(state)
    target.save(tmp_path / "ck")
    again = snooze.Scheduler.load(tmp_path / "ck", {n: s for n, s in zip(target.names, target.sources)})
    assert again.state_dict()["meta"]["drawn"][0] == 2**63 - 1


def test_load_arguments_are_checked_before_the_state() -> None:
    """``migrate`` was read by truth (``"no"`` as True, ``0.0`` as False); a ``previous_datasets`` that is not a
    mapping, or whose data is unusable, was a StateError about the state ("incomplete or malformed"). Each is a
    ConfigError naming the argument, and nothing changes."""
    src = small_scheduler()
    src.step(rewards_for)
    state = src.state_dict()
    target = small_scheduler(prefix="c")  # other ids: loading needs migrate=True and previous_datasets
    before = snapshot(target)
    for kwargs, match in [
        ({"migrate": "no"}, "migrate='no': must be True or False"),
        ({"migrate": 0.0}, "migrate=0.0: must be True or False"),
        ({"migrate": None}, "migrate=None: must be True or False"),
        ({"migrate": True, "previous_datasets": 5}, "previous_datasets=int: must be None or a mapping"),
        ({"migrate": False, "previous_datasets": [("a", [])]}, "previous_datasets=list: must be None or a mapping"),
        ({"migrate": True, "previous_datasets": {1: []}}, "previous_datasets=dict: must be None or a mapping"),
        ({"migrate": True, "previous_datasets": {"a": None}}, r"previous_datasets\['a'\] is not usable data"),
    ]:
        with pytest.raises(snooze.ConfigError, match=match):
            target.load_state_dict(state, **kwargs)
        assert snapshot(target) == before
    target.load_state_dict(
        state, migrate=np.bool_(True), previous_datasets={n: s for n, s in zip(src.names, src.sources)}
    )
    assert target.step_index == 1


@pytest.mark.parametrize("path", [None, 123, b"/x", "a\0b", ""])
def test_a_path_that_is_no_path_is_a_config_error_and_nothing_is_written(path, tmp_path: Path, monkeypatch) -> None:
    """``save(None)``, ``save(123)``, ``save(b"/x")`` raised TypeError, ``"a\\0b"`` ValueError; ``save("")`` and
    ``Scheduler.load("", ...)`` used the current folder. Each is a ConfigError naming the path argument."""
    monkeypatch.chdir(tmp_path)
    s = small_scheduler()
    data = {n: src for n, src in zip(s.names, s.sources)}
    for call, what in [
        (lambda: s.save(path), r"save\(path\)="),
        (lambda: snooze.Scheduler.load(path, data), r"Scheduler\.load\(path\)="),
        (lambda: snooze.save_state(path, s.state_dict()), r"save_state\(path\)="),
        (lambda: snooze.load_state(path), r"load_state\(path\)="),
    ]:
        with pytest.raises(snooze.ConfigError, match=what):
            call()
    assert list(tmp_path.iterdir()) == []  # nothing saved in the current folder


# -- case 9: the operating system's errors, as the project's ------------------------------------------------
def test_a_missing_or_directory_jsonl_path_is_a_data_error(tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    cfg = snooze.SchedulerConfig(batch_size=1, group_size=2)
    for path, why in [(tmp_path / "missing.jsonl", "No such file"), (tmp_path / "dir.jsonl", "Is a directory")]:
        with pytest.raises(snooze.DataError, match=f"{path}: dataset 'a' cannot be read \\({why}"):
            snooze.Scheduler({"a": str(path)}, cfg)


def test_save_into_a_file_is_a_state_error_and_leaves_the_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("mine")
    s = small_scheduler()
    for path, why in [
        (tmp_path / "f", "a file of that name is in the way"),
        (tmp_path / "f" / "sub", "Not a directory"),
    ]:
        with pytest.raises(snooze.StateError, match=why):
            s.save(path)
    assert (tmp_path / "f").read_text() == "mine"


def test_threads_saving_to_one_directory_take_turns(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    ck = tmp_path / "ck"

    def saver(seed: int) -> None:
        s = small_scheduler(seed=seed)
        try:
            for _ in range(12):
                s.step(rewards_for)
                s.save(ck)
                snooze.load_state(ck)  # LATEST names a file that is there
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=saver, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not list(ck.glob(".tmp-*")) and len(list(ck.glob("state-*.npz"))) == 2
    assert json.loads((ck / "LATEST").read_text())["file"] in {p.name for p in ck.iterdir()}
