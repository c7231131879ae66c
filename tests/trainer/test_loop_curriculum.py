"""The training loop with a curriculum: stages take effect, resume is exact, mismatches are refused.

A random tiny policy is enough here (what is tested is which prompts are drawn and when the stage
changes, not learning), so these runs need no warm-up and take about a second each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import snooze
from snooze.curriculum import Curriculum
from snooze.trainer.checkpoint import committed
from snooze.trainer.loop import CURRICULUM_STATE, METRICS_FILE, REWARDS_FILE, TrainConfig, train
from snooze.trainer.model import ModelConfig, TinyGPT
from snooze.trainer.tasks import parse_tasks, task_splits
from snooze.trainer.tokenizer import CharTokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

REV, COUNT = "rev:3-5", "count:4-6"
MODEL = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2)
SCHED = snooze.SchedulerConfig(batch_size=4, group_size=2, policy="grpo")
POOLS, TESTS = task_splits(parse_tasks([REV, COUNT]), pool_size=24, test_size=4)
HIDDEN = [r["id"] for r in POOLS[REV][:12]]  # left out in stage 0 only
DROPPED = [POOLS[REV][12]["id"], POOLS[COUNT][0]["id"]]  # left out in every stage


def _base() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return TinyGPT(MODEL).state_dict()


BASE = _base()


def _curriculum(advance: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "version": 1,
        "drop": {REV: [DROPPED[0]], COUNT: [DROPPED[1]]},
        "stages": [
            {"name": "rev-only", "weights": {REV: 1.0}, "exclude": {REV: HIDDEN}, "advance": advance},
            {"name": "all", "weights": {REV: 0.5, COUNT: 0.5}, "exclude": {}},
        ],
    }


def _cfg(steps: int) -> TrainConfig:
    return TrainConfig(steps=steps, eval_every=100, checkpoint_every=1, max_new_tokens=6, seed=3)


def _train(run_dir: Path, cur: dict[str, Any] | None, steps: int = 6, **kw: Any) -> None:
    curriculum = Curriculum.from_dict(cur) if cur is not None else None
    train(run_dir, POOLS, TESTS, SCHED, _cfg(steps), MODEL, BASE, curriculum=curriculum, **kw)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_stages_switch_at_their_step_and_their_exclusions_hold(tmp_path: Path) -> None:
    _train(tmp_path, _curriculum([{"step": 3}]), steps=7)
    metrics = _lines(tmp_path / METRICS_FILE)
    assert [m["curriculum/stage"] for m in metrics] == [0, 0, 0, 1, 1, 1, 1]
    groups = _lines(tmp_path / REWARDS_FILE)[1:]  # after the header
    early, late = [g for g in groups if g["step"] < 3], [g for g in groups if g["step"] >= 3]
    assert len(early) == 3 * SCHED.batch_size and len(late) == 4 * SCHED.batch_size
    # stage 0: only rev (count has weight 0), none of its hidden prompts; dropped prompts never
    assert {g["dataset"] for g in early} == {REV}
    assert not {g["id"] for g in early} & set(HIDDEN)
    assert not {g["id"] for g in groups} & set(DROPPED)
    # stage 1: count is drawn (the mix makes up its missed share first, so rev may not be)
    assert COUNT in {g["dataset"] for g in late}
    state = json.loads((committed(tmp_path / "checkpoint") / CURRICULUM_STATE).read_text())
    assert state["stage"] == 1 and state["n_stages"] == 2
    assert json.loads((tmp_path / "config.json").read_text())["curriculum"]["stages"] == ["rev-only", "all"]


@pytest.mark.parametrize("stop_after", [2, 4])
def test_interrupted_and_resumed_run_equals_uninterrupted(tmp_path: Path, stop_after: int) -> None:
    # a metric condition that holds every step (a random policy has no signal): the stage starts
    # after 3 steps only if the streak survives the interruption at step 2
    cur = _curriculum([{"metric": "efficiency", "op": "<", "value": 0.5, "for_steps": 3}])
    _train(tmp_path / "a", cur)
    _train(tmp_path / "b", cur, stop_after=stop_after)
    assert json.loads((committed(tmp_path / "b" / "checkpoint") / CURRICULUM_STATE).read_text())["stage"] == (
        stop_after >= 3
    )
    _train(tmp_path / "b", cur)  # resumes at step stop_after
    drop = ("time/step_s", "time/elapsed_s")
    a, b = ([{k: v for k, v in x.items() if k not in drop} for x in _lines(tmp_path / r / METRICS_FILE)] for r in "ab")
    assert [x["curriculum/stage"] for x in a] == [0, 0, 0, 1, 1, 1]
    assert [x["step"] for x in b] == list(range(6)) and a == b
    assert (tmp_path / "a" / REWARDS_FILE).read_text() == (tmp_path / "b" / REWARDS_FILE).read_text()


def test_resuming_with_another_curriculum_or_none_is_refused(tmp_path: Path) -> None:
    cur = _curriculum([{"step": 3}])
    _train(tmp_path / "with", cur, stop_after=1)
    with pytest.raises(snooze.StateMismatchError, match="started with a curriculum"):
        _train(tmp_path / "with", None)
    other = _curriculum([{"step": 4}])
    with pytest.raises(snooze.StateMismatchError, match="another curriculum"):
        _train(tmp_path / "with", other)
    _train(tmp_path / "without", None, stop_after=1)
    with pytest.raises(snooze.StateMismatchError, match="started without a curriculum"):
        _train(tmp_path / "without", cur)
    _train(tmp_path / "with", cur, stop_after=1)  # the right one resumes
    assert [m["curriculum/stage"] for m in _lines(tmp_path / "with" / METRICS_FILE)] == [0, 0]
