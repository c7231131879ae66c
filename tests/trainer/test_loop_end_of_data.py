"""The reference trainer at the end of the data (issue 49 build 6): with finite ``epochs`` and ``carry_surplus``,
the groups the last drawing step carried out are trained in one more step before the run stops, and a resume
at that point trains them too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import snooze
from snooze.trainer.loop import TrainConfig, train
from snooze.trainer.model import ModelConfig, TinyGPT
from snooze.trainer.tasks import TaskSpec, make_split
from snooze.trainer.tokenizer import CharTokenizer

SPEC = TaskSpec.parse("rev:3-4")
MODEL = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2)
# grpo keeps every group, so each round of 6 leaves a surplus; 18 prompts, one epoch: the data runs out at the
# 4th step (6 + 6 + 6 drawn, steps of 4), which carries 2 groups out, and the 5th trains them
SCHED = snooze.SchedulerConfig(
    batch_size=4, gen_batch_size=6, group_size=2, policy="grpo", carry_surplus=True, epochs=1, audit=0.0
)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    torch.manual_seed(0)
    pool = make_split(SPEC, "pool", 18)
    test = make_split(SPEC, "test", 4, exclude=[r["prompt"] for r in pool])
    return {"pool": {SPEC.name: pool}, "test": {SPEC.name: test}, "base": TinyGPT(MODEL).state_dict()}


@pytest.mark.parametrize("stop_after", [None, 4], ids=["whole", "resumed-after-the-data-ran-out"])
def test_the_groups_carried_past_the_end_of_the_data_are_trained(
    data: dict[str, Any], tmp_path: Path, stop_after: int | None
) -> None:
    cfg = TrainConfig(steps=20, eval_every=100, checkpoint_every=1, max_new_tokens=4)
    args = (data["pool"], data["test"], SCHED, cfg, MODEL, data["base"])
    if stop_after is not None:
        train(tmp_path, *args, stop_after=stop_after)  # stops with the 2 carried groups waiting
    train(tmp_path, *args)
    lines = _lines(tmp_path / "metrics.jsonl")
    assert [x["step"] for x in lines] == [0, 1, 2, 3, 4]  # one step after the one that used the data up
    assert lines[3]["surplus/carried_out"] == 2 and lines[4]["surplus/carried_in"] == 2
    assert lines[4]["gen/groups"] == 0 and lines[4]["train/size"] == 2 and "train/loss" in lines[4]
    assert sum(x["surplus/carried_out"] for x in lines) == sum(x["surplus/carried_in"] for x in lines)
    assert sum(x["train/size"] for x in lines) == 18  # every prompt's group trained on, once
