"""The metrics log's arguments and lines checked: a cut-back to a step that is not one, and a line its reader
would refuse, are refused and change nothing; numpy's numbers are written as Python's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from snooze.core.errors import ConfigError
from snooze.logs import truncate_log

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
