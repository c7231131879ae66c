"""Property-based fuzz of the public API (issue 13): random types and values thrown at the config, the
data sources, the scheduler's constructor and methods, and load_state_dict.

Two invariants, for every call: the only exception that comes out is the project's
(:class:`snooze.SnoozeError`), and a call it refuses changes nothing (the whole state, the run id and
the weights compared before and after). A state that load_state_dict accepts is one the scheduler can
run on: the next step completes.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from pathlib import Path
from typing import Any

import numpy as np
from helpers_core import records, rewards_for, snapshot
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import snooze

FUZZ = settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.binary(max_size=6),
    st.complex_numbers(allow_nan=True, allow_infinity=True),
    st.sampled_from([np.int64(3), np.uint64(2**63), np.float32(0.5), np.bool_(True), np.nan, "a0", "b1", 0, 1, 4]),
)
_arrays = st.sampled_from(
    [
        np.zeros((2, 4)),
        np.ones(3, dtype=np.int32),
        np.array(["x", "y"]),
        np.empty(0),
        np.array([[1, 2], [3, 4]], dtype=np.uint8),
        np.full((3, 4), np.nan),
        np.array([object(), 1], dtype=object),
    ]
)
JUNK = st.recursive(
    st.one_of(_scalars, _arrays),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(0, 3)), inner, max_size=3),
    ),
    max_leaves=8,
)
FIELDS = [f.name for f in dataclasses.fields(snooze.SchedulerConfig)]
KINDS = ["signal", "easy", "hard", "signal", "flat", "easy"]


def _sched(**cfg: Any) -> snooze.Scheduler:
    config = snooze.SchedulerConfig(batch_size=3, group_size=4, options=snooze.SnoozeOptions(factor=2), **cfg)
    s = snooze.Scheduler({"a": records(KINDS, "a"), "b": records(KINDS[::-1], "b")}, config, seed=5)
    s.step(rewards_for)
    cands = s.propose()
    s.report(cands[:1], rewards_for(cands[:1]))  # mid-step: a group in hand, candidates pending
    return s


def _only_ours(call: Any) -> BaseException | None:
    """Run ``call``; return the project's error it raised (None if it succeeded). Anything else fails the test."""
    try:
        call()
    except snooze.SnoozeError as exc:
        assert str(exc).strip(), "an error must say what is wrong"
        return exc
    return None


@FUZZ
@given(changes=st.dictionaries(st.sampled_from(FIELDS), JUNK, min_size=1, max_size=3), data=JUNK)
@example(changes={"policy": np.zeros((2, 4))}, data=None)  # found by the fuzz: an array compared with "dapo"
def test_the_config_takes_a_value_or_raises_a_config_error(changes: dict[str, Any], data: Any) -> None:
    base = snooze.SchedulerConfig()
    got: list[snooze.SchedulerConfig] = []
    if _only_ours(lambda: got.append(snooze.SchedulerConfig(**changes))) is None:
        cfg = got[0]
        assert snooze.SchedulerConfig.from_dict(cfg.to_dict()) == cfg  # what it took, it can save and read back
    _only_ours(lambda: base.replace(**changes))
    _only_ours(lambda: snooze.SchedulerConfig.from_dict(data))
    _only_ours(lambda: snooze.SchedulerConfig.from_dict({**base.to_dict(), **changes}))
    assert base == snooze.SchedulerConfig()


@FUZZ
@given(
    name=JUNK,
    ids=st.lists(_scalars, max_size=5),
    id_field=JUNK,
    datasets=JUNK,
    seed=JUNK,
    lines=st.lists(st.binary(max_size=12), max_size=4),
)
def test_data_sources_and_the_constructor_raise_only_the_projects_errors(
    name: Any, ids: list[Any], id_field: Any, datasets: Any, seed: Any, lines: list[bytes], tmp_path_factory: Any
) -> None:
    recs = [{"id": i} for i in ids]
    _only_ours(lambda: snooze.Source.from_records(name, recs))
    _only_ours(lambda: snooze.Source.from_records("d", recs, id_field))
    _only_ours(lambda: snooze.Source.from_ids("d", ids))
    _only_ours(lambda: snooze.as_source("d", datasets))
    path = Path(tmp_path_factory.mktemp("jsonl")) / "d.jsonl"
    path.write_bytes(b"\n".join(lines))
    _only_ours(lambda: snooze.Source.from_jsonl("d", path))
    cfg = snooze.SchedulerConfig(batch_size=2, group_size=2)
    _only_ours(lambda: snooze.Scheduler(datasets, cfg))
    _only_ours(lambda: snooze.Scheduler({"d": recs}, cfg, seed=seed))
    _only_ours(lambda: snooze.Scheduler({name if isinstance(name, str) else "d": recs}, datasets))


_OPS = st.sampled_from(
    ["report", "report_real", "set_weights", "set_excluded", "set_stage", "set_stage_ids", "propose", "cancel"]
)


def _op(s: snooze.Scheduler, op: str, x: Any, y: Any, z: Any) -> None:
    if op == "report":
        s.report(x, y)
    elif op == "report_real":  # real candidates, junk rewards
        s.report(s.pending_candidates(), x)
    elif op == "set_weights":
        s.set_weights(x)
    elif op == "set_excluded":
        s.set_excluded(x if not isinstance(x, bool) else "a", y, z)
    elif op == "set_stage":
        s.set_stage(x, y, z)
    elif op == "set_stage_ids":  # a good dataset name with junk ids, after good ones: still nothing changes
        s.set_stage({"a": 1.0}, {"a": ["a0", "a1"], "b": y}, {"a": z})
    elif op == "propose":
        s.propose(x)
    else:
        s.cancel(x)


@FUZZ
@given(
    ops=st.lists(st.tuples(_OPS, JUNK, JUNK, JUNK), min_size=1, max_size=6), mix=st.sampled_from(["stream", "quota"])
)
def test_a_refused_call_changes_nothing(ops: list[tuple[str, Any, Any, Any]], mix: str) -> None:
    s = _sched(mix=mix)
    for op, x, y, z in ops:
        before = snapshot(s)
        if _only_ours(functools.partial(_op, s, op, x, y, z)) is not None:
            assert snapshot(s) == before, op
    s.step(rewards_for)  # and it still runs


def _paths(value: Any, at: tuple = ()) -> list[tuple]:
    """Every key path into a state's meta (dicts and lists, leaves included)."""
    out = [at] if at else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


_STATE = _sched(mix="quota").state_dict()
_META_PATHS = _paths(_STATE["meta"])
_ARRAYS = sorted(_STATE["arrays"])


@FUZZ
@given(
    where=st.one_of(
        st.tuples(st.just("meta"), st.sampled_from(_META_PATHS)),
        st.tuples(st.just("arrays"), st.sampled_from(_ARRAYS).map(lambda a: (a,))),
    ),
    value=st.one_of(JUNK, st.sampled_from(["__delete__", "__scale__", "__negate__", "__shift__"])),
)
def test_load_state_dict_refuses_a_damaged_field_before_it_changes_anything(
    where: tuple[str, tuple], value: Any
) -> None:
    state = copy.deepcopy(_STATE)
    part, path = where
    node = state[part]
    for k in path[:-1]:
        node = node[k]
    old = node[path[-1]]
    marker = value if isinstance(value, str) and value.startswith("__") else None
    if marker == "__delete__":
        del node[path[-1]]
    elif marker and isinstance(old, (int, float, np.ndarray)) and not isinstance(old, bool):
        arr = np.asarray(old)
        new = {"__scale__": arr * 3, "__negate__": -arr - 1, "__shift__": arr + 100}[marker]
        node[path[-1]] = new if isinstance(old, np.ndarray) else new.item()
    else:
        node[path[-1]] = value
    target = _sched(mix="quota")
    before = snapshot(target)
    if _only_ours(lambda: target.load_state_dict(state)) is not None:
        assert snapshot(target) == before
        return
    batch = target.step(rewards_for)  # what it accepted, it can run on
    assert len(batch.candidates) <= target.config.batch_size
