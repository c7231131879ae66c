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
