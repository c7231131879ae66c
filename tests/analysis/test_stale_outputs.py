"""An output folder holds one run's files (issue 51, left from round 4): an earlier run's output that this run
does not write would sit beside the new numbers as if it were theirs. Cases, each stale on the old code:

- ``snooze stratify --no-plot`` left the older ``pass_rates.png`` and ``strata.png``;
- ``snooze stratify`` without pyarrow left an older ``prompts.parquet`` beside the new ``prompts.csv``;
- ``snooze replay --no-plot`` left the older ``replay.png``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from snooze.analysis import outputs
from snooze.analysis.stratify import StratifyConfig, stratify
from snooze.cli.main import main
from snooze.logs import RewardLogHeader, RewardLogWriter

ROWS = [
    {"dataset": "m", "id": 1, "model": "a", "rewards": [1, 0, 1, 0]},
    {"dataset": "m", "id": 2, "model": "a", "rewards": [1, 1, 1, 1]},
]


def test_stratify_removes_what_it_no_longer_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "b.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    result = stratify([src], StratifyConfig(group_size=2))
    out = tmp_path / "out"
    out.mkdir()
    for name in ("pass_rates.png", "strata.png", "prompts.parquet"):
        (out / name).write_bytes(b"an earlier run's")
    monkeypatch.setattr(outputs, "_parquet_bytes", lambda table: None)  # pyarrow missing
    written = outputs.write_stratification(result, out, plots=False)
    assert (
        sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written) == ["curriculum.json", "prompts.csv"]
    )


def test_replay_no_plot_removes_an_earlier_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "r.jsonl"
    with RewardLogWriter(log, header=RewardLogHeader(group_size=2, batch_size=1, max_gen_rounds=1)) as w:
        for step in range(3):
            w.write(step, ["d"], [step % 2], [[1.0, 0.0]])
    out = tmp_path / "replay"
    out.mkdir()
    (out / "replay.png").write_bytes(b"an earlier run's")
    assert main(["replay", str(log), "--out", str(out), "--no-plot"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["replay.json"]
    assert "removed " + str(out / "replay.png") in capsys.readouterr().out
