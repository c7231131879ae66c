"""The replay's verdict: DAPO's rounds per step from any log, the docs' rule, the measured cost of each policy
(a table shipped with the package, checked against docs/results.md here), and the lines to paste."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from snooze.analysis.stepsim import dapo_rounds, expected_rounds
from snooze.analysis.verdict import cost_of, framework, measured_costs, next_lines
from snooze.cli.main import main
from snooze.logs import RewardLogHeader, RewardLogWriter

ROOT = Path(__file__).resolve().parents[2]
NUMBER = re.compile(r"(?<![\d.])[-+]?\d+(?:\.\d+)?")  # "1.09-1.37x": a range, not -1.37


def _cells(row: str) -> list[str]:
    """The cells of the docs/results.md table row whose first cell is ``row`` (exactly one such row)."""
    found = [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in (ROOT / "docs" / "results.md").read_text().splitlines()
        if line.strip().startswith("|") and line.strip().strip("|").split("|")[0].strip() == row
    ]
    assert len(found) == 1, f"docs/results.md: {len(found)} table rows start with {row!r} (want one)"
    return found[0][1:]


def test_the_shipped_cost_table_agrees_with_docs_results() -> None:
    table = measured_costs()
    assert {"filter", "recommended", "snooze:1", "snooze:2", "snooze:5"} <= set(table)
    for name, entry in table.items():
        quoted: list[float] = []
        for row in entry["rows"]:
            cells = _cells(row["row"])
            for cell in row["cells"]:
                assert cell in cells, f"{name}: {cell!r} is not a cell of row {row['row']!r}: {cells}"
                quoted += [float(x) for x in NUMBER.findall(cell)]
        numbers = [*entry["saving"], *entry["gaps"]] + ([entry["mean_gap"]] if entry["mean_gap"] is not None else [])
        for x in numbers:
            assert any(abs(x - q) < 1e-9 for q in quoted), f"{name}: {x} is in none of its cited cells"
        assert entry["where"].startswith("docs/results.md") and entry["command"]


def test_filter_and_large_factors_carry_their_measured_loss() -> None:
    assert min(cost_of("filter")[0]["gaps"]) == -43.4  # the collapse of docs/results.md's Limits
    assert cost_of("snooze:5")[0]["gaps"] == [-4.6]
    entry, note = cost_of("snooze:10")
    assert entry is None and "factor 5" in note and "4.6 points" in note
    assert cost_of("snooze-hard:1") == (None, "not measured")


def test_expected_rounds_by_hand() -> None:
    assert expected_rounds(1.0, 16, 16, 8) == 1.0  # every group has signal: one round
    assert expected_rounds(1.0, 20, 8, 8) == 3.0  # ... of 8 groups, 20 wanted: ceil(20 / 8)
    assert expected_rounds(0.0, 16, 16, 8) == 8.0  # none: the round limit
    assert expected_rounds(0.5, 1, 1, 3) == pytest.approx(1 + 0.5 + 0.25)  # P(R > r) = 0.5 ** r
    # B = 2 of G = 2 a round at p = 0.5: P(R > 1) = P(Bin(2) < 2) = 3/4, P(R > 2) = P(Bin(4) < 2) = 5/16
    assert expected_rounds(0.5, 2, 2, 3) == pytest.approx(1 + 0.75 + 5 / 16)


def test_dapo_rounds_pools_each_window() -> None:
    steps = np.repeat(np.arange(20), 4)  # 20 steps of 4 groups: windows of 2 steps
    signal = np.zeros(80, dtype=bool)
    signal[:8] = True  # early: all signal
    signal[-8:] = [True, False] * 4  # late: half
    out = dapo_rounds(steps, signal, 4, 4, 8)
    assert (out["early"]["first_step"], out["early"]["last_step"], out["early"]["groups"]) == (0, 1, 8)
    assert out["early"]["rounds"] == 1.0 and out["late"]["signal_share"] == 0.5
    assert out["late"]["rounds"] == pytest.approx(expected_rounds(0.5, 4, 4, 8))


def test_the_verl_lines_are_the_docs_recommended_setting() -> None:
    doc = (ROOT / "docs" / "sizing.md").read_text()
    spelled = re.findall(r"`(\+trainer\.v1\.snooze\.policy=snooze [^`]*)`", doc)  # the default, written out
    assert len(spelled) == 1 and "carry_surplus=True" in spelled[0]
    assert next_lines("verl", True) == ["trainer.v1.trainer_mode=snooze", *spelled[0].split()]
    assert next_lines("verl", False) == ["trainer.v1.trainer_mode=snooze", "+trainer.v1.snooze.policy=dynamic_sampling"]
    trl = next_lines("trl", True)[0]
    assert "snooze_config={'policy': 'snooze', 'options': {'factor': 1}, 'carry_surplus': True}" in trl
    assert [framework(s) for s in ("snooze import verl", "trl.RewardLogger", "snooze.trainer", "")] == [
        "verl",
        "trl",
        "reference",
        "library",
    ]


def _grpo_log(path: Path, source: str = "snooze import verl") -> Path:
    """A plain GRPO run: 200 prompts met in turn, 20 a step, 100 steps, G = 4; pass rates rising with the steps,
    so a prompt's first all-correct group comes early and most of its later encounters still have signal."""
    rng = np.random.default_rng(0)
    header = RewardLogHeader(
        group_size=4, batch_size=20, gen_batch_size=20, max_gen_rounds=1, policy="grpo", dynamic_sampling=False,
        source=source,
    )  # fmt: skip
    with RewardLogWriter(path, header=header) as log:
        for step in range(100):
            ids = [(20 * step + i) % 200 for i in range(20)]
            rate = np.clip(0.45 + 0.004 * step + 0.1 * rng.standard_normal(20), 0.05, 0.97)
            log.write(step, ["d"] * 20, ids, (rng.random((20, 4)) < rate[:, None]).astype(float))
    return path


def test_where_filter_skips_the_most_the_verdict_never_recommends_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _grpo_log(tmp_path / "r.jsonl")
    assert main(["replay", str(log), "--out", str(tmp_path / "o"), "--factors", "1,2,5", "--no-plot"]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "o" / "replay.json").read_text())
    skipped = {k: v["headline"]["skipped_groups"] for k, v in report["policies"].items()}
    assert max(skipped, key=skipped.get) == "filter" and skipped["filter"] > skipped["snooze:1"]  # the premise
    v = report["verdict"]
    assert not any("filter" in line for line in v["lines"])
    assert v["lines"] == next_lines("verl", v["turn_on"])
    lines = out.splitlines()
    top = lines.index("verdict")
    assert top < lines.index(next(x for x in lines if x.startswith("rollouts each policy")))  # the verdict comes first
    row = next(x for x in lines[top:] if x.strip().startswith("filter "))
    saved = f"{100 * report['policies']['filter']['headline']['saved_frac']:.1f}%"
    assert saved in row and "-43.4" in row and "collapsed" in row  # its measured loss beside its saving
    assert "next: " in out and all(f"    {x}" in lines for x in v["lines"])
    missed = report["policies"]["filter"]["headline"]
    head = next(x for x in lines if x.startswith("filter ") and "[" in x and "(" in x)
    share = f"{100 * missed['missed_share']:.1f}%"
    assert f"{missed['skipped_with_signal']:,} ({share}" in head  # missed signal: count and share of all signal
    assert "risk" not in head and "risk per skip" in out  # risk only in the details


def test_a_plain_grpo_log_gets_dapos_rounds_estimated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _grpo_log(tmp_path / "r.jsonl", source="snooze.trainer")
    assert main(["replay", str(log), "--out", str(tmp_path / "o"), "--no-plot"]) == 0
    out = capsys.readouterr().out
    r = json.loads((tmp_path / "o" / "replay.json").read_text())["verdict"]["dapo_rounds"]
    assert r["basis"] == "estimated" and (r["batch_size"], r["gen_batch_size"], r["max_gen_rounds"]) == (20, 20, 8)
    assert r["late"]["rounds"] > r["early"]["rounds"] > 1.0  # more prompts solved late: DAPO wastes more
    assert f"late: {r['late']['rounds']:.1f} rounds a step (steps 90..99" in out
    assert "snooze compare --out runs/next --arms dynamic_sampling" in out  # the reference trainer's flags


def test_a_dapo_log_reads_its_rounds_off_the_log(tmp_path: Path) -> None:
    header = RewardLogHeader(
        group_size=2, batch_size=2, gen_batch_size=2, max_gen_rounds=4, policy="dynamic_sampling",
        dynamic_sampling=True, source="trl.RewardLogger",
    )  # fmt: skip
    path = tmp_path / "r.jsonl"
    with RewardLogWriter(path, header=header) as log:
        for step in range(10):  # early steps: one round of 2 signal groups; late: three rounds of 2
            rounds = 1 if step < 5 else 3
            rewards = [[1.0, 1.0]] * (2 * rounds - 2) + [[1.0, 0.0]] * 2
            log.write(step, ["d"] * len(rewards), [f"p{step}-{i}" for i in range(len(rewards))], rewards)
    assert main(["replay", str(path), "--out", str(tmp_path / "o"), "--no-plot"]) == 0
    v = json.loads((tmp_path / "o" / "replay.json").read_text())["verdict"]
    assert v["dapo_rounds"]["basis"] == "logged" and v["framework"] == "trl"
    assert (v["dapo_rounds"]["early"]["logged_rounds"], v["dapo_rounds"]["late"]["logged_rounds"]) == (1.0, 3.0)
    assert v["turn_on"] and "SnoozeGRPOTrainer(..., snooze_config=" in v["lines"][0]


def test_identical_rows_come_with_the_encounters_per_prompt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "r.jsonl"
    with RewardLogWriter(path) as log:  # each prompt met twice: easy, then signal
        log.write(0, ["d"] * 4, ["a", "b", "c", "d"], [[1.0, 1.0]] * 4)
        log.write(1, ["d"] * 4, ["a", "b", "c", "d"], [[1.0, 0.0]] * 4)
    assert main(["replay", str(path), "--out", str(tmp_path / "o"), "--factors", "1,5", "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "4 prompts (2.0 encounters each on average, at most 2)" in out
    assert "filter, snooze:1, snooze:5: the same skips here. The log met each prompt 2.0 times on average" in out


def test_the_recommended_factor_is_replayed_for_the_verdict_when_not_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _grpo_log(tmp_path / "r.jsonl")
    assert main(["replay", str(log), "--out", str(tmp_path / "a"), "--factors", "5", "--no-plot"]) == 0
    assert main(["replay", str(log), "--out", str(tmp_path / "b"), "--factors", "1,5", "--no-plot"]) == 0
    capsys.readouterr()
    a, b = (json.loads((tmp_path / x / "replay.json").read_text()) for x in "ab")
    assert "snooze:1" not in a["policies"] and a["verdict"]["recommended"] == b["verdict"]["recommended"]
    assert [c["policy"] for c in a["verdict"]["costs"]] == ["filter", "snooze:5"]


def test_the_reference_trainers_arm_is_the_recommended_one() -> None:
    pytest.importorskip("torch", reason="snooze.experiments needs torch")
    from snooze.analysis.verdict import REFERENCE_ARMS
    from snooze.experiments.compare import ARMS, RECOMMENDED_ARM

    assert REFERENCE_ARMS[True] == f"dynamic_sampling,{RECOMMENDED_ARM}" and "dynamic_sampling" in ARMS
