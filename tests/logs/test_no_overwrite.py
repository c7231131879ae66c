"""No writer truncates an existing file it did not create in this run (issue 51, defect 1).

One rule for every log writer (``snooze.logs._jsonl.move_aside``, used by ``LineWriter``): a writer that starts a
log afresh moves an earlier non-empty file aside to ``<stem>.earlier-N<suffix>`` and warns. The cases it covers:

- TRL's ``RewardLogger`` opened its path in write mode on a fresh run: a second run of the same script wiped the
  first run's reward log;
- ``RewardLogWriter`` / ``MetricsLogWriter`` with ``append=False`` over an existing log (the same open);
- a ``RewardLogHeader`` built from numpy integers truncated the log, then failed with ``TypeError`` (the header is
  now checked, numpy integers taken as Python's, and its line made before any file is opened);
- a header that cannot be written at all is refused when it is built, and leaves the file whole.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from snooze.core.errors import DataError
from snooze.logs import MetricsLogWriter, RewardLogHeader, RewardLogWriter, read_reward_log


def _first_run(path: Path) -> bytes:
    with RewardLogWriter(path, header=RewardLogHeader(group_size=2)) as log:
        log.write(0, ["d"], ["a"], [[1.0, 0.0]])
    return path.read_bytes()


def test_a_fresh_writer_moves_an_earlier_log_aside(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rewards.jsonl"
    first = _first_run(path)
    with caplog.at_level(logging.WARNING):
        second = _first_run(path)
    assert (tmp_path / "rewards.earlier-1.jsonl").read_bytes() == first  # was truncated: gone
    assert path.read_bytes() == second
    assert "moved it to" in caplog.text and "rewards.earlier-1.jsonl" in caplog.text
    metrics = tmp_path / "metrics.jsonl"
    with MetricsLogWriter(metrics) as m:
        m.write({"step": 0, "x": 1.0})
    with MetricsLogWriter(metrics, append=False) as m:
        m.write({"step": 0, "x": 2.0})
    assert json.loads((tmp_path / "metrics.earlier-1.jsonl").read_text())["x"] == 1.0


def test_a_header_of_numpy_integers_writes_and_a_bad_one_touches_nothing(tmp_path: Path) -> None:
    header = RewardLogHeader(group_size=np.int64(2), batch_size=np.int32(4), options={"factor": np.int64(5)})
    assert type(header.group_size) is int and type(header.batch_size) is int and header.options == {"factor": 5}
    path = tmp_path / "rewards.jsonl"
    with RewardLogWriter(path, header=header) as log:  # was: truncated, then TypeError writing the header
        log.write(0, ["d"], ["a"], [[1.0, 0.0]])
    assert read_reward_log(path).header == header
    before = path.read_bytes()
    with pytest.raises(DataError, match="field 'options': cannot be written as JSON"):
        RewardLogHeader(group_size=2, options={"f": object()})
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["rewards.jsonl"]
