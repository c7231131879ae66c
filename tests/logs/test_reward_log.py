"""The reward log: writing from candidates, reading it back, cutting it back to a step on resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import snooze
from snooze.core.errors import DataError
from snooze.logs import RewardLogWriter, read_reward_log, truncate_log, write_groups


def test_write_groups_then_truncate_to_a_resumed_step(tmp_path: Path) -> None:
    sched = snooze.Scheduler(
        {"d": [{"id": f"p{i}"} for i in range(4)]}, snooze.SchedulerConfig(batch_size=2, group_size=2)
    )
    path = tmp_path / "log.jsonl"
    with RewardLogWriter(path) as w:
        for step in range(3):
            cands = sched.propose(2)
            rewards = np.array([[0.0, 1.0], [1.0, 1.0]])
            sched.report(cands, rewards)
            write_groups(w, step, cands, rewards)
            sched.finish_step()
    log = read_reward_log(path)
    assert len(log) == 6 and log.steps.tolist() == [0, 0, 1, 1, 2, 2]
    assert truncate_log(path, 1) == 4
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [0, 0]
    assert truncate_log(tmp_path / "missing.jsonl", 0) == 0


def test_truncate_rejects_a_file_that_is_not_a_reward_log(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"no_step": 1}\n')
    with pytest.raises(snooze.DataError, match="not a line of a snooze run log"):
        truncate_log(bad, 0)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("not json\n", None),
        ('{"step": 0, "dataset": "d", "rewards": [1, 0]}\n', "'id'"),
        ('{"step": 0, "dataset": "d", "id": 1, "rewards": [1, 2]}\n', "'rewards'"),
        ('{"step": 0, "dataset": "d", "id": 1, "rewards": [1, NaN]}\n', "'rewards'"),
        ('{"step": 0, "dataset": "d", "id": true, "rewards": [1, 0]}\n', "'id'"),
        ('{"step": "0", "dataset": "d", "id": 1, "rewards": [1, 0]}\n', "'step'"),
    ],
)
def test_bad_first_line_names_file_line_and_field(tmp_path: Path, text: str, field: str | None) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(DataError) as err:
        read_reward_log(path)
    assert str(path) in str(err.value) and "line 1" in str(err.value)
    if field:
        assert field in str(err.value)


def test_bad_values_read_as_the_docs_print_them(tmp_path: Path) -> None:
    """The message shows a reward as JSON wrote it (docs/reward-log.md: ``nan is not finite``), and a step
    too large for the int64 column is a DataError, not an OverflowError from numpy."""
    path = tmp_path / "bad.jsonl"
    for rewards, shown in (("[1, NaN]", "rollout 1: nan is not finite"), ("[1, 2]", "rollout 1: 2.0 is outside")):
        path.write_text(f'{{"step": 0, "dataset": "d", "id": 1, "rewards": {rewards}}}\n')
        with pytest.raises(DataError, match=shown):
            read_reward_log(path)
    path.write_text(f'{{"step": {2**63}, "dataset": "d", "id": 1, "rewards": [1, 0]}}\n')
    with pytest.raises(DataError, match=r"line 1, field 'step': 9223372036854775808 is not an integer in"):
        read_reward_log(path)
    path.write_text(f'{{"step": {2**63 - 1}, "dataset": "d", "id": 1, "rewards": [1, 0]}}\n')
    assert read_reward_log(path).steps.tolist() == [2**63 - 1]


def test_ragged_group_and_backward_step_name_their_line(tmp_path: Path) -> None:
    good = json.dumps({"step": 2, "dataset": "d", "id": 1, "rewards": [1, 0]})
    ragged = tmp_path / "ragged.jsonl"
    ragged.write_text(good + "\n\n" + json.dumps({"step": 2, "dataset": "d", "id": 2, "rewards": [1, 0, 1]}) + "\n")
    with pytest.raises(DataError, match=r"line 3, field 'rewards'"):
        read_reward_log(ragged)
    back = tmp_path / "back.jsonl"
    back.write_text(good + "\n" + json.dumps({"step": 1, "dataset": "d", "id": 2, "rewards": [1, 0]}) + "\n")
    with pytest.raises(DataError, match=r"line 2, field 'step'"):
        read_reward_log(back)


def test_a_last_line_cut_short_is_dropped_elsewhere_a_bad_line_is_an_error(tmp_path: Path) -> None:
    good = [json.dumps({"step": s, "dataset": "d", "id": s, "rewards": [1, 0]}) for s in range(3)]
    torn = tmp_path / "torn.jsonl"
    torn.write_text("\n".join(good) + "\n" + good[0][:17])  # a run killed while writing its last line
    assert len(read_reward_log(torn)) == 3
    assert truncate_log(torn, 2) == 2 and torn.read_text() == good[0] + "\n" + good[1] + "\n"
    inside = tmp_path / "inside.jsonl"
    inside.write_text(good[0] + "\n" + good[1][:17] + "\n" + good[2] + "\n")  # a line cut short, then more
    for call in (read_reward_log, lambda p: truncate_log(p, 1)):
        with pytest.raises(DataError, match="line 2"):
            call(inside)
    assert inside.read_text().count("\n") == 3  # a refused truncation leaves the log as it was
    assert not list(tmp_path.glob(".*.tmp"))


GOOD_ROW = (["d", "d"], ["a", "b"], [[1.0, 0.0], [0.0, 0.0]])
WRITES = {  # a write the reader would refuse -> (its arguments, what the reader says of the line)
    "float-step": (
        (2.9, *GOOD_ROW),
        r"line 4 \(not written\), field 'step': 2\.9 is not an integer in \[0, 2\*\*63 - 1\]",
    ),
    "string-step": (("3", *GOOD_ROW), r"field 'step': '3' is not an integer"),
    "nan-step": ((float("nan"), *GOOD_ROW), r"field 'step': nan is not an integer"),
    "none-step": ((None, *GOOD_ROW), r"field 'step': None is not an integer"),
    "negative-step": ((-1, *GOOD_ROW), r"field 'step': -1 is not an integer"),
    "backwards": ((0, *GOOD_ROW), r"line 4 \(not written\), field 'step': 0 after step 1: lines must be in generation"),
    "string-reward": ((2, ["d"], ["a"], [["1", 0.0]]), r"field 'rewards': rollout 0: '1' is not a number"),
    "bool-reward": ((2, ["d"], ["a"], [[True, 0]]), r"field 'rewards': rollout 0: True is not a number"),
    "nan-reward": ((2, ["d"], ["a"], [[0.0, float("nan")]]), r"field 'rewards': rollout 1: nan is not finite"),
    "inf-reward": ((2, ["d"], ["a"], np.array([[np.inf, 0.0]])), r"field 'rewards': rollout 0: inf is not finite"),
    "outside-range": ((2, ["d"], ["a"], [[1.5, 0.0]]), r"rollout 0: 1\.5 is outside the reward range \[0\.0, 1\.0\]"),
    "wrong-g": ((2, ["d"], ["a"], [[1.0, 0.0, 1.0]]), r"field 'rewards': 3 rewards, but the header has 2"),
    "float-id": ((2, ["d"], [1.5], [[1.0, 0.0]]), r"field 'id': 1\.5 is not a string or an integer"),
    "id-beyond-int64": ((2, ["d"], [2**63], [[1.0, 0.0]]), r"field 'id': 9223372036854775808 does not fit in a sig"),
    "surrogate-id": ((2, ["d"], ["q\ud800"], [[1.0, 0.0]]), r"field 'id': 'q\\ud800' holds a lone surrogate"),
    "empty-dataset": (
        (2, [""], ["a"], [[1.0, 0.0]]),
        r"line 4 \(not written\), field 'dataset': '' is not a non-empty",
    ),
    "int-dataset": ((2, [5], ["a"], [[1.0, 0.0]]), r"field 'dataset': 5 is not a non-empty string"),
    "mixed-ids": (
        (2, ["d"], [7], [[1.0, 0.0]]),
        r"field 'id': 7 is an integer, but dataset 'd' has the id 'a0' at line 2",
    ),
    "second-bad": ((2, ["d", ""], ["a", "b"], [[1.0, 0.0], [1.0, 0.0]]), r"line 5 \(not written\), field 'dataset'"),
}


@pytest.mark.parametrize(("args", "message"), WRITES.values(), ids=WRITES.keys())
def test_the_writer_refuses_what_the_reader_would_and_writes_nothing(tmp_path: Path, args: tuple, message: str) -> None:
    path = tmp_path / "log.jsonl"
    with RewardLogWriter(path, header=snooze.logs.RewardLogHeader(group_size=2)) as log:
        log.write(1, ["d", "d"], ["a0", "b0"], [[1.0, 0.0], [1.0, 1.0]])
        before = path.read_bytes()
        with pytest.raises(DataError, match=message):
            log.write(*args)
        assert path.read_bytes() == before  # not one line of the refused write
        log.write(2, ["d"], ["c"], np.array([[0.0, 1.0]], dtype=np.float32))  # and the next good write goes on
    assert read_reward_log(path).ids == ["a0", "b0", "c"]


def test_the_writer_refuses_a_folder_and_a_log_it_would_break(tmp_path: Path) -> None:
    header = snooze.logs.RewardLogHeader(group_size=2)
    (tmp_path / "runs").mkdir()
    with pytest.raises(snooze.ConfigError, match=r"runs: is not a regular file; pass the path of a reward log file"):
        RewardLogWriter(tmp_path / "runs", header=header)  # was a bare IsADirectoryError
    path = tmp_path / "log.jsonl"
    with RewardLogWriter(path, header=header) as log:
        log.write(3, ["d"], ["a"], [[1.0, 0.0]])
    before = path.read_bytes()
    with pytest.raises(
        DataError, match=r"log\.jsonl: the log has groups of 2 \(the header\), but the header given says 4"
    ):
        RewardLogWriter(path, append=True, header=snooze.logs.RewardLogHeader(group_size=4))  # was ignored
    other_range = snooze.logs.RewardLogHeader(group_size=2, reward_range=(-1.0, 1.0))
    with pytest.raises(DataError, match=r"the log's header has the reward range \[0\.0, 1\.0\], but the header given"):
        RewardLogWriter(path, append=True, header=other_range)
    with RewardLogWriter(path, append=True, header=header) as log, pytest.raises(DataError, match="2 after step 3"):
        log.write(2, ["d"], ["a"], [[1.0, 0.0]])  # a resumed run's step before the log's last one
    assert path.read_bytes() == before
    path.write_bytes(before + b'{"step": 3, "data')  # a run killed while writing its last line
    with pytest.raises(DataError, match=r"its last line is cut short .* cut the log back first"):
        RewardLogWriter(path, append=True, header=header)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reward_range": "0,1"}, r"reward_range='0,1': must be \(low, high\) with finite low < high"),
        ({"reward_range": (float("nan"), 1)}, r"reward_range=\(nan, 1\): must be \(low, high\)"),
        ({"reward_range": (1, 0)}, r"reward_range=\(1, 0\): must be \(low, high\) with finite low < high"),
        ({"group_size": "2"}, r"group_size='2': must be an integer >= 2"),
        ({"group_size": 2.0}, r"group_size=2\.0: must be an integer >= 2"),
    ],
)
def test_read_reward_log_refuses_a_bad_argument_as_a_config_error(tmp_path: Path, kwargs: dict, message: str) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"step": 0, "dataset": "d", "id": 1, "rewards": [1, 0]}) + "\n")
    with pytest.raises(snooze.ConfigError, match=message):
        read_reward_log(path, **kwargs)


def test_integer_and_string_ids_in_one_dataset_are_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    lines = [(0, "a", 0), (0, "b", "0"), (1, "a", "0")]  # dataset b's "0" is fine: its ids are all strings
    path.write_text(
        "".join(json.dumps({"step": s, "dataset": d, "id": i, "rewards": [1, 0]}) + "\n" for s, d, i in lines)
    )
    with pytest.raises(DataError, match=r"line 3, field 'id': '0' is a string, but dataset 'a' has the id 0 at line 1"):
        read_reward_log(path)


def test_a_run_that_accepts_rewards_outside_its_range_logs_them(tmp_path: Path) -> None:
    """``SchedulerConfig(out_of_range="accept")`` (the TRL trainer's default: reward models, length penalties)
    records a reward outside the range; its reward log must take it too, not stop the run, and the log is
    replayed with a wider range. A writer without it refuses the same write."""
    from snooze.integrations._paths import open_log

    cfg = snooze.SchedulerConfig(batch_size=1, group_size=2, out_of_range="accept")
    with open_log(tmp_path / "accept.jsonl", resumed=False, config=cfg, source="test") as log:
        log.write(0, ["d"], ["a"], [[1.5, -0.25]])
    assert read_reward_log(tmp_path / "accept.jsonl", reward_range=(-1.0, 2.0)).rewards.tolist() == [[1.5, -0.25]]
    read = read_reward_log(tmp_path / "accept.jsonl")  # the header says 'accept': the range its lines need
    assert read.header is not None and read.header.reward_range == (-0.25, 1.5)
    strict = snooze.SchedulerConfig(batch_size=1, group_size=2)
    with open_log(tmp_path / "raise.jsonl", resumed=False, config=strict) as log:
        with pytest.raises(DataError, match="outside the reward range"):
            log.write(0, ["d"], ["a"], [[1.5, -0.25]])
    with pytest.raises(snooze.ConfigError, match="out_of_range='clip': must be 'raise' or 'accept'"):
        RewardLogWriter(tmp_path / "x.jsonl", out_of_range="clip")
    assert not (tmp_path / "x.jsonl").exists()


def test_tokens_are_optional_per_line_and_read_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    with RewardLogWriter(path) as w:
        w.write(0, ["d", "d"], [1, 2], np.array([[1.0, 0.0], [0.0, 0.0]]), np.array([31, 7]))
        w.write(1, ["d"], [1], [[1.0, 1.0]])  # a writer that does not know them leaves the field out
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x.get("tokens") for x in lines] == [31, 7, None] and "tokens" not in lines[2]
    log = read_reward_log(path)
    assert log.tokens.tolist() == [31, 7, -1] and not log.tokens_known
    assert log.rollouts.tolist() == [2, 2, 2]


def test_a_log_without_tokens_reads_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text('{"step": 0, "dataset": "d", "id": 1, "rewards": [1, 0, 1]}\n')
    log = read_reward_log(path)
    assert log.tokens is None and not log.tokens_known and log.rollouts.tolist() == [3]


@pytest.mark.parametrize("value", ['"12"', "-1", "1.0", "null", "true", "9223372036854775808"])
def test_a_bad_tokens_field_is_refused_naming_the_line(tmp_path: Path, value: str) -> None:
    path = tmp_path / "log.jsonl"
    good = '{"step": 0, "dataset": "d", "id": 1, "rewards": [1, 0], "tokens": 5}\n'
    bad = '{"step": 0, "dataset": "d", "id": 2, "rewards": [1, 0], "tokens": ' + value + "}\n"
    path.write_text(good + bad)
    with pytest.raises(DataError, match=r"line 2, field 'tokens': .* is not an integer in \[0, 2\*\*63 - 1\]"):
        read_reward_log(path)


@pytest.mark.parametrize(
    ("tokens", "match"),
    [([3, -1], "field 'tokens': -1 is not an integer"), ([3, 1.5], "1.5 is not an integer"), ([3], "1 token counts"),
     ("12", "must be one integer per group"), (7, "must be one integer per group")],
)  # fmt: skip
def test_the_writer_refuses_bad_tokens_and_writes_nothing(tmp_path: Path, tokens: object, match: str) -> None:
    path = tmp_path / "log.jsonl"
    with RewardLogWriter(path) as w:
        w.write(0, ["d"], [0], [[1.0, 0.0]], [4])
        before = path.read_bytes()
        with pytest.raises(DataError, match=match):
            w.write(1, ["d", "d"], [1, 2], [[1.0, 0.0], [0.0, 1.0]], tokens)
        w.write(1, ["d"], [1], [[1.0, 0.0]], np.array([9]))  # the writer is as it was: the next line is line 2
    assert path.read_bytes().startswith(before)
    assert read_reward_log(path).tokens.tolist() == [4, 9]
