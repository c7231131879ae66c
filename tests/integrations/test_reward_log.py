"""The adapters' reward-log helpers: writing from candidates, cutting back on resume."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import snooze
from snooze.analysis.reward_log import read_reward_log
from snooze.integrations.reward_log import RewardLogWriter, truncate_reward_log, write_groups


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
    assert truncate_reward_log(path, 1) == 4
    assert [json.loads(x)["step"] for x in path.read_text().splitlines()] == [0, 0]
    assert truncate_reward_log(tmp_path / "missing.jsonl", 0) == 0


def test_truncate_rejects_a_file_that_is_not_a_reward_log(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"no_step": 1}\n')
    with pytest.raises(snooze.IntegrationError, match="not a reward-log line"):
        truncate_reward_log(bad, 0)
