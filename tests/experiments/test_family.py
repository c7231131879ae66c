"""The regime family's table and figure: paired by seed against DAPO, from summary.json files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from snooze.core.errors import ConfigError
from snooze.experiments.family import FAMILY, run_family
from snooze.experiments.family_table import family_markdown, family_rows, paired, write_family


def _entry(gen: list[float], late: list[float]) -> dict:
    return {
        "gen_groups": {"by_seed": gen},
        "accuracy": {"sampled": {"late": {"by_seed": late}}, "greedy": {"late": {"by_seed": late}}},
    }


def _write(out: Path, regime: str, summary: dict) -> None:
    (out / regime).mkdir(parents=True)
    (out / regime / "summary.json").write_text(json.dumps(summary))


def test_paired_is_per_seed_not_ratio_of_means() -> None:
    summary = {"dynamic_sampling": _entry([100, 300], [0.80, 0.90]), "snooze": _entry([50, 300], [0.79, 0.85])}
    got = paired(summary, "snooze")
    assert got["ratio"]["by_seed"] == [2.0, 1.0]
    assert got["ratio"]["mean"] == pytest.approx(1.5)  # the ratio of the means would be 400/350
    assert got["gap"]["by_seed"] == pytest.approx([-1.0, -5.0])
    assert (got["gap"]["min"], got["gap"]["max"]) == pytest.approx((-5.0, -1.0))


def test_rows_worst_gap_over_regimes_and_table(tmp_path: Path) -> None:
    _write(tmp_path, "a", {"dynamic_sampling": _entry([100], [0.8]), "snooze": _entry([50], [0.795])})
    _write(tmp_path, "b", {"dynamic_sampling": _entry([100], [0.8]), "snooze": _entry([80], [0.77])})
    rows = family_rows(tmp_path, ["a", "b", "missing"])
    assert list(rows["regimes"]) == ["a", "b"]
    assert rows["overall"]["snooze"]["worst_gap"] == pytest.approx(-3.0)
    assert rows["overall"]["snooze"]["mean_ratio"] == pytest.approx((2.0 + 1.25) / 2)
    text = family_markdown(rows)
    assert "| a | 0.800, 100 | 2.00x (2.00-2.00), -0.5" in text
    assert "| **worst regime's gap** | | -3.0 |" in text


def test_write_family_draws_the_frontier(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    _write(
        tmp_path, "a", {"dynamic_sampling": _entry([100, 110], [0.8, 0.82]), "snooze": _entry([50, 60], [0.79, 0.80])}
    )
    write_family(tmp_path, ["a"])
    assert json.loads((tmp_path / "family.json").read_text())["overall"]["snooze"]["regimes"] == 1
    png = (tmp_path / "family_frontier.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000


def test_family_spans_what_it_claims() -> None:
    sizes = {name: p.pool_size * len(p.tasks.split(",")) for name, p in FAMILY.items()}
    assert "default" in FAMILY and len(FAMILY) >= 5
    assert min(sizes.values()) == 300 and max(sizes.values()) == 3000
    assert {len(p.tasks.split(",")) for p in FAMILY.values()} == {1, 2}
    assert len({p.temperature for p in FAMILY.values()}) >= 2
    assert all(math.isfinite(p.lr) for p in FAMILY.values())
    assert {p.group_size for p in FAMILY.values()} == {8, 16}  # G=16 at the default's rollouts a step
    g16 = FAMILY["g16"]
    assert g16.batch_size * g16.group_size == FAMILY["default"].batch_size * FAMILY["default"].group_size


def test_unknown_regime_is_refused_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown regime"):
        run_family(tmp_path / "out", ["nope"])
    assert not (tmp_path / "out").exists()
