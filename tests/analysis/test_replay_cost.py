"""Replay's counts in rollouts and generated tokens (issue 52, item 1), worked out by hand from each test's lines.

A group's rollouts are its rewards in the log; its tokens the line's optional ``tokens``. Tokens differ from
line to line here, so a count of tokens that multiplied groups by anything would not match."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from snooze.analysis import policy_names, replay_policies
from snooze.analysis.estimate import headline
from snooze.analysis.replay import StepShape
from snooze.cli.main import main
from snooze.core.errors import DataError
from snooze.logs import RewardLogHeader, RewardLogWriter, read_reward_log

G = 4
EASY, SIGNAL, HARD, FLAT = [1.0] * G, [1.0, 0.0, 1.0, 0.0], [0.0] * G, [0.5] * G

# (step, dataset, id, rewards, tokens). Prompt "a": easy, easy, signal, easy; "b": hard x3, signal; "h"/7: flat x2.
LINES = [
    (0, "m", "a", EASY, 40),
    (0, "m", "b", HARD, 900),
    (0, "h", 7, FLAT, 300),
    (1, "m", "a", EASY, 35),
    (1, "m", "b", HARD, 880),
    (2, "m", "a", SIGNAL, 410),
    (2, "h", 7, FLAT, 290),
    (2, "m", "b", HARD, 870),
    (3, "m", "a", EASY, 30),
    (3, "m", "b", SIGNAL, 600),
]
FILTER_SKIPS = [3, 5, 8]  # filter retires "a" at its first (easy) encounter: its 2nd, 3rd and 4th are skipped
SNOOZE1_SKIPS = [3]  # snooze:1 sleeps through "a"'s 2nd encounter only (its 4th comes after a signal one)


def _write(path: Path, lines: list[tuple], with_tokens: bool = True) -> Path:
    header = RewardLogHeader(group_size=G, batch_size=1, gen_batch_size=1, max_gen_rounds=1, source="test")
    with RewardLogWriter(path, header=header) as log:
        for step, ds, pid, rewards, tokens in lines:
            log.write(step, [ds], [pid], [rewards], [tokens] if with_tokens else None)
    return path


def _sum(column: int, rows: list[int]) -> int:
    """A column of the lines over ``rows``: rewards are counted (the group's rollouts), tokens added."""
    return sum(len(LINES[i][3]) if column == 3 else LINES[i][column] for i in rows)


ALL = list(range(len(LINES)))


@pytest.fixture
def results(tmp_path: Path) -> dict:
    log = read_reward_log(_write(tmp_path / "log.jsonl", LINES))
    return replay_policies(log, policy_names([1]), shape=StepShape(1, 1, 1), resamples=50)


def test_every_count_comes_in_rollouts_and_tokens(results: dict) -> None:
    for name, skips in (("filter", FILTER_SKIPS), ("snooze:1", SNOOZE1_SKIPS)):
        r = results[name]
        assert r["tokens_known"] is True
        assert (r["total_rollouts"], r["total_tokens"]) == (_sum(3, ALL), _sum(4, ALL)) == (40, 4355)
        assert (r["skipped_groups"], r["skipped_rollouts"], r["skipped_tokens"]) == (
            len(skips), _sum(3, skips), _sum(4, skips)
        )  # fmt: skip
        missed = [i for i in skips if LINES[i][3] == SIGNAL]
        assert (r["missed_signal_rollouts"], r["missed_signal_tokens"]) == (_sum(3, missed), _sum(4, missed))
        assert r["signal_rollouts"] == _sum(3, [5, 9])
        easy = [i for i in skips if LINES[i][3] == EASY]
        assert r["skipped_rollouts_by_outcome"]["too_easy"] == _sum(3, easy)
        m = [i for i in ALL if LINES[i][1] == "m"]
        d = r["datasets"]["m"]
        assert (d["total_rollouts"], d["total_tokens"]) == (_sum(3, m), _sum(4, m))
        assert (d["skipped_rollouts"], d["skipped_tokens"]) == (_sum(3, skips), _sum(4, skips))
    assert results["filter"]["skipped_tokens"] == 35 + 410 + 30  # a's 2nd, 3rd and 4th lines
    assert results["filter"]["missed_signal_tokens"] == 410


def test_the_headline_in_rollouts_and_tokens(results: dict) -> None:
    # filter: S = 2 signal groups, M = 1 skipped: the kept lines' rollouts and tokens, times S / (S - M) = 2
    h = results["filter"]["headline"]
    kept = [i for i in ALL if i not in FILTER_SKIPS]
    assert (h["log_rollouts"], h["log_tokens"]) == (40, 4355)
    assert h["rollouts"] == pytest.approx(_sum(3, kept) * 2) == 56
    assert h["tokens"] == pytest.approx(_sum(4, kept) * 2)
    assert h["rollouts_saved_frac"] == pytest.approx(1 - 56 / 40) == h["saved_frac"]  # one G: as in groups
    assert h["tokens_saved_frac"] == pytest.approx(1 - 2 * (4355 - 475) / 4355)
    assert (h["skipped_rollouts"], h["skipped_tokens"], h["skipped_tokens_with_signal"]) == (12, 475, 410)
    assert h["skipped_rollouts_with_signal"] == len(SIGNAL)
    # 3 prompts: many resamples hold a's signal line and not b's, every signal missed: no honest interval, in any unit
    assert h["groups_interval"] is h["rollouts_interval"] is h["tokens_interval"] is None and h["tokens_known"]
    # snooze:1: M = 0, so the kept lines are the cost: everything but a's 2nd line
    s1 = results["snooze:1"]["headline"]
    assert (s1["rollouts"], s1["tokens"]) == (40 - 4, 4355 - 35)


def test_the_step_simulation_counts_the_lines_each_loop_took(results: dict) -> None:
    # one line a round, one round a step: each loop takes one line a step; the policy's loop runs out after its
    # kept lines, DAPO's takes as many of the log's first lines
    sim = results["filter"]["simulated"]
    kept = [i for i in ALL if i not in FILTER_SKIPS]
    assert sim["steps"] == sim["gen_groups"] == sim["dapo_gen_groups"] == len(kept)
    assert (sim["gen_rollouts"], sim["gen_tokens"]) == (_sum(3, kept), _sum(4, kept))
    first = list(range(len(kept)))
    assert (sim["dapo_gen_rollouts"], sim["dapo_gen_tokens"]) == (_sum(3, first), _sum(4, first))
    assert sim["tokens_saved_frac"] == pytest.approx(1 - _sum(4, kept) / _sum(4, first))


def test_a_log_without_tokens_says_they_are_unknown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "log.jsonl", LINES, with_tokens=False)
    r = replay_policies(read_reward_log(path), policy_names([1]), resamples=20)["filter"]
    assert r["tokens_known"] is False and r["total_rollouts"] == 40
    assert r["total_tokens"] is r["skipped_tokens"] is r["datasets"]["m"]["skipped_tokens"] is None
    h = r["headline"]
    assert h["tokens_known"] is False and h["tokens"] is h["tokens_saved_frac"] is h["log_tokens"] is None
    assert main(["replay", str(path), "--out", str(tmp_path / "o"), "--factors", "1", "--no-plot"]) == 0
    out = capsys.readouterr().out
    assert "tokens unknown: the log's lines carry no `tokens`" in out
    head = next(x for x in out.splitlines() if x.startswith("filter ") and "(" in x and "[" in x)
    assert "unknown" in head and f"{r['skipped_rollouts']:,} ({r['skipped_groups']:,})" in head
    report = json.loads((tmp_path / "o" / "replay.json").read_text())
    assert report["verdict"]["recommended"]["tokens_known"] is False
    assert report["verdict"]["recommended"]["tokens_saved_frac"] is None


def test_a_log_where_some_lines_give_tokens_counts_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "log.jsonl", LINES[:4])
    with RewardLogWriter(path, append=True) as log:  # a run resumed by a writer that does not know its tokens
        for step, ds, pid, rewards, _ in LINES[4:]:
            log.write(step, [ds], [pid], [rewards])
    r = replay_policies(read_reward_log(path), policy_names([1]), resamples=20)["filter"]
    assert r["tokens_known"] is False and r["skipped_tokens"] is None and r["headline"]["tokens"] is None
    assert main(["replay", str(path), "--out", str(tmp_path / "o"), "--factors", "1", "--no-plot"]) == 0
    assert "tokens unknown: 4 of the 10 lines give their `tokens`" in capsys.readouterr().out


def test_the_cli_speaks_in_rollouts_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "log.jsonl", LINES)
    assert main(["replay", str(path), "--out", str(tmp_path / "o"), "--factors", "1", "--no-plot"]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "o" / "replay.json").read_text())
    h = report["policies"]["filter"]["headline"]
    assert out.splitlines()[0].endswith("40 rollouts in 10 groups of 4 (4,355 generated tokens), 3 prompts "
                                        "(3.3 encounters each on average, at most 4), steps 0..3")  # fmt: skip
    head = next(x for x in out.splitlines() if x.startswith("filter ") and "(" in x and "[" in x)
    assert head.split()[1] == f"{h['rollouts']:,.0f}" == "56"  # rollouts, not groups, in the first column
    assert f"{100 * h['tokens_saved_frac']:.1f}%" in head and "12 (3)" in head
    v = report["verdict"]
    assert v["recommended"]["rollouts_saved_frac"] == report["policies"]["snooze:1"]["headline"]["rollouts_saved_frac"]
    assert "of this log's rollouts (" in out and "of its generated tokens" in out
    late = v["dapo_rounds"]["late"]
    in_late = [i for i in ALL if late["first_step"] <= LINES[i][0] <= late["last_step"]]
    assert (late["groups"], late["rollouts"], late["tokens"]) == (len(in_late), _sum(3, in_late), _sum(4, in_late))
    assert report["log"]["rollouts"] == 40 and report["log"]["tokens"] == 4355


def test_groups_of_another_size_are_refused_so_a_groups_rollouts_are_its_rewards(tmp_path: Path) -> None:
    # the format holds one G a log (docs/reward-log.md): a line of 3 rewards among lines of 4 is refused, so a
    # group's rollouts, its count of rewards, is G on every line a replay reads
    path = tmp_path / "log.jsonl"
    path.write_text(
        '{"step": 0, "dataset": "m", "id": "a", "rewards": [1, 0, 1, 0]}\n'
        '{"step": 0, "dataset": "m", "id": "b", "rewards": [1, 0, 1]}\n'
    )
    with pytest.raises(DataError, match="3 rewards, but line 1 has 4: groups must all be size G"):
        read_reward_log(path)


def test_a_size_of_one_per_group_is_the_groups_estimate_and_sizes_weigh_the_saving() -> None:
    rng = np.random.default_rng(4)
    prompt = np.repeat(np.arange(50), 4)
    signal = rng.random(200) < 0.5
    skipped = {"p": rng.random(200) < 0.3}
    ones = headline(prompt, signal, skipped, resamples=100, seed=2, sizes={"rollouts": np.ones(200, dtype=int)})["p"]
    assert ones["rollouts"] == pytest.approx(ones["groups"]) and ones["log_rollouts"] == 200
    assert ones["rollouts_interval"] == pytest.approx(ones["groups_interval"])  # the same draws for every unit
    # tokens twice as many on the skipped groups as on the kept ones: a larger share saved in tokens than in groups
    tokens = np.where(skipped["p"], 200, 100)
    h = headline(prompt, signal, skipped, resamples=100, seed=2, sizes={"tokens": tokens})["p"]
    n, k, s, m = 200, skipped["p"].sum(), signal.sum(), (skipped["p"] & signal).sum()
    assert h["tokens"] == pytest.approx(100 * (n - k) * s / (s - m))
    assert h["tokens_saved_frac"] > h["saved_frac"] and h["rollouts"] is None and not h["rollouts_known"]
    lo, hi = h["tokens_interval"]
    assert lo < h["tokens"] < hi
