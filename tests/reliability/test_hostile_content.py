"""Valid JSON, hostile content: every reader of a small JSON record takes each field as the type it must be,
or raises the project's error naming the file (issue 41's rule for every file the library reads).

``tests/reliability/test_hostile_files.py`` holds what is not JSON, or not a file; here each example is a
good record with one field made hostile: ``true`` for an integer (Python's ``True == 1``), ``0.9`` or ``1.0``
for an integer (``int()`` read 0.9 as 0), a string, ``null``, an array or an object for a number, ``10**400``
(no float holds it), ``NaN`` and ``Infinity`` (Python's JSON reads them), a lone surrogate, nesting past the
JSON reader's 64 levels, a key left out, a step repeated. Per reader a table says which values are valid in
each field; hypothesis picks a field and a value, and when the value is not valid there the read must raise
a :class:`~snooze.SnoozeError` whose message names the file (a valid one must be read).

Readers here: the reward log (and its cut-back), the metrics log, ``snooze stratify``'s input, the trainer
checkpoint's ``trainer.json``, ``curriculum.json`` and ``pipeline.json``, the warm-up cache's
``meta.json``, and a baseline checkpoint's model shape. Elsewhere: verl's ``inflight.json`` and ``data.pt``
state (tests/integrations/test_verl_hostile.py), the comparisons' ``summary.json``, ``regime.json`` and
``run_meta.json`` (tests/experiments/test_table_commands.py).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import snooze
from snooze._kit.checks import INT64_MAX, INT64_MIN, finite_float, is_int, lone_surrogate
from snooze.analysis.completions import read_completions
from snooze.logs import read_metrics, read_reward_log, truncate_log

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DEEP = "<deep>"  # replaced by nesting 70 levels deep once the record is JSON text
DROP = "<drop>"  # the field is left out
HOSTILE: list[Any] = [
    True,
    False,
    None,
    0.9,
    1.0,
    0.5,
    "1",
    "",
    "\ud800",
    [],
    [1],
    {},
    {"a": 1},
    -1,
    0,
    3,
    2**63,
    10**400,
    math.nan,
    math.inf,
    -math.inf,
    DEEP,
    DROP,
]


def integer(low: int = 0, high: int = INT64_MAX) -> Callable[[Any], bool]:
    return lambda v: is_int(v) and low <= v <= high


def number(low: float = -math.inf, high: float = math.inf) -> Callable[[Any], bool]:
    return lambda v: (x := finite_float(v)) is not None and low <= x <= high


def text(v: Any) -> bool:
    return isinstance(v, str) and bool(v) and lone_surrogate(v) is None


def never(v: Any) -> bool:
    return False


def _set(doc: Any, place: tuple[Any, ...], value: Any) -> Any:
    doc = copy.deepcopy(doc)
    node = doc
    for key in place[:-1]:
        node = node[key]
    if isinstance(value, str) and value == DROP:
        del node[place[-1]]
    else:
        node[place[-1]] = value
    return doc


def _text(doc: Any) -> str:
    return json.dumps(doc, allow_nan=True).replace(f'"{DEEP}"', "[" * 70 + "1" + "]" * 70)


OPTIONAL = {"efficiency", "total/gen_groups", "rev", "a"}  # keys a record may lack (a metric, a task)


def _valid(check: Callable[[Any], bool], value: Any, place: tuple[Any, ...]) -> bool:
    if isinstance(value, str) and value in (DEEP, DROP):
        # (a streak left out leaves a shorter array: the reader takes any length, the curriculum checks it fits)
        return value == DROP and (place[-1] in OPTIONAL or place == ("streaks", 1))
    return check(value)


# -- each reader: a good record, its fields' rules, how it is written and read ------------------------------
REWARD = {"step": 1, "dataset": "d", "id": "q1", "rewards": [0.0, 1.0]}
REWARD_RULES: dict[tuple[Any, ...], Callable[[Any], bool]] = {
    ("step",): integer(),
    ("dataset",): text,
    ("id",): lambda v: (isinstance(v, str) and lone_surrogate(v) is None) or integer(INT64_MIN)(v),
    ("rewards",): never,  # replaced whole: an array of two numbers is the only good value, and none is in HOSTILE
    ("rewards", 0): number(0.0, 1.0),
}
METRICS = {"step": 2, "efficiency": 0.5, "total/gen_groups": 4}  # the line after step 1
METRICS_RULES: dict[tuple[Any, ...], Callable[[Any], bool]] = {
    ("step",): integer(2),  # a later step than the line before's only
    ("efficiency",): lambda v: v is None or number()(v),
    ("total/gen_groups",): lambda v: v is None or number()(v),
}
COMPLETION = {"dataset": "d", "id": "q1", "n": 4, "n_correct": 2}
COMPLETION_RULES: dict[tuple[Any, ...], Callable[[Any], bool]] = {
    ("dataset",): text,
    ("id",): lambda v: (isinstance(v, str) and lone_surrogate(v) is None) or integer(INT64_MIN)(v),
    ("n",): lambda v: number(2.0)(v) and float(v).is_integer(),  # a whole number of samples, >= n_correct
    ("n_correct",): number(0.0, 4.0),
}


def _logs(name: str, doc: Any, root: Path) -> tuple[Path, Callable[[], Any]]:
    path = root / "log.jsonl"
    if name == "reward log":
        first = json.dumps({**REWARD, "step": 0, "dataset": "d0"})  # (another dataset: an integer id is good)
        path.write_text(first + "\n" + _text(doc) + "\n")
        return path, lambda: read_reward_log(path)
    if name == "cut-back":
        path.write_text(_text(doc) + "\n")
        return path, lambda: truncate_log(path, 5)
    if name == "metrics log":
        path.write_text(json.dumps({"step": 1, "efficiency": 0.25}) + "\n" + _text(doc) + "\n")
        return path, lambda: read_metrics(path)
    path.write_text(_text(doc) + "\n")
    return path, lambda: read_completions([path])


LOGS = {
    "reward log": (REWARD, REWARD_RULES),
    "cut-back": (REWARD, {("step",): integer()}),
    "metrics log": (METRICS, METRICS_RULES),
    "stratify input": (COMPLETION, COMPLETION_RULES),
}


@FUZZ
@given(name=st.sampled_from(sorted(LOGS)), pick=st.integers(0, 9), value=st.sampled_from(HOSTILE))
def test_a_hostile_field_of_a_log_line_is_refused_naming_the_file(
    tmp_path_factory: pytest.TempPathFactory, name: str, pick: int, value: Any
) -> None:
    good, rules = LOGS[name]
    place = sorted(rules, key=str)[pick % len(rules)]
    root = tmp_path_factory.mktemp("log")
    path, read = _logs(name, _set(good, place, value), root)
    if _valid(rules[place], value, place):
        read()  # a good value is read
        return
    with pytest.raises(snooze.SnoozeError) as err:
        read()
    assert str(path) in str(err.value), err.value


# -- the trainer's records ------------------------------------------------------------------------------------
def _trainer_readers() -> dict[str, tuple[Any, dict[tuple[Any, ...], Callable[[Any], bool]], Callable[[Path], Any]]]:
    from snooze.trainer import _records

    def pipeline_metric(v: Any) -> bool:
        return v is None or number()(v) or (isinstance(v, dict) and v.get("nonfinite") in ("nan", "inf", "-inf"))

    return {
        "trainer.json": (
            {"step": 3, "elapsed": 1.5},
            {("step",): integer(), ("elapsed",): number(0.0)},
            _records.read_trainer_meta,
        ),
        "curriculum.json": (
            {"version": 1, "stage": 0, "streaks": [0, 2], "n_stages": 2},
            {
                ("version",): integer(1, 1),
                ("stage",): integer(),
                ("streaks",): lambda v: isinstance(v, list) and all(integer()(s) for s in v),
                ("streaks", 1): integer(),
                ("n_stages",): integer(1),
            },
            _records.read_curriculum_state,
        ),
        "pipeline.json": (
            {"batches": [{"version": 1, "groups": 2, "metrics": {"a": 0.5, "b": {"nonfinite": "nan"}}}]},
            {
                ("batches",): lambda v: isinstance(v, list) and not v,
                ("batches", 0, "version"): integer(),
                ("batches", 0, "groups"): integer(),
                ("batches", 0, "metrics"): lambda v: isinstance(v, dict) and all(map(pipeline_metric, v.values())),
                ("batches", 0, "metrics", "a"): pipeline_metric,
                ("batches", 0, "metrics", "b", "nonfinite"): lambda v: v in ("nan", "inf", "-inf"),
            },
            _records.read_pipeline_meta,
        ),
        "meta.json": (
            {"steps": 40, "val_accuracy": 0.5, "val_by_task": {"rev": 0.5}, "seconds": 2.0, "task_steps": {"rev": 20}},
            {
                ("steps",): integer(),
                ("val_accuracy",): number(0.0, 1.0),
                ("val_by_task", "rev"): number(0.0, 1.0),
                ("seconds",): number(0.0),
                ("task_steps", "rev"): integer(),
            },
            lambda p: _records.read_warmup_meta(p, "delete the cache"),
        ),
    }


@FUZZ
@given(
    name=st.sampled_from(["trainer.json", "curriculum.json", "pipeline.json", "meta.json"]),
    pick=st.integers(0, 9),
    value=st.sampled_from(HOSTILE),
)
def test_a_hostile_field_of_a_trainer_record_is_refused_naming_the_file(
    tmp_path_factory: pytest.TempPathFactory, name: str, pick: int, value: Any
) -> None:
    good, rules, read = _trainer_readers()[name]
    place = sorted(rules, key=str)[pick % len(rules)]
    path = tmp_path_factory.mktemp("ck") / name
    path.write_text(_text(_set(good, place, value)))
    if _valid(rules[place], value, place):
        read(path)
        return
    with pytest.raises(snooze.StateError) as err:
        read(path)
    assert str(path) in str(err.value), err.value


def test_the_issues_cases_in_the_trainers_records(tmp_path: Path) -> None:
    """``int()`` took each of these: ``true`` as step 1, ``0.9`` as 0, ``"3"`` as 3."""
    from snooze.trainer._records import read_curriculum_state, read_trainer_meta

    for text, read in [
        ('{"step": true, "elapsed": 1.0}', read_trainer_meta),
        ('{"step": 0.9, "elapsed": 1.0}', read_trainer_meta),
        ('{"step": "3", "elapsed": 1.0}', read_trainer_meta),
        ('{"step": 3, "elapsed": 1e999}', read_trainer_meta),
        ('{"version": 1, "stage": true, "streaks": [0], "n_stages": 2}', read_curriculum_state),
        ('{"version": 1, "stage": 0, "streaks": [0.9], "n_stages": 2}', read_curriculum_state),
    ]:
        (tmp_path / "f.json").write_text(text)
        with pytest.raises(snooze.StateError, match=str(tmp_path / "f.json")):
            read(tmp_path / "f.json")


# -- a baseline checkpoint's model shape ----------------------------------------------------------------------
SHAPE = {"vocab_size": 46, "n_layer": 1, "n_head": 2, "d_model": 8, "max_len": 12}


@pytest.fixture(scope="module")
def weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from snooze.trainer.model import ModelConfig, TinyGPT

    folder = tmp_path_factory.mktemp("model")
    torch.save(TinyGPT(ModelConfig(**SHAPE)).state_dict(), folder / "model.pt")
    return folder


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(sorted(SHAPE)), value=st.sampled_from([*HOSTILE, 2**40, 16, "extra"]))
def test_a_hostile_model_shape_beside_a_baseline_checkpoint_is_refused_before_a_model_is_built(
    weights: Path, field: str, value: Any
) -> None:
    """``meta.json``'s ``model`` must be ``ModelConfig``'s integers and agree with the weights: a ``d_model`` of
    ``2**40`` (or ``10**400``) was handed to ``TinyGPT`` to allocate; ``n_layer: true`` was a layer."""
    from snooze.experiments.baseline import load_checkpoint

    shape = {**SHAPE, "unknown_field": 1} if value == "extra" else _set(SHAPE, (field,), value)
    (weights / "meta.json").write_text(_text({"model": shape}))
    if value == DROP or (is_int(value) and value == SHAPE[field]):  # a field left out is read off the weights
        assert load_checkpoint(weights) is not None
        return
    with pytest.raises(snooze.DataError, match=str(weights / "meta.json")):
        load_checkpoint(weights)
