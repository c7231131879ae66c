"""The metrics log: written one line per step (NaN as null), read back with the logs' one rule for bad lines."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from snooze.core.errors import DataError
from snooze.logs import MetricsLogWriter, read_metrics, truncate_log


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_read_metrics_from_dir_and_file_skips_blank_lines(tmp_path: Path) -> None:
    f = _write(tmp_path / "metrics.jsonl", ['{"step": 1, "gen/rounds": 2}', "", '{"step": 2, "gen/rounds": 3}'])
    assert read_metrics(tmp_path) == [{"step": 1, "gen/rounds": 2}, {"step": 2, "gen/rounds": 3}]
    assert read_metrics(f) == read_metrics(tmp_path)


def test_read_metrics_drops_truncated_last_line(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2, "gen/ro', encoding="utf-8")  # killed mid-write
    assert read_metrics(tmp_path) == [{"step": 1}]
    _write(tmp_path / "metrics.jsonl", ['{"step": 1}', '{"step": 2, "gen/ro'])  # a complete line that is not JSON
    with pytest.raises(DataError, match=r"metrics.jsonl, line 2"):
        read_metrics(tmp_path)


def test_read_metrics_rejects_bad_middle_line_naming_it(tmp_path: Path) -> None:
    _write(tmp_path / "metrics.jsonl", ['{"step": 1}', "not json", '{"step": 3}'])
    with pytest.raises(DataError, match=r"metrics.jsonl, line 2"):
        read_metrics(tmp_path)


def test_read_metrics_rejects_non_object_and_missing_file(tmp_path: Path) -> None:
    _write(tmp_path / "metrics.jsonl", ["[1, 2]", '{"step": 1}'])
    with pytest.raises(DataError, match="JSON object"):
        read_metrics(tmp_path)
    with pytest.raises(DataError, match="no metrics file"):
        read_metrics(tmp_path / "nowhere")


def test_writer_appends_flushed_lines_with_non_finite_numbers_as_null(tmp_path: Path) -> None:
    path = tmp_path / "run" / "metrics.jsonl"
    with MetricsLogWriter(path) as log:
        log.write({"step": 0, "train/loss": math.nan, "efficiency": 0.5})
        assert json.loads(path.read_text()) == {"step": 0, "train/loss": None, "efficiency": 0.5}  # flushed at once
    with MetricsLogWriter(path) as log:  # a resumed run appends
        log.write({"step": 1, "train/loss": math.inf})
    assert read_metrics(path.parent) == [
        {"step": 0, "train/loss": None, "efficiency": 0.5},
        {"step": 1, "train/loss": None},
    ]
    assert truncate_log(path, 1) == 1 and read_metrics(path) == [{"step": 0, "train/loss": None, "efficiency": 0.5}]


def test_late_evaluations_leave_out_the_base_and_keep_the_last_ones() -> None:
    from snooze.logs import LATE_EVALS, late_evaluations

    evals = [{"step": s, "eval/accuracy": a} for s, a in [(0, 0.1), (10, 0.5), (20, 0.6), (30, 0.7), (40, 0.2)]]
    assert LATE_EVALS == 3
    assert [x["step"] for x in late_evaluations(evals)] == [20, 30, 40]
    assert [x["step"] for x in late_evaluations(evals[:2])] == [10]  # one evaluation after the base
    assert [x["step"] for x in late_evaluations(evals[:1])] == [0]  # only the base: that one
    assert [x["step"] for x in late_evaluations(evals[1:], n=2)] == [30, 40]  # no base logged: nothing left out
    assert late_evaluations([]) == []
