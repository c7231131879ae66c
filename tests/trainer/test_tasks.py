"""Built-in tasks: answers, splits, stable ids, strata."""

from __future__ import annotations

import numpy as np
import pytest

from snooze.core.errors import ConfigError, DataError
from snooze.trainer.tasks import TaskSpec, make_problem, make_split, parse_tasks, verify, warmup_stream


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
