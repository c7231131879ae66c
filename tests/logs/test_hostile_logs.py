"""Issue 27's root causes in the run logs: a FIFO in place of a log (reading it would block forever),
hostile JSON lines (an integer of 5,000 digits, nesting 100,000 deep), rewards too large for a float,
lone surrogates in names and ids, and a cut-back that fails on a full disk. Each is a DataError naming
the file and the line, and leaves the log as it was."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import snooze
from snooze.logs import read_metrics, read_reward_log, truncate_log

GOOD = '{"step": 0, "dataset": "a", "id": 1, "rewards": [0, 1]}\n'
READERS: dict[str, Callable[[Path], Any]] = {
    "reward log": read_reward_log,
    "metrics log": read_metrics,
    "cut-back": lambda p: truncate_log(p, 1),
}
LINES = {
    "digits": '{"step": %s, "dataset": "a", "id": 1, "rewards": [0, 1]}\n' % ("1" * 5000),
    "depth": '{"step": 0, "dataset": "a", "id": 1, "rewards": %s}\n' % ("[" * 100_000 + "]" * 100_000),
}


@pytest.mark.timeout(20)
@pytest.mark.parametrize("reader", READERS)
def test_a_fifo_in_place_of_a_log_is_a_data_error_not_a_hang(tmp_path: Path, reader: str) -> None:
    os.mkfifo(tmp_path / "log.jsonl")
    with pytest.raises(
        snooze.DataError, match=r"log.jsonl: cannot be read \(is a named pipe \(FIFO\), not a regular file\)"
    ):
        READERS[reader](tmp_path / "log.jsonl")
    assert (tmp_path / "log.jsonl").is_fifo()


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize("reader", READERS)
def test_a_hostile_json_line_is_a_data_error_naming_the_line(tmp_path: Path, reader: str, line: str) -> None:
    path = tmp_path / "log.jsonl"
    good = '{"step": 0, "efficiency": 0.5}\n' if reader == "metrics log" else GOOD  # (a metrics line holds numbers)
    path.write_text(good + LINES[line] + good)
    before = path.read_bytes()
    why = "holds an integer of more than 4300 digits" if line == "digits" else "JSON nested deeper than 64 levels"
    with pytest.raises(snooze.DataError, match=f"log.jsonl, line 2: {why}; fix or remove that line"):
        READERS[reader](path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]


@pytest.mark.parametrize(
    ("rewards", "why"),
    [
        ("[0, 1%s]" % ("0" * 400), "rollout 1: an integer of 1329 bits is too large for a float"),
        ("[0, -1%s]" % ("0" * 400), "rollout 1: an integer of 1329 bits is too large for a float"),
        ("[0, 1e400]", r"rollout 1: inf is not finite"),
    ],
)
def test_a_reward_too_large_for_a_float_is_a_data_error_naming_line_and_field(
    tmp_path: Path, rewards: str, why: str
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(GOOD + f'{{"step": 0, "dataset": "a", "id": 2, "rewards": {rewards}}}\n')
    with pytest.raises(snooze.DataError, match=f"log.jsonl, line 2, field 'rewards': {why}"):
        read_reward_log(path)


@pytest.mark.parametrize(
    ("field", "line"),
    [
        ("dataset", '{"step": 0, "dataset": "a\\ud800", "id": 1, "rewards": [0, 1]}\n'),
        ("id", '{"step": 0, "dataset": "a", "id": "q\\udfff", "rewards": [0, 1]}\n'),
    ],
)
def test_a_lone_surrogate_in_a_reward_log_is_a_data_error_naming_the_line(
    tmp_path: Path, field: str, line: str
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(GOOD + line)
    with pytest.raises(snooze.DataError, match=f"log.jsonl, line 2, field '{field}': .* holds a lone surrogate"):
        read_reward_log(path)


def test_a_cut_back_that_fails_on_a_full_disk_leaves_the_log_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(GOOD + GOOD.replace('"step": 0', '"step": 1'))
    before = path.read_bytes()

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as mp:
        mp.setattr(os, "fsync", full)
        with pytest.raises(
            snooze.DataError, match="log.jsonl: the log could not be cut back to step 1 .*No space left"
        ):
            truncate_log(path, 1)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]
    assert truncate_log(path, 1) == 1 and path.read_text() == GOOD  # and the next cut-back works


@pytest.mark.parametrize("reader", READERS)
def test_a_line_cut_short_inside_a_log_says_so(tmp_path: Path, reader: str) -> None:
    path = tmp_path / "log.jsonl"
    good = '{"step": 0, "efficiency": 0.5}\n' if reader == "metrics log" else GOOD
    path.write_text(good + good[:15] + "\n" + good)  # cut inside a string: json says "Invalid control character at"
    with pytest.raises(snooze.DataError) as err:
        READERS[reader](path)
    assert str(err.value) == (
        f"{path}, line 2: not one JSON object: the line ends before its object does (cut short: a run killed while "
        "writing it, then more lines written after it); each line of a JSONL file is one whole object: fix or "
        "remove that line"
    )


def test_a_line_that_is_not_json_names_the_parser_s_reason_once(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(GOOD + '"tab\there"\n')
    with pytest.raises(
        snooze.DataError, match=r"line 2: not valid JSON \(Invalid control character at column 5\); fix"
    ):
        read_reward_log(path)  # was "Invalid control character at at column 5"
