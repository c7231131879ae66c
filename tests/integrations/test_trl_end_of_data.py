"""``SnoozeGRPOTrainer`` at the end of the data (issue 49 build 6), a real TRL run on the tiny local model: with
finite ``epochs`` and ``carry_surplus``, the groups the step that used the data up carried out are trained in
one more step before training stops."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
pytest.importorskip("torch")

from integrations import _trl_tiny as tiny  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.usefixtures("one_thread")]

G = 4
RECORDS = [{"id": f"m{i}", "prompt": line} for i, line in enumerate(tiny.LINES[:8])]
# grpo keeps every group: rounds of 4, batches of 2, one epoch of 8 prompts. Step 0 draws 4 and carries 2, step 1
# trains them, step 2 draws the last 4 (the data is used up) and carries 2, and step 3 trains those
CONFIG = {"policy": "grpo", "carry_surplus": True, "gen_batch_size": 4, "epochs": 1, "audit": 0.0}


def _reward(completions: list[Any], **kwargs: Any) -> list[float]:
    return [float(len(c) % 2) for c in completions]


def test_the_groups_carried_past_the_end_of_the_data_are_trained(tmp_path: Path) -> None:
    from datasets import Dataset
    from trl import GRPOConfig

    from snooze.integrations.trl import SnoozeGRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,  # 8 rows a step: 2 groups of 4
        num_generations=G,
        max_completion_length=4,
        max_steps=10,
        learning_rate=0.05,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    batches: list[Any] = []
    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    trainer = SnoozeGRPOTrainer(
        model=model_name,
        reward_funcs=_reward,
        args=args,
        train_dataset=Dataset.from_list(RECORDS),
        snooze_config=CONFIG,
        on_batch=batches.append,
    )
    trainer.train()
    m = [b.metrics for b in batches]
    assert len(batches) == 4 and trainer.scheduler.finished  # one step after the one that used the data up
    assert m[2]["surplus/carried_out"] == 2 and m[3]["surplus/carried_in"] == 2 and m[3]["gen/groups"] == 0
    assert sorted(c.id for b in batches for c in b.candidates) == sorted(r["id"] for r in RECORDS)
    assert trainer.state.global_step == 4
