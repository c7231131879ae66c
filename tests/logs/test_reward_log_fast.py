"""The reward log's fast path (lines in the writer's form, read from a pattern match without building the
JSON object) changes the speed of the read, never its result: every line it takes is a JSON object the
checked path accepts with the same fields, and a log reads (or fails) the same with and without it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from snooze.core.errors import DataError
from snooze.logs import RewardLogWriter, _reward_log, read_reward_log


def _mostly(usual: st.SearchStrategy, odd: st.SearchStrategy) -> st.SearchStrategy:
    """``usual`` about three times in four (so most lines are near the writer's form), else ``odd``."""
    return st.integers(0, 3).flatmap(lambda i: odd if i == 0 else usual)


SPACE = _mostly(st.sampled_from(["", " "]), st.sampled_from(["  ", "\t", "\n", "\u00a0", "\x0b", "\x0c"]))
NUMBER = _mostly(
    st.one_of(st.sampled_from(["0", "1", "-0", "1.0", "0.5", "2E-3", "1e400"]), st.floats(0, 1).map(repr)),
    st.one_of(
        st.sampled_from(["01", "1.", ".5", "+1", "NaN", "Infinity", "true", "null", "1" * 17, "9" * 16, "-1e400"]),
        st.sampled_from(["0.1000000000000000055511151231257827", "1e1000", "0x1", "1_0", "١"]),
        st.floats(allow_nan=True).map(repr),
        st.integers(-(10**20), 10**20).map(str),
    ),
)
TEXT = _mostly(
    st.text(st.characters(codec="ascii", exclude_characters='"\\'), min_size=1, max_size=4),
    st.one_of(
        st.sampled_from(["", 'a\\"b', "\\ud800", "\\u0041", "é", "\x01", "tab\there", "x\\n"]), st.text(max_size=4)
    ),
)
ID = _mostly(
    st.one_of(TEXT.map(lambda t: f'"{t}"'), st.integers(-(10**18), 10**18).map(str)),
    st.one_of(NUMBER, st.sampled_from(["true", "[1]", "null", "1" * 19])),
)


@st.composite
def lines(draw: st.DrawFn) -> str:
    """A line near the writer's form: its fields with odd spacing, numbers, strings and ids."""
    s = draw(SPACE)
    rewards = f"{s},{s}".join(draw(st.lists(NUMBER, min_size=0, max_size=4)))
    fields = [
        f'"step"{s}:{s}{draw(_mostly(st.integers(0, 10**18).map(str), st.one_of(NUMBER, st.just("9" * 19))))}',
        f'"dataset"{s}:{s}"{draw(TEXT)}"',
        f'"id"{s}:{s}{draw(ID)}',
        f'"rewards"{s}:{s}[{s}{rewards}{s}]',
    ]
    if draw(st.integers(0, 2)) == 0:  # the optional field, as the writer puts it last
        fields.append(f'"tokens"{s}:{s}{draw(_mostly(st.integers(0, 10**18).map(str), NUMBER))}')
    if draw(st.integers(0, 7)) == 0:
        fields.append(draw(st.sampled_from(['"extra": 1', '"step": 4', '"id": "again"'])))
    if draw(st.integers(0, 7)) == 0:
        fields = draw(st.permutations(fields))
    return f"{s}{{{s}{f'{s},{s}'.join(fields)}{s}}}{s}"


@settings(max_examples=1500, deadline=None)
@given(lines())
def test_every_line_the_fast_path_takes_is_one_the_checked_path_reads_the_same(text: str) -> None:
    quick = _reward_log._canonical(text)
    if quick is None:
        return
    obj = json.loads(text)
    assert set(_reward_log.REQUIRED_FIELDS) <= set(obj) <= {*_reward_log.REQUIRED_FIELDS, *_reward_log.OPTIONAL_FIELDS}
    step, dataset, pid, rewards = _reward_log._check_line(obj, "log", 1)
    assert (quick[0], quick[1], quick[2]) == (step, dataset, pid) and type(quick[2]) is type(pid)
    assert quick[4] == _reward_log._tokens_of(obj, "log", 1)
    parsed = _reward_log._rewards_array([quick[3]])
    np.testing.assert_array_equal(parsed, np.asarray([rewards], dtype=np.float64))


def _read(path: Path, fast: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    with monkeypatch.context() as m:
        if not fast:
            m.setattr(_reward_log, "_canonical", lambda text: None)
        try:
            log = read_reward_log(path)
        except DataError as exc:
            return str(exc)
    tokens = None if log.tokens is None else log.tokens.tolist()
    return (log.steps.tolist(), log.datasets, log.ids, log.rewards.tolist(), log.lines.tolist(), tokens)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(lines(), st.just('{"step": 1, "dataset": "d", "id": 2, "rewards": [1, 0.5]}')), max_size=6))
def test_a_log_reads_the_same_with_and_without_the_fast_path(tmp_path_factory, texts: list[str]) -> None:
    path = tmp_path_factory.mktemp("log") / "rewards.jsonl"
    path.write_text("".join(t.replace("\n", " ") + "\n" for t in texts), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        assert _read(path, True, mp) == _read(path, False, mp)


def test_the_writers_lines_take_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rewards.jsonl"
    with RewardLogWriter(path) as log:
        log.write(0, ["d", "e", "é"], ["q-1", 7, 8], np.array([[1.0, 0.0, 0.25], [0.1, 1.0, 1.0], [0.0, 0.0, 1.0]]))
        log.write(1, ["d"], ["q-1"], [[1.0, 0.0, 0.5]], [812])
    taken = [_reward_log._canonical(t) is not None for t in path.read_text(encoding="utf-8").splitlines(True)]
    assert taken == [True, True, False, True]  # (json.dumps writes "é" as an escape: the checked path reads that line)
    assert _read(path, True, monkeypatch) == _read(path, False, monkeypatch)
