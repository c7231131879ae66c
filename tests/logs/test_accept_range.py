"""A log written under ``out_of_range="accept"`` (the TRL adapter's default) tells the truth about its range
(issue 53, item 5): its header says ``out_of_range: accept``, a reader takes the range its lines need (with a
warning), so ``snooze replay`` reads it with no flag; ``--override-header`` with another range warns, and the
range printed is the one used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import snooze
from snooze.cli.main import main
from snooze.integrations._paths import open_log


def _log(path: Path) -> Path:
    cfg = snooze.SchedulerConfig(batch_size=2, group_size=2, out_of_range="accept")
    with open_log(path, resumed=False, config=cfg, source="snooze.trl") as log:
        for step in range(4):
            log.write(step, ["d", "d"], [step % 3, 5 + step % 2], [[5.0, 30.0], [12.0, 12.0]])
    return path


def test_a_log_of_rewards_outside_the_declared_range_replays(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path / "r.jsonl")
    assert json.loads(log.read_text().splitlines()[0])["out_of_range"] == "accept"
    assert main(["replay", str(log), "--out", str(tmp_path / "a"), "--no-plot"]) == 0  # was: refused
    out = capsys.readouterr()
    assert "reward range [0, 30]" in out.out and "rewards seen in [0, 30]" in out.err
    assert main(["replay", str(log), "--out", str(tmp_path / "b"), "--no-plot", "--reward-range", "0,40"]) == 2
    assert "contradicts the log's header" in capsys.readouterr().err
    code = main(
        ["replay", str(log), "--out", str(tmp_path / "c"), "--no-plot", "--reward-range", "0,40", "--override-header"]
    )
    out = capsys.readouterr()
    assert code == 0 and "reward range [0, 40]" in out.out  # was: the header's [0, 1], and no warning
    assert "--override-header: reward range [0.0, 40.0] used, where the header says [0.0, 1.0]" in out.err
    saved = json.loads((tmp_path / "c" / "replay.json").read_text())["log"]["header"]
    assert saved["reward_range"] == [0.0, 40.0]
