"""The reference trainer with partial groups (``SchedulerConfig.screen_size``, issue 52 item 2): it learns, and
every rollout and token it generates is counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import snooze
from snooze.trainer.grpo import GRPOConfig
from snooze.trainer.loop import REWARDS_FILE, TrainConfig, read_result, train
from snooze.trainer.model import ModelConfig
from snooze.trainer.tasks import TaskSpec, make_split
from snooze.trainer.tokenizer import CharTokenizer
from snooze.trainer.warmup import WarmupConfig, warmup

SPEC = TaskSpec.parse("rev:3-6")
MODEL = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=2, d_model=64, n_head=4)
G, K = 8, 2


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    torch.set_num_threads(2)
    test = make_split(SPEC, "test", 200)
    pool = make_split(SPEC, "pool", 300, exclude=[r["prompt"] for r in test])
    banned = {r["prompt"] for r in test + pool}
    base = warmup(
        [SPEC], banned, WarmupConfig(target_accuracy=0.5, eval_every=50), MODEL, cache_dir=tmp_path_factory.mktemp("c")
    )
    return {"pool": {SPEC.name: pool}, "test": {SPEC.name: test}, "base": base}


def test_a_short_run_with_screening_learns_and_counts_every_rollout_and_token(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    """As the DAPO run of test_loop (the same bar: +5 points avg@8, +3 greedy in 30 steps), each prompt screened with
    2 of its 8 rollouts first. Rollouts: 2 per screen, 6 more per screen that continued; tokens reported for every
    part; the reward log holds exactly the groups completed."""
    sc = snooze.SchedulerConfig(batch_size=16, group_size=G, screen_size=K, policy="dynamic_sampling")
    cfg = TrainConfig(
        steps=30,
        eval_every=30,
        checkpoint_every=0,
        temperature=0.7,
        eval_samples=8,
        grpo=GRPOConfig(lr=3e-4),
    )
    train(tmp_path, setup["pool"], setup["test"], sc, cfg, MODEL, setup["base"].state_dict)
    result = read_result(tmp_path)
    assert result.sampled_final >= result.sampled_base + 0.05, (result.sampled_base, result.sampled_final)
    assert result.final_accuracy >= result.base_accuracy + 0.03, (result.base_accuracy, result.final_accuracy)
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in lines if "gen/screened" in m]
    assert len(steps) == 30
    for m in steps:
        assert m["gen/rollouts"] == K * m["gen/screened"] + (G - K) * m["gen/screen_continued"]
        assert m["gen/groups"] == m["gen/screen_stopped"] + m["gen/screen_continued"]  # each step finishes its screens
        assert (
            m["gen/tokens_missing"] == 0
            and m["gen/rollouts"] <= m["gen/tokens"] <= m["gen/rollouts"] * cfg.max_new_tokens
        )
    stopped = sum(m["gen/screen_stopped"] for m in steps)
    assert stopped > 0 and steps[-1]["total/rollouts"] == sum(m["gen/rollouts"] for m in steps)
    assert steps[-1]["total/rollouts"] < G * steps[-1]["total/gen_groups"]  # stopped screens cost k, not G
    logged = [json.loads(x) for x in (tmp_path / REWARDS_FILE).read_text().splitlines()[1:]]
    assert len(logged) == sum(m["gen/screen_continued"] for m in steps)  # the whole groups
    assert all(len(x["rewards"]) == G for x in logged)


def test_a_finished_screening_run_reads_back_and_a_killed_one_resumes(setup: dict[str, Any], tmp_path: Path) -> None:
    """The reward log holds whole groups only, so a resume checks it against the groups generated less the screens
    stopped (the check counted every screen as a logged group and refused every screening run as incomplete)."""
    sc = snooze.SchedulerConfig(batch_size=8, group_size=G, screen_size=K, policy="dynamic_sampling")
    cfg = TrainConfig(steps=6, eval_every=6, checkpoint_every=3, eval_samples=1, grpo=GRPOConfig(lr=3e-4))
    args = (setup["pool"], setup["test"], sc)
    train(tmp_path / "whole", *args, cfg, MODEL, setup["base"].state_dict)
    first = (tmp_path / "whole" / "metrics.jsonl").read_text()
    train(tmp_path / "whole", *args, cfg, MODEL, setup["base"].state_dict)  # finished: read back, not refused
    assert (tmp_path / "whole" / "metrics.jsonl").read_text() == first
    lines = [json.loads(x) for x in first.splitlines()]
    assert lines[-1]["total/screen_stopped"] > 0  # the case the old check refused
    # killed after step 4, past step 3's checkpoint: the same command cuts the logs back to it and goes on to step 6

    def crash(metrics: dict[str, Any]) -> None:
        if metrics["step"] == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(tmp_path / "killed", *args, cfg, MODEL, setup["base"].state_dict, on_step=crash)
    train(tmp_path / "killed", *args, cfg, MODEL, setup["base"].state_dict)
    resumed = [json.loads(x) for x in (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in resumed] == list(range(6))
    logged = (tmp_path / "killed" / REWARDS_FILE).read_text().splitlines()[1:]
    assert len(logged) == resumed[-1]["total/gen_groups"] - resumed[-1]["total/screen_stopped"]
