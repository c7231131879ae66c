"""The staleness table, built from run folders laid out as benchmarks/staleness.py writes them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from snooze.core.errors import ConfigError, DataError
from snooze.experiments.staleness import run_staleness, staleness_markdown, staleness_rows, write_staleness


def _entry(groups: list[float], late: list[float]) -> dict[str, Any]:
    return {"gen_groups": {"by_seed": groups}, "accuracy": {"sampled": {"late": {"by_seed": late}}}}


def _write(out: Path, k: int, summary: dict[str, Any], wall: float, resumed: int = 0) -> None:
    folder = out / f"k{k}"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "run_meta.json").write_text(json.dumps({"wall_seconds": wall, "resumed_runs": resumed}))


def test_rows_pair_each_arm_with_dapo_by_seed_per_k(tmp_path: Path) -> None:
    _write(
        tmp_path,
        0,
        {
            "dynamic_sampling": _entry([4000, 5000], [0.50, 0.60]),
            "snooze-f1": _entry([2000, 4000], [0.49, 0.62]),
        },
        wall=1200,
    )
    _write(
        tmp_path,
        2,
        {"dynamic_sampling": _entry([6000, 6000], [0.40, 0.50]), "snooze": _entry([3000, 2000], [0.35, 0.50])},
        wall=600,
        resumed=1,
    )
    rows = staleness_rows(tmp_path)
    assert list(rows) == ["0", "2"]  # k = 1 was not run: left out
    f1 = rows["0"]["arms"]["snooze-f1"]
    assert f1["ratio"]["by_seed"] == [2.0, 1.25] and f1["ratio"]["mean"] == pytest.approx(1.625)
    assert f1["gap"]["by_seed"] == pytest.approx([-1.0, 2.0]) and f1["gap"]["min"] == pytest.approx(-1.0)
    assert rows["0"]["dapo"]["gen"]["mean"] == 4500 and rows["0"]["dapo"]["late"]["mean"] == pytest.approx(0.55)
    assert rows["0"]["minutes"] == 20 and rows["2"]["minutes"] is None  # a resumed comparison's time is not its own
    text = staleness_markdown(rows)
    lines = text.splitlines()
    assert lines[0] == "| k | DAPO late avg@k, groups | snooze-f1 | snooze | minutes |"
    assert lines[2] == "| 0 | 0.550, 4500 | 1.62x (1.25-2.00), +0.5 (-1.0 to +2.0) | - | 20 |"
    assert lines[3] == "| 2 | 0.450, 6000 | - | 2.50x (2.00-3.00), -2.5 (-5.0 to +0.0) | - |"
    assert write_staleness(tmp_path) == text and (tmp_path / "staleness.md").read_text() == text + "\n"
    assert json.loads((tmp_path / "staleness.json").read_text())["2"]["arms"]["snooze"]["ratio"]["mean"] == 2.5


def test_a_summary_without_dapo_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, 1, {"snooze": _entry([1.0], [0.5])}, wall=1)
    with pytest.raises(DataError, match="has no dynamic_sampling arm"):
        staleness_rows(tmp_path)


@pytest.mark.parametrize("ks, arms", [([-1], ["dynamic_sampling"]), ([0], ["snooze"])])
def test_bad_ks_or_arms_are_refused_before_anything_runs(tmp_path: Path, ks: list[int], arms: list[str]) -> None:
    with pytest.raises(ConfigError):
        run_staleness(tmp_path / "out", ks, arms)
    assert not (tmp_path / "out").exists()
