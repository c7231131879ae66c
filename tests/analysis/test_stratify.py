"""Strata, signal_prob, curriculum weights worked out by hand; input errors name file, row and field."""

from __future__ import annotations

import contextlib
import csv
import json
from pathlib import Path

import numpy as np
import pytest
from helpers_disk import failing_fsync, file_size_limit, files

from snooze.analysis.outputs import write_stratification
from snooze.analysis.stratify import StratifyConfig, assign_strata, signal_prob, stratify
from snooze.core.errors import DataError
from snooze.curriculum import Curriculum

ROWS = [
    {"dataset": "m", "id": 1, "model": "a", "rewards": [1, 1, 1, 1]},
    {"dataset": "m", "id": 1, "model": "b", "n": 4, "n_correct": 4},  # pooled 8/8 = 1: too_easy
    {"dataset": "m", "id": 2, "model": "a", "rewards": [1, 0, 1, 0]},
    {"dataset": "m", "id": 2, "model": "b", "n": 4, "n_correct": 0},  # pooled 2/8 = 0.25: hard
    {"dataset": "m", "id": 3, "model": "a", "n": 2, "n_correct": 1},  # 0.5: medium
    {"dataset": "h", "id": "x", "model": "a", "n": 4, "n_correct": 0},  # 0: too_hard
    {"dataset": "h", "id": "y", "model": "a", "n": 4, "n_correct": 3},  # 0.75: easy
]


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_strata_pass_rates_and_signal_prob_by_hand(tmp_path: Path) -> None:
    r = stratify([_jsonl(tmp_path / "b.jsonl", ROWS)], StratifyConfig(group_size=2))
    c = r.columns
    assert c["stratum"].tolist() == ["too_easy", "hard", "medium", "too_hard", "easy"]
    assert c["pass_rate"].tolist() == [1.0, 0.25, 0.5, 0.0, 0.75]
    np.testing.assert_array_equal(c["pass_rate/b"], [1.0, 0.0, np.nan, np.nan, np.nan])
    assert c["n_samples"].tolist() == [8, 8, 2, 4, 4]
    # G=2: 1 - p^2 - (1-p)^2 = 2p(1-p)
    np.testing.assert_allclose(c["signal_prob"], [0.0, 0.375, 0.5, 0.0, 0.375])


def test_curriculum_drops_too_easy_postpones_too_hard_and_weights_by_signal(tmp_path: Path) -> None:
    r = stratify([_jsonl(tmp_path / "b.jsonl", ROWS)], StratifyConfig(group_size=2, advance_step=50))
    cur = r.curriculum
    assert cur["drop"] == {"m": [1]}
    one, two = cur["stages"]
    assert one["exclude"] == {"h": ["x"]} and one["advance"] == [{"step": 50}]
    # stage 1: m = .375 + .5 = .875, h = .375 (y) -> .875/1.25, .375/1.25
    assert one["weights"] == pytest.approx({"h": 0.3, "m": 0.7})
    # stage 2 adds x with the floor 0.05: h = .425, m = .875 -> /1.3
    assert two["weights"] == pytest.approx({"h": 0.425 / 1.3, "m": 0.875 / 1.3})
    loaded = Curriculum.from_dict(json.loads(json.dumps(cur)))  # the scheduler side reads it as is
    assert [s.name for s in loaded.stages] == ["without-too-hard", "all"] and loaded.drop == {"m": [1]}


def test_outputs_and_parquet_input(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    rows = [dict(r, id=str(r["id"])) for r in ROWS if "n" in r]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "b.parquet")
    written = write_stratification(stratify([tmp_path / "b.parquet"]), tmp_path / "out")
    assert {p.name for p in written} == {
        "prompts.csv",
        "prompts.parquet",
        "curriculum.json",
        "pass_rates.png",
        "strata.png",
    }
    with open(tmp_path / "out" / "prompts.csv") as handle:
        table = list(csv.DictReader(handle))
    assert [t["stratum"] for t in table] == ["too_easy", "too_hard", "medium", "too_hard", "easy"]
    assert pq.read_table(tmp_path / "out" / "prompts.parquet").column("pass_rate/b").to_pylist()[:2] == [1.0, 0.0]


def test_thresholds_are_configurable() -> None:
    cfg = StratifyConfig(too_hard=0.1, hard=0.3, easy=0.6, too_easy=0.9)
    assert assign_strata(np.array([0.05, 0.2, 0.5, 0.7, 0.95]), cfg).tolist() == [
        "too_hard",
        "hard",
        "medium",
        "easy",
        "too_easy",
    ]
    assert signal_prob(np.array([0.5]), 8)[0] == pytest.approx(1 - 2 * 0.5**8)


@pytest.mark.parametrize(
    ("bad", "row", "field"),
    [
        ({"dataset": "m", "id": 9, "model": "a", "n": 2, "n_correct": 1, "score": 3}, 2, "score"),
        ({"dataset": "m", "id": 9, "model": "a", "rewards": [1, 1.5]}, 2, "rewards"),
        ({"dataset": "m", "id": 1, "model": "a", "n": 2, "n_correct": 1}, 2, "id"),  # duplicate of row 1
        ({"dataset": "m", "id": 9, "model": "a", "n": 2, "n_correct": 3}, 2, "n_correct"),
        ({"dataset": "m", "id": 9, "model": "a", "n": 2}, 2, "n_correct"),
        ({"dataset": "m", "id": 9, "model": "a", "n": 4.5, "n_correct": 1}, 2, "n"),  # a count of samples is whole
        (
            {"dataset": "m", "id": 2**63, "model": "a", "n": 2, "n_correct": 1},
            2,
            "id",
        ),  # no int64: was an OverflowError
        ({"dataset": "m", "id": "1", "model": "b", "n": 2, "n_correct": 1}, 2, "id"),  # row 1's id 1 is an int
    ],
)
def test_bad_rows_name_file_row_and_field(tmp_path: Path, bad: dict, row: int, field: str) -> None:
    path = _jsonl(tmp_path / "b.jsonl", [ROWS[0], bad])
    with pytest.raises(DataError) as err:
        stratify([path])
    assert f"{path}, row {row}, field {field!r}" in str(err.value)


def test_a_reward_log_given_to_stratify_says_what_it_is(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "rewards.jsonl", [{"step": 0, "dataset": "m", "id": 1, "rewards": [1.0, 0.0]}])
    with pytest.raises(
        DataError,
        match=r"row 1, field 'step': unknown column; .* "
        r"this is a reward log of a training run, which `snooze replay` reads",
    ):
        stratify([path])


def test_model_with_no_rows(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "b.jsonl", ROWS)
    with pytest.raises(DataError, match=r"model 'c' has no rows \(field 'model'\)"):
        stratify([path], models=["a", "c"])


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from snooze.cli.main import main

    path = _jsonl(tmp_path / "b.jsonl", ROWS)
    assert main(["stratify", str(path), "--out", str(tmp_path / "o"), "--group-size", "2", "--no-plot"]) == 0
    assert json.loads((tmp_path / "o" / "curriculum.json").read_text())["drop"] == {"m": [1]}
    assert "stage 2 (all)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "how",
    ["fsync 1", "fsync 2", "fsync 3", "file size limit"],
    ids=["prompts.csv", "curriculum.json", "prompts.parquet", "prompts.parquet too large"],
)
def test_a_full_disk_leaves_the_last_stratification_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """The outputs were written one after the other in place: a full disk left a truncated prompts.csv
    beside the old curriculum.json (a mismatched set) and said only "No space left on device". Now they
    are written aside and renamed into place together; the error names the file."""
    pytest.importorskip("pyarrow")
    from snooze.cli.main import main

    out = tmp_path / "o"
    old = _jsonl(tmp_path / "old.jsonl", ROWS)
    assert main(["stratify", str(old), "--out", str(out), "--no-plot"]) == 0
    before = files(out)
    new = _jsonl(tmp_path / "new.jsonl", [{**r, "n_correct": 0} if "n" in r else r for r in ROWS])
    capsys.readouterr()
    limit = max(len(before["prompts.csv"]), len(before["curriculum.json"])) + 50  # the Parquet file is larger
    with monkeypatch.context() as mp, file_size_limit(limit) if how == "file size limit" else contextlib.nullcontext():
        if how.startswith("fsync"):
            failing_fsync(mp, int(how[-1]))
        assert main(["stratify", str(new), "--out", str(out), "--no-plot"]) == 2
    name = {"fsync 1": "prompts.csv", "fsync 2": "curriculum.json"}.get(how, "prompts.parquet")
    why = "File too large" if how == "file size limit" else "No space left on device"
    err = capsys.readouterr().err
    assert err.startswith(f"snooze stratify: error: {out / name}: {why}; nothing was written"), err
    assert files(out) == before  # byte for byte, and no temporary file left
    assert main(["stratify", str(new), "--out", str(out), "--no-plot"]) == 0  # and the next run writes them all
    assert files(out) != before and set(files(out)) == set(before)


def test_a_figure_that_fails_leaves_the_old_one_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Figures are drawn after the data files, each aside and renamed into place."""
    import errno

    import snooze.plots as plots

    r = stratify([_jsonl(tmp_path / "b.jsonl", ROWS)], StratifyConfig(group_size=2))
    out = tmp_path / "o"
    write_stratification(r, out)
    before = files(out)

    def half_drawn(rates: object, path: Path) -> None:
        Path(path).write_bytes(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plots, "plot_pass_rates", half_drawn)
    with pytest.raises(OSError, match="No space left on device; the figure is as it was") as err:
        write_stratification(r, out)
    assert err.value.filename == str(out / "pass_rates.png")
    assert files(out) == before


MIXED = [  # dataset a: integer ids; b: string ids; c: string ids written as whole numbers
    {"dataset": "a", "id": 0, "n": 4, "n_correct": 1},
    {"dataset": "a", "id": 7, "n": 4, "n_correct": 2},
    {"dataset": "b", "id": "b0", "n": 4, "n_correct": 3},
    {"dataset": "c", "id": "17", "n": 4, "n_correct": 0},
]


@pytest.mark.parametrize("rows", [MIXED, MIXED[:3], MIXED[3:]], ids=["all", "int and str", "str like an int"])
def test_ids_of_every_type_are_read_back_as_they_were_from_csv_and_parquet(tmp_path: Path, rows: list) -> None:
    """Datasets whose ids differ in type: prompts.parquet's id column was all strings (the integer 0
    became "0") while prompts.csv kept the integers, and a string id "17" became the integer 17 in the
    CSV. Now both files hold the ids as text with an id_type column, and agree."""
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "o"
    write_stratification(stratify([_jsonl(tmp_path / "b.jsonl", rows)]), out, plots=False)
    with open(out / "prompts.csv", newline="") as fh:
        from_csv = list(csv.DictReader(fh))
    from_parquet = pq.read_table(out / "prompts.parquet").to_pylist()
    want = [(r["dataset"], r["id"]) for r in rows]

    def typed(row: dict) -> tuple:
        return row["dataset"], int(row["id"]) if row["id_type"] == "int" else row["id"]

    assert [typed(r) for r in from_csv] == [typed(r) for r in from_parquet] == want
    assert list(from_csv[0]) == list(from_parquet[0])  # the same columns, id_type right after id
    assert list(from_parquet[0])[:3] == ["dataset", "id", "id_type"]
    assert {type(r["id"]) for r in from_parquet} == {str}


def test_ids_of_one_type_keep_their_column_type(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    for name, ids in (("ints", [3, 1]), ("strs", ["x", "007"])):
        rows = [{"dataset": "a", "id": i, "n": 4, "n_correct": 1} for i in ids]
        write_stratification(stratify([_jsonl(tmp_path / f"{name}.jsonl", rows)]), tmp_path / name, plots=False)
        table = pq.read_table(tmp_path / name / "prompts.parquet")
        assert "id_type" not in table.column_names and table.column("id").to_pylist() == ids
