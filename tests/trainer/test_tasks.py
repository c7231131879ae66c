"""Built-in tasks: answers, splits, stable ids, strata."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from snooze.core.errors import ConfigError, DataError
from snooze.trainer.tasks import TaskSpec, make_problem, make_split, parse_tasks, task_splits, verify, warmup_stream


@pytest.mark.parametrize("family", ["add", "rev", "count", "sort"])
def test_problems_have_the_right_answer(family: str) -> None:
    rng = np.random.default_rng(0)
    for level in (1, 3, 5):
        prompt, answer = make_problem(family, level, rng)
        body = prompt[1:-1] if family != "add" else prompt[:-1]
        if family == "add":
            a, b = body.split("+")
            assert answer == str(int(a) + int(b)) and max(len(a), len(b)) == level
        elif family == "rev":
            assert answer == body[::-1] and len(body) == level
        elif family == "sort":
            assert prompt.startswith(":") and answer == "".join(sorted(body)) and len(body) == level
        else:
            letter, s = body.split(":")
            assert answer == str(s.count(letter)) and len(s) == level


def test_splits_are_disjoint_stable_and_warmup_avoids_them() -> None:
    spec = TaskSpec.parse("rev:3-5")
    test = make_split(spec, "test", 50)
    pool = make_split(spec, "pool", 80, exclude=[r["prompt"] for r in test])
    assert pool == make_split(spec, "pool", 80, exclude=[r["prompt"] for r in test])
    assert {r["prompt"] for r in pool}.isdisjoint({r["prompt"] for r in test})
    assert len({r["id"] for r in pool}) == 80 and pool[3]["id"] == "rev:3-5/pool/3"
    banned = {r["prompt"] for r in test + pool}
    stream = warmup_stream([spec], banned)
    assert all(p not in banned for p, _ in (next(stream) for _ in range(500)))


def test_too_small_a_level_range_is_a_data_error() -> None:
    with pytest.raises(DataError, match="distinct"):
        make_split(TaskSpec.parse("add:1"), "pool", 500)  # only 100 one-digit sums exist


def test_strata_and_parsing() -> None:
    easy, hard = TaskSpec.parse("count:4-9").strata()
    assert (easy.name, hard.name) == ("count:4-6", "count:7-9")
    assert [s.name for s in TaskSpec.parse("rev:3-8").strata(6)] == ["rev:3-6", "rev:7-8"]
    for bad in (2, 8):
        with pytest.raises(ConfigError, match="each stratum needs a level"):
            TaskSpec.parse("rev:3-8").strata(bad)
    assert [s.name for s in parse_tasks("add,rev:2")] == ["add:1-3", "rev:2-2"]
    with pytest.raises(ConfigError):
        TaskSpec.parse("rev:2").strata()
    with pytest.raises(ConfigError):
        parse_tasks("mul")


def test_verify_is_exact() -> None:
    assert verify("42", "42") == 1.0 and verify("42 ", "42") == 0.0 and verify("", "0") == 0.0


def test_sort_records_carry_their_level() -> None:
    recs = make_split(TaskSpec.parse("sort:3-7"), "test", 60)
    assert {r["level"] for r in recs} == {3, 4, 5, 6, 7}
    assert all(r["level"] == len(r["prompt"]) - 2 and r["answer"] == "".join(sorted(r["prompt"][1:-1])) for r in recs)


@pytest.mark.parametrize(
    "texts",
    [None, 5, [1], ["add", None], b"add", "add:1-", "add:+2", "add:\u0663", "add:1-\u0663", "add:", "add:1--3", "Add"],
    ids=repr,
)
def test_a_task_list_that_is_not_the_documented_syntax_is_a_config_error(texts: object) -> None:
    with pytest.raises(ConfigError, match="task"):
        parse_tasks(texts)  # type: ignore[arg-type]


@pytest.mark.parametrize("split", ["1", 1.5, True])
def test_a_strata_split_that_is_not_a_level_is_a_config_error(split: object) -> None:
    with pytest.raises(ConfigError, match="strata split"):
        TaskSpec.parse("rev:3-8").strata(split)  # type: ignore[arg-type]


def test_the_documented_task_syntax_parses_as_before() -> None:
    assert [s.name for s in parse_tasks(" add , rev:2,count:4-9,sort:03-7")] == [
        "add:1-3",
        "rev:2-2",
        "count:4-9",
        "sort:3-7",
    ]
    assert [s.name for s in parse_tasks(("add:1-3", "rev"))] == ["add:1-3", "rev:3-7"]
    assert [s.name for s in TaskSpec.parse("rev:3-8").strata(np.int64(6))] == ["rev:3-6", "rev:7-8"]


_ADD = parse_tasks("add")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((_ADD, -1, 5), r"task_splits\(pool_size\)=-1: must be an integer >= 1"),
        ((_ADD, 0, 5), r"task_splits\(pool_size\)=0"),
        ((_ADD, 5, -5), r"task_splits\(test_size\)=-5"),
        ((_ADD, 5, 0), r"task_splits\(test_size\)=0"),
        ((_ADD, 1.5, 5), r"task_splits\(pool_size\)=1.5"),
        ((_ADD, float("nan"), 5), r"task_splits\(pool_size\)=nan"),
        ((_ADD, "5", 5), r"task_splits\(pool_size\)='5'"),
        ((_ADD, True, 5), r"task_splits\(pool_size\)=True"),
        ((_ADD, 5, 5, "0"), r"task_splits\(seed\)='0': must be an integer >= 0"),
        ((_ADD, 5, 5, 1.5), r"task_splits\(seed\)=1.5"),
        ((_ADD, 5, 5, None), r"task_splits\(seed\)=None"),
        ((_ADD, 5, 5, -1), r"task_splits\(seed\)=-1"),
        (("add", 5, 5), r"task_splits\(specs='add'\): must be a list of TaskSpec"),
        ((None, 5, 5), r"task_splits\(specs=None\)"),
        ((["add"], 5, 5), r"task_splits\(specs\): 'add' is not a TaskSpec"),
        (([], 5, 5), r"need at least one"),
        ((_ADD * 2, 5, 5), r"tasks \['add:1-3', 'add:1-3'\]: need at least one, each once"),
    ],
    ids=repr,
)
def test_task_splits_refuses_what_it_cannot_build(args: tuple[object, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        task_splits(*args)  # type: ignore[arg-type]


def test_task_splits_of_the_profiles_are_unchanged() -> None:
    """The reference experiment's pools and tests (the default profile's sizes, seed 0), pinned by a digest."""
    pools, tests = task_splits(parse_tasks("rev:3-8,sort:3-7"), 1000, 200, seed=0)
    digest = hashlib.sha256(json.dumps([pools, tests], sort_keys=True).encode()).hexdigest()
    assert digest == "0827368050da814f4ca6b687d16e3b4743a04b9c0e2cdabd5982a7ae966f11bc"
    same = task_splits(iter(parse_tasks("rev:3-8,sort:3-7")), np.int64(1000), 200, seed=np.int64(0))
    assert same == (pools, tests)
