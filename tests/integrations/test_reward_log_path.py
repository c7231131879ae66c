"""The adapters' reward log (``snooze.integrations._paths``): a fresh run never writes over an earlier
run's log, a resumed one appends. Needs neither TRL nor verl."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from snooze.integrations._paths import open_log


def _run(path: Path, resumed: bool, step: int) -> None:
    with open_log(path, resumed) as log:
        log.write(step, ["d"], [step], [[1.0, 0.0]])


def test_a_fresh_run_moves_an_earlier_log_aside_and_a_resumed_one_appends(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "rewards.jsonl"
    _run(path, resumed=False, step=0)  # nothing there: nothing moved
    _run(path, resumed=True, step=1)  # resumed: appended
    assert [line.count('"step"') for line in path.read_text().splitlines()] == [1, 1]
    first = path.read_bytes()
    with caplog.at_level(logging.WARNING, logger="snooze.integrations._paths"):
        _run(path, resumed=False, step=0)  # the same command again, not resumed
        _run(path, resumed=False, step=0)
    assert (tmp_path / "rewards.earlier-1.jsonl").read_bytes() == first  # kept whole, under the first free name
    assert (tmp_path / "rewards.earlier-2.jsonl").read_text().count("\n") == 1
    assert path.read_text().count("\n") == 1
    assert [r.getMessage().split(" moved it to ")[1].split()[0] for r in caplog.records] == [
        str(tmp_path / "rewards.earlier-1.jsonl"),
        str(tmp_path / "rewards.earlier-2.jsonl"),
    ]


def test_an_empty_log_is_not_worth_keeping(tmp_path: Path) -> None:
    path = tmp_path / "rewards.jsonl"
    path.write_text("")
    _run(path, resumed=False, step=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rewards.jsonl"]
