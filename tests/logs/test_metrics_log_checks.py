"""The metrics log's arguments and lines checked: a cut-back to a step that is not one, and a line its reader
would refuse, are refused and change nothing; numpy's numbers are written as Python's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snooze.core.errors import ConfigError, DataError
from snooze.logs import MetricsLogWriter, late_evaluations, read_metrics, truncate_log

LOG = '{"step": 0, "a": 1.0}\n{"step": 1, "a": 2.0}\n{"step": 2, "a": null}\n'


@pytest.mark.parametrize("bad", [-1, True, 2.5, float("nan"), float("inf"), 10**400, 2**63, "3", None, np.float64(1)])
def test_truncate_log_refuses_a_step_that_is_not_one_and_leaves_the_file(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(LOG)
    with pytest.raises(ConfigError, match="from_step"):
        truncate_log(path, bad)
    assert path.read_text() == LOG


@pytest.mark.parametrize("bad", [None, 1, "", b"m.jsonl"])
def test_truncate_log_refuses_a_path_that_is_not_one(bad: Any) -> None:
    with pytest.raises(ConfigError, match="path"):
        truncate_log(bad, 1)


def test_truncate_log_takes_numpy_integers(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(LOG)
    assert truncate_log(path, np.int64(1)) == 2 and path.read_text() == LOG.splitlines(keepends=True)[0]


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ({"step": 1, "a": "0.5"}, "a"),
        ({"step": 1, "a": True}, "a"),
        ({"step": 1, "a": [1, 2]}, "a"),
        ({"step": 1, "a": 10**400}, "a"),
        ({"step": 1, "a": np.bool_(True)}, "a"),
        ({"a": 1.0}, "step"),
        ({"step": -1}, "step"),
        ({"step": 1.0}, "step"),
        ({"step": True}, "step"),
        ({"step": 2**63}, "step"),
        ({"step": 0}, "step"),  # not above the last line's
        ({"step": 1, ("a", "b"): 1.0}, ("a", "b")),
        ({"step": 1, 3: 1.0}, 3),
    ],
)
def test_writer_refuses_a_line_the_reader_would_refuse_and_writes_nothing(
    tmp_path: Path, line: dict[Any, Any], field: Any
) -> None:
    path = tmp_path / "metrics.jsonl"
    with MetricsLogWriter(path) as log:
        log.write({"step": 0, "a": 1.0})
        with pytest.raises(DataError, match=re.escape(f"line 2 (not written), field {field!r}: ")):
            log.write(line)
        log.write({"step": 1, "a": 2.0})  # the writer goes on from where it was
    assert path.read_text() == '{"step": 0, "a": 1.0}\n{"step": 1, "a": 2.0}\n'
    assert len(read_metrics(path)) == 2


def test_writer_appending_refuses_a_step_the_log_has(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(LOG)
    with MetricsLogWriter(path) as log:
        with pytest.raises(DataError, match="line 4 \\(not written\\), field 'step': 2 after step 2"):
            log.write({"step": 2, "a": 1.0})
        log.write({"step": 3, "a": 1.0})
    assert path.read_text() == LOG + '{"step": 3, "a": 1.0}\n'
    with MetricsLogWriter(path, append=False) as log:  # a new log starts again from any step
        log.write({"step": 0})
    assert read_metrics(path) == [{"step": 0}]


def test_writer_refuses_to_append_to_a_log_cut_short_or_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(LOG + '{"step": 3, "a"')
    with pytest.raises(DataError, match="cut short.*truncate_log"):
        MetricsLogWriter(path)
    path.write_text('{"step": 1}\n{"step": 0}\n')
    with pytest.raises(DataError, match="line 2, field 'step'"):
        MetricsLogWriter(path)
    assert path.read_text() == '{"step": 1}\n{"step": 0}\n'


def test_writer_writes_numpy_numbers_as_python_ones(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    with MetricsLogWriter(path) as log:
        log.write({"step": np.int64(3), "nan": np.float32("nan"), "x": np.float32(1.5), "n": np.int32(7)})
        log.write({"step": 4, "inf": np.float64("inf"), "y": np.float64(0.25), "z": float("-inf")})
    assert path.read_text() == (
        '{"step": 3, "nan": null, "x": 1.5, "n": 7}\n{"step": 4, "inf": null, "y": 0.25, "z": null}\n'
    )


@pytest.mark.parametrize("bad", [None, [1, 2], "step", 3])
def test_writer_write_refuses_what_is_no_mapping(tmp_path: Path, bad: Any) -> None:
    path = tmp_path / "metrics.jsonl"
    with MetricsLogWriter(path) as log, pytest.raises(ConfigError, match="pass a mapping"):
        log.write(bad)
    assert path.read_text() == ""


@pytest.mark.parametrize(("path", "append"), [(None, True), (3, True), ("", True), ("m.jsonl", "no"), ("m.jsonl", 1)])
def test_writer_refuses_arguments_that_are_not_ones(tmp_path: Path, monkeypatch: Any, path: Any, append: Any) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="MetricsLogWriter"):
        MetricsLogWriter(path, append=append)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad", [None, 123, ""])
def test_read_metrics_refuses_a_path_that_is_not_one(tmp_path: Path, monkeypatch: Any, bad: Any) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "metrics.jsonl").write_text(LOG)  # '' would have read this one
    with pytest.raises(ConfigError, match="read_metrics\\(path\\)"):
        read_metrics(bad)


EVALS = [{"step": 0, "acc": 0.1}, {"step": 5, "acc": 0.2}, {"step": 10, "acc": 0.3}]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", None, True])
def test_late_evaluations_refuses_an_n_that_is_not_one(bad: Any) -> None:
    with pytest.raises(ConfigError, match="late_evaluations\\(n\\)"):
        late_evaluations(EVALS, bad)


@pytest.mark.parametrize("bad", [None, [1], "abc", {"step": 1}, 3])
def test_late_evaluations_refuses_evals_that_are_not_lines(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"late_evaluations\(evals[=)]"):
        late_evaluations(bad)


def test_late_evaluations_of_valid_input_unchanged() -> None:
    assert late_evaluations(EVALS, 1) == [EVALS[2]]
    assert late_evaluations(EVALS, np.int64(5)) == EVALS[1:]
    assert late_evaluations((), 3) == []
    assert json.dumps(late_evaluations(EVALS[:1])) == json.dumps(EVALS[:1])
