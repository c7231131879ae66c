"""Arguments of the stratification API (read_completions, stratify, StratifyConfig, signal_prob,
write_stratification): a wrong one is a ConfigError (or, for a hand-built Completions, a DataError) naming it,
raised before any work, never a builtin error, a silent conversion or a half-written output."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import snooze
from snooze.analysis.completions import Completions, read_completions
from snooze.analysis.outputs import write_stratification
from snooze.analysis.stratify import StratifyConfig, signal_prob, stratify

ROWS = [
    {"dataset": "a", "id": 1, "model": "m1", "rewards": [1, 0, 1, 0]},
    {"dataset": "a", "id": 2, "model": "m1", "n": 4, "n_correct": 4},
    {"dataset": "b", "id": "x", "model": "m2", "n": 4, "n_correct": 0},
]


@pytest.fixture
def base(tmp_path: Path) -> Path:
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return path


# 6: signal_prob


def test_signal_prob_of_good_rates_is_unchanged_and_vectorised() -> None:
    p = np.array([0.0, 0.25, 0.5, 1.0])
    assert np.array_equal(signal_prob(p, 4), 1.0 - p**4 - (1.0 - p) ** 4)
    assert signal_prob(0.5, np.int64(2)) == 0.5


@pytest.mark.parametrize(
    ("rates", "group_size", "why"),
    [
        ([0.5, -0.1], 4, "-0.1 is not a pass rate"),
        ([0.5, 1.5], 4, "1.5 is not a pass rate"),
        ([math.nan], 4, "nan is not a pass rate"),
        ([math.inf], 4, "inf is not a pass rate"),
        (10**400, 4, "must be a pass rate or an array"),
        ("0.5", 4, "must be a pass rate or an array"),
        ([0.5, "x"], 4, "must be a pass rate or an array"),
        (None, 4, "must be a pass rate or an array"),
        ([[0.5], [0.1, 0.2]], 4, "must be a pass rate or an array"),
        (0.5, 1, r"group_size\)=1: must be an integer"),
        (0.5, 2.0, r"group_size\)=2.0: must be an integer"),
        (0.5, 10**400, "group_size"),
        (0.5, "8", "group_size"),
    ],
)
def test_signal_prob_refuses_what_is_no_pass_rate_or_group_size(rates, group_size, why: str) -> None:
    with pytest.raises(snooze.ConfigError, match=why):
        signal_prob(rates, group_size)


# 7, 8: read_completions' arguments


def test_one_path_as_str_or_path_is_one_file(base: Path) -> None:
    want = read_completions([base])
    assert read_completions(str(base)) == want
    assert read_completions(base) == want
    assert stratify(str(base)).columns["pass_rate"].tolist() == stratify([base]).columns["pass_rate"].tolist()


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"paths": None}, "paths"),
        ({"paths": 3}, "paths"),
        ({"paths": [None]}, "paths"),
        ({"paths": [""]}, "empty path"),
        ({"paths": []}, "no baseline completions file"),
        ({"models": "m1"}, r"models='m1': must be a list of model names.*models=\['m1'\]"),
        ({"models": [1]}, "not a model name"),
        ({"reward_range": (math.nan, 1)}, "reward_range"),
        ({"reward_range": (1, 0)}, "reward_range"),
        ({"reward_range": "x"}, "reward_range"),
        ({"reward_range": None}, "reward_range"),
        ({"reward_range": (0, 1, 2)}, "reward_range"),
    ],
)
def test_read_completions_refuses_wrong_arguments(base: Path, kwargs: dict, why: str) -> None:
    kwargs = {"paths": [base], **kwargs}
    with pytest.raises(snooze.ConfigError, match=why):
        read_completions(**kwargs)


def test_stratify_refuses_a_bare_str_for_models(base: Path) -> None:
    with pytest.raises(snooze.ConfigError, match="models='m1'"):
        stratify([base], models="m1")


# 9, 10: StratifyConfig


@pytest.mark.parametrize("field", ["drop_too_easy", "postpone_too_hard"])
@pytest.mark.parametrize("value", ["no", 0, 1, None, np.bool_(False)])
def test_stratify_config_booleans_must_be_bools(field: str, value: object) -> None:
    with pytest.raises(snooze.ConfigError, match=f"{field}=.*must be True or False"):
        StratifyConfig(**{field: value})


def test_stratify_config_stores_python_numbers(base: Path, tmp_path: Path) -> None:
    cfg = StratifyConfig(
        group_size=np.int64(4),
        hard=np.float32(0.25),
        easy=np.float64(0.75),
        weight_floor=np.float32(0.5),
        advance_step=np.int64(3),
        advance_efficiency=np.float32(0.5),
        advance_for_steps=np.int32(2),
        reward_range=(np.float32(0), np.int64(1)),
    )
    for name in ("group_size", "hard", "easy", "weight_floor", "advance_step", "advance_efficiency"):
        assert type(getattr(cfg, name)) in (int, float), name
    assert [type(x) for x in cfg.reward_range] == [float, float]
    assert cfg.hard == float(np.float32(0.25))
    written = write_stratification(stratify([base], cfg), tmp_path / "out", plots=False)
    assert json.loads((tmp_path / "out" / "curriculum.json").read_text())["thresholds"]["hard"] == 0.25
    assert written


# 11, 12: stratify's inputs and config


@pytest.mark.parametrize("config", [{}, "x", 3])
def test_stratify_refuses_a_config_that_is_no_stratify_config(base: Path, config: object) -> None:
    with pytest.raises(snooze.ConfigError, match="config"):
        stratify([base], config)


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        (Completions(), "no rows"),
        (Completions(["a"], [1], ["m"], [0.0], [0.0]), "row 1, field 'n'.*at least one sample"),
        (Completions(["a"], [1], ["m"], [4.0], [5.0]), "row 1, field 'n_correct'"),
        (Completions(["a"], [1], ["m"], [math.nan], [0.0]), "row 1, field 'n'.*not a finite"),
        (Completions(["a", "a"], [1], ["m"], [4.0], [1.0]), "lengths differ"),
        (Completions(["a", "a"], [1, 1], ["m", "m"], [4.0, 4.0], [1.0, 2.0]), "row 2.*duplicate"),
        (Completions([""], [1], ["m"], [4.0], [1.0]), "field 'dataset'"),
        (Completions(["a"], [None], ["m"], [4.0], [1.0]), "field 'id'"),
        (Completions(["a", "a"], [1, "x"], ["m", "m"], [4.0, 4.0], [1.0, 1.0]), "row 2, field 'id'"),
        (Completions("a", [1], ["m"], [4.0], [1.0]), "Completions.datasets"),
    ],
)
def test_a_hand_built_completions_is_checked_before_any_work(rows: Completions, why: str, tmp_path: Path) -> None:
    with pytest.raises(snooze.DataError, match=why):
        stratify(rows)


def test_a_hand_built_completions_gives_what_the_file_gives(base: Path) -> None:
    rows = read_completions([base])
    by_hand = Completions(rows.datasets, rows.ids, rows.models, [np.float64(v) for v in rows.n], list(rows.correct))
    a, b = stratify(by_hand), stratify([base])
    assert a.curriculum == b.curriculum
    assert all(np.array_equal(a.columns[k], b.columns[k]) for k in ("pass_rate", "signal_prob", "stratum"))


# 13: write_stratification


@pytest.mark.parametrize(
    ("call", "why"),
    [
        (lambda r, d: write_stratification(r, ""), "empty path"),
        (lambda r, d: write_stratification(r, None), "out_dir"),
        (lambda r, d: write_stratification(r, 123), "out_dir"),
        (lambda r, d: write_stratification(r, d / "file"), "is not a folder"),
        (lambda r, d: write_stratification(r, d / "file" / "sub"), "is not a folder"),
        (lambda r, d: write_stratification({}, d / "out"), "result"),
        (lambda r, d: write_stratification(None, d / "out"), "result"),
        (lambda r, d: write_stratification(r, d / "out", plots="no"), r"plots='no'\): must be True or False"),
    ],
)
def test_write_stratification_refuses_wrong_arguments_writing_nothing(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call, why
) -> None:
    result = stratify([base])
    work = tmp_path / "w"
    work.mkdir()
    monkeypatch.chdir(work)  # (out_dir="" wrote into the current folder: here, where the check below looks)
    (work / "file").write_text("keep")
    with pytest.raises(snooze.ConfigError, match=why):
        call(result, work)
    assert sorted(p.name for p in work.iterdir()) == ["file"] and (work / "file").read_text() == "keep"
