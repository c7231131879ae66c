"""Replay counts worked out by hand (the rules of docs/concepts.md, "Policies"), and the replay CLI."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import numpy as np
import pytest
from helpers_disk import failing_fsync, file_size_limit, files
from hypothesis import given, settings
from hypothesis import strategies as st

import snooze
from snooze.analysis import policy_names, replay_policies
from snooze.analysis.replay import ReplayPolicy
from snooze.core.classify import TOO_EASY, TOO_HARD, classify
from snooze.logs import RewardLog, RewardLogWriter, read_reward_log

G = 4
EASY, SIGNAL, HARD, FLAT = [1.0] * G, [1.0, 0.0, 1.0, 0.0], [0.0] * G, [0.5] * G

# Prompt "a": easy, easy, signal, easy.   Prompt "b": hard, hard, hard, signal.   Prompt "c": flat, flat.
# Interleaved in the log, so per-prompt ordering is what the replay must recover.
LINES = [
    (0, "m", "a", EASY),
    (0, "m", "b", HARD),
    (0, "h", 7, FLAT),
    (1, "m", "a", EASY),
    (1, "m", "b", HARD),
    (2, "m", "a", SIGNAL),
    (2, "h", 7, FLAT),
    (2, "m", "b", HARD),
    (3, "m", "a", EASY),
    (3, "m", "b", SIGNAL),
]


def _write(path: Path, lines: list[tuple]) -> Path:
    with RewardLogWriter(path) as log:
        for step, ds, pid, rewards in lines:
            log.write(step, [ds], [pid], [rewards])
    return path


@pytest.fixture
def results(tmp_path: Path) -> dict:
    log = read_reward_log(_write(tmp_path / "log.jsonl", LINES))
    return replay_policies(log, policy_names([0, 1, 2], snooze_hard=True))


def test_snooze_1_skips_only_the_second_encounter_and_counts_the_regression(results: dict) -> None:
    # a: e1 easy -> counter 1; e2 skipped (counter 0); e3 rolled, signal: regressed; e4 easy -> counter 1.
    r = results["snooze:1"]
    assert (r["skipped_groups"], r["skipped_rollouts"], r["missed_signal_groups"]) == (1, G, 0)
    assert r["regressed"] == 1
    assert r["skipped_by_outcome"] == {"signal": 0, "too_easy": 1, "too_hard": 0, "flat": 0}
    assert r["total_groups"] == 10 and r["signal_groups"] == 2


def test_snooze_2_sleeps_through_the_signal_encounter(results: dict) -> None:
    # a: e1 easy -> 2; e2 skipped (1); e3 skipped (0): its logged group had signal -> missed; e4 rolled.
    r = results["snooze:2"]
    assert (r["skipped_groups"], r["missed_signal_groups"], r["regressed"]) == (2, 1, 0)
    assert r["missed_signal_frac"] == pytest.approx(0.5)
    # skipped 2 of 10 logged groups, missed half the signal: 1 - (1 - 0.2) / (1 - 0.5) < 0, i.e. a net loss
    assert r["predicted_saved_frac"] == pytest.approx(-0.6)


def test_filter_retires_at_the_first_easy_outcome(results: dict) -> None:
    r = results["filter"]
    assert (r["skipped_groups"], r["missed_signal_groups"]) == (3, 1)
    groups = {k: v for k, v in r["datasets"]["m"].items() if k.endswith("_groups")}
    assert groups == {"total_groups": 8, "skipped_groups": 3, "missed_signal_groups": 1}
    assert (r["datasets"]["m"]["skipped_rollouts"], r["datasets"]["m"]["skipped_tokens"]) == (3 * G, None)
    assert r["datasets"]["h"]["skipped_groups"] == 0  # flat groups are never snoozed or retired


def test_factor_0_is_dapo(results: dict) -> None:
    assert results["snooze:0"]["skipped_groups"] == 0


def test_hard_snoozing(results: dict) -> None:
    # a as snooze:1 (1 skip). b: e1 hard -> 1; e2 skipped; e3 hard -> 1; e4 (signal) skipped -> missed.
    r = results["snooze-hard:1"]
    assert (r["skipped_groups"], r["missed_signal_groups"]) == (3, 1)
    assert r["skipped_by_outcome"]["too_hard"] == 1


def test_vectorised_replay_matches_a_plain_loop(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    lines = []
    for step in range(40):
        for pid in rng.choice(30, size=8, replace=False):
            p = rng.uniform()
            lines.append((step, "d", int(pid), (rng.uniform(size=G) < p).astype(float).tolist()))
    log = read_reward_log(_write(tmp_path / "r.jsonl", lines))
    got = replay_policies(log, policy_names([3]))["snooze:3"]["skipped_groups"]
    counter: dict[int, int] = {}
    want = 0
    for _, _, pid, rewards in lines:  # the rule of docs/concepts.md, one encounter at a time
        if counter.get(pid, 0) > 0:
            counter[pid] -= 1
            want += 1
        elif min(rewards) == 1.0:
            counter[pid] = 3
    assert got == want > 0


def test_cli_writes_json_table_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from snooze.cli.main import main

    log = _write(tmp_path / "log.jsonl", LINES)
    assert main(["replay", str(log), "--out", str(tmp_path / "out"), "--factors", "1,2"]) == 0
    data = json.loads((tmp_path / "out" / "replay.json").read_text())["policies"]
    assert list(data) == ["filter", "snooze:1", "snooze:2"]
    assert data["snooze:2"]["missed_signal_groups"] == 1
    assert (tmp_path / "out" / "replay.png").stat().st_size > 1000
    assert "snooze:2" in capsys.readouterr().out
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    assert main(["replay", str(bad), "--out", str(tmp_path / "o2")]) == 2


@pytest.mark.timeout(60)
@pytest.mark.parametrize("option", ["--max-gen-rounds", "--batch-size", "--gen-batch-size"])
def test_cli_step_sizes_of_0_are_a_one_line_error_not_a_hang(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from snooze.cli.main import main

    log = _write(tmp_path / "log.jsonl", LINES)
    assert main(["replay", str(log), "--out", str(tmp_path / "out"), "--no-plot", option, "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1
        and f"{option[2:].replace('-', '_')}=0: must be an integer >= 1 (option {option})" in err
    )
    assert not (tmp_path / "out").exists()


@settings(max_examples=40, deadline=None)
@given(
    outcomes=st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from(["easy", "hard", "signal", "flat"])), min_size=1, max_size=60
    ),
    factor=st.integers(0, 4),
    hard=st.booleans(),
)
def test_replay_equals_the_spec_rule_one_encounter_at_a_time(outcomes: list, factor: int, hard: bool) -> None:
    """Property: the vectorised replay equals the snoozing rule (docs/concepts.md) applied encounter by encounter."""
    rewards = {"easy": [1.0, 1.0], "hard": [0.0, 0.0], "signal": [1.0, 0.0], "flat": [0.5, 0.5]}
    log = RewardLog(
        "mem",
        np.zeros(len(outcomes), dtype=np.int64),
        ["d"] * len(outcomes),
        [p for p, _ in outcomes],
        np.array([rewards[o] for _, o in outcomes]),
        np.arange(1, len(outcomes) + 1),
    )
    got = replay_policies(log, policy_names([factor], snooze_hard=hard))[f"snooze{'-hard' if hard else ''}:{factor}"]
    counter: dict[int, int] = {}
    skipped = missed = 0
    for pid, outcome in outcomes:
        if counter.get(pid, 0) > 0:
            counter[pid] -= 1
            skipped += 1
            missed += outcome == "signal"
        elif outcome == "easy" or (hard and outcome == "hard"):
            counter[pid] = counter.get(pid, 0) + factor
    assert (got["skipped_groups"], got["missed_signal_groups"]) == (skipped, missed)


def _reference_counter(outcomes: list[int], factor: int | None, hard: bool) -> tuple[list[bool], int]:
    """The snooze counter rule for one prompt's encounters, one at a time (the test's oracle)."""
    counter, snoozed, retired, regressed, out = 0, False, False, 0, []
    for o in outcomes:
        if retired or counter > 0:
            out.append(True)
            counter -= 0 if retired else 1
            continue
        out.append(False)
        if o != TOO_EASY and snoozed:
            regressed += 1
        snoozed = False
        if o == TOO_EASY:
            if factor is None:
                retired = True
            elif factor > 0:
                counter, snoozed = counter + factor, True
        if hard and o == TOO_HARD:
            counter += factor or 0
    return out, regressed


def test_a_skewed_log_replays_exactly_and_in_linear_memory(tmp_path) -> None:
    """Issue 27 item 5: one prompt logged many times beside many logged once. The replay runs the core's
    policies by depth (no [prompts x depth] table) and skips exactly what the rule, encounter by encounter, skips."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from replay_skewed import write_log

    path = tmp_path / "rewards.jsonl"
    write_log(path, hot=1500, singles=700, group_size=4, seed=3)
    log = read_reward_log(path)
    outcomes = classify(log.rewards, (0.0, 1.0), 0.99, 0.01, 1e-6, None)
    pols = policy_names([0, 1, 3], snooze_hard=True)
    got = replay_policies(log, pols)
    prompt, _ = log.prompt_index()
    for pol in pols:
        want_skips, want_regressed = 0, 0
        for p in np.unique(prompt):
            skips, reg = _reference_counter(outcomes[prompt == p].tolist(), pol.factor, pol.snooze_hard)
            want_skips, want_regressed = want_skips + sum(skips), want_regressed + reg
        assert (got[pol.name]["skipped_groups"], got[pol.name]["regressed"]) == (want_skips, want_regressed), pol.name
    assert got["snooze:3"]["skipped_groups"] > 0 and got["filter"]["skipped_groups"] > 0


def test_policies_that_do_not_replay_are_refused_with_the_reason(tmp_path) -> None:
    path = tmp_path / "rewards.jsonl"
    path.write_text('{"step": 0, "dataset": "d", "id": 1, "rewards": [1, 0]}\n')
    log = read_reward_log(path)
    history = snooze.SchedulerConfig(options=snooze.SnoozeOptions(skip="history"))
    for cfg in (snooze.SchedulerConfig(policy="predictive"), history):
        with pytest.raises(snooze.ConfigError, match="does not replay from a log"):
            replay_policies(log, [ReplayPolicy("x", None, config=cfg)])
    counter = snooze.SchedulerConfig(options=snooze.SnoozeOptions(factor=2, backoff=2.0))
    backoff = ReplayPolicy("snooze-backoff", None, config=counter)
    assert (
        replay_policies(log, [backoff])["snooze-backoff"]["total_groups"] == 1
    )  # every counter policy replays, backoff too


@pytest.mark.parametrize("how", ["file size limit", "fsync"])
def test_a_full_disk_leaves_the_last_replay_json_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """replay.json was written in place: on a full disk the old report became a truncated, invalid JSON
    file, and the error was only "No space left on device". Now it is replaced whole or not at all, and
    the error names it."""
    from snooze.cli.main import main

    log, out = _write(tmp_path / "log.jsonl", LINES), tmp_path / "out"
    assert main(["replay", str(log), "--out", str(out), "--factors", "1", "--no-plot"]) == 0
    before = files(out)
    capsys.readouterr()
    with monkeypatch.context() as mp, file_size_limit(100) if how != "fsync" else contextlib.nullcontext():
        if how == "fsync":
            failing_fsync(mp, 1)
        assert main(["replay", str(log), "--out", str(out), "--factors", "1,2", "--no-plot"]) == 2
    err = capsys.readouterr().err
    why = "File too large" if how != "fsync" else "No space left on device"
    kept = "nothing was written: the files there are as they were"
    assert err == f"snooze replay: error: {out / 'replay.json'}: {why}; {kept}\n"
    assert files(out) == before  # byte for byte, and no temporary file


def test_a_full_disk_makes_no_output_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A replay whose report cannot be written leaves no folder behind it (the folders made for it go too)."""
    from snooze.cli.main import main

    log = _write(tmp_path / "log.jsonl", LINES)
    failing_fsync(monkeypatch, 1)
    assert main(["replay", str(log), "--out", str(tmp_path / "new" / "out"), "--no-plot"]) == 2
    assert "replay.json: No space left on device; nothing was written" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log.jsonl"]
