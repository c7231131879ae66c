"""The one-round mode against plain ``GRPOTrainer``, both real TRL runs on the tiny local model with the same
data, sizes and seed: ``snooze_config={"policy": "snooze", "options": {"factor": 1}, "max_gen_rounds": 1}``
generates exactly as many groups every step as ``GRPOTrainer`` (one round of ``generation_batch_size`` rows), and
fewer of them, and none of those trained on, are zero-signal groups: too-easy prompts are skipped before rollout.
Counted from what the reward function was called with (every generated completion) and from the batches."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
pytest.importorskip("torch")

from integrations import _trl_tiny as tiny  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.usefixtures("one_thread")]

G, STEPS = 4, 12
KINDS = "eeeemmmm"  # half the prompts always solved (too easy), half a coin per completion
RECORDS = [{"id": f"{k}{i}", "prompt": line} for i, (k, line) in enumerate(zip(KINDS, tiny.LINES))]
ONE_ROUND = {"policy": "snooze", "options": {"factor": 1}, "max_gen_rounds": 1}


class Rewards:
    """Scores by id (easy: 1; mid: the parity of the completion's CRC) and keeps every call's rewards by group."""

    def __init__(self) -> None:
        self.__name__ = "rewards"
        self.calls: list[np.ndarray] = []  # one [groups, G] array per generation round

    def __call__(self, completions: list[Any], id: list[str], **kwargs: Any) -> list[float]:
        out = [1.0 if i[0] == "e" else float(zlib.crc32(c.encode()) % 2) for c, i in zip(completions, id)]
        self.calls.append(np.asarray(out).reshape(-1, G))
        return out


def _run(model_name: str, tmp: Path, snooze_config: dict[str, Any] | None) -> tuple[Rewards, list[Any]]:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from snooze.integrations.trl import SnoozeGRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp),
        per_device_train_batch_size=8,  # 8 rows a step: 2 groups of 4
        num_generations=G,
        max_completion_length=4,
        max_steps=STEPS,
        learning_rate=0.05,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        seed=0,
    )
    rewards, batches = Rewards(), []
    data = Dataset.from_list(RECORDS)
    if snooze_config is None:
        GRPOTrainer(model=model_name, reward_funcs=rewards, args=args, train_dataset=data).train()
    else:
        SnoozeGRPOTrainer(
            model=model_name,
            reward_funcs=rewards,
            args=args,
            train_dataset=data,
            snooze_config=snooze_config,
            on_batch=batches.append,
        ).train()
    return rewards, batches


def _zero_signal(groups: np.ndarray) -> int:
    return int((np.ptp(groups, axis=1) == 0).sum())


def test_one_round_generates_what_grpo_trainer_does_with_fewer_zero_signal_groups(tmp_path: Path) -> None:
    model_name = tiny.save(tiny.causal_lm(), tmp_path / "lm")
    plain, _ = _run(model_name, tmp_path / "grpo", None)
    mine, batches = _run(model_name, tmp_path / "one_round", ONE_ROUND)

    # the same generation every step: one round of 2 groups of 4
    assert [c.shape[0] for c in plain.calls] == [2] * STEPS
    assert [c.shape[0] for c in mine.calls] == [2] * STEPS
    assert [b.metrics["gen/groups"] for b in batches] == [2] * STEPS

    # GRPOTrainer trains on every group it generated; the one-round mode on the signal groups only
    plain_generated = np.concatenate(plain.calls)
    mine_generated = np.concatenate(mine.calls)
    trained = [b.rewards[i] for b in batches for i in range(len(b))]
    plain_share = _zero_signal(plain_generated) / len(plain_generated)
    mine_share = _zero_signal(mine_generated) / len(mine_generated)
    trained_share = _zero_signal(np.asarray(trained)) / max(len(trained), 1)
    print(
        f"zero-signal groups, of {len(plain_generated)} generated in {STEPS} steps: GRPOTrainer "
        f"{_zero_signal(plain_generated)} ({plain_share:.2f}), all trained on; one-round "
        f"{_zero_signal(mine_generated)} ({mine_share:.2f}), of the {len(trained)} trained on {trained_share:.2f}"
    )
    assert mine_share < plain_share  # too-easy prompts are skipped before rollout
    assert trained_share == 0.0 < plain_share
    assert sum(b.metrics["snooze/skipped"] for b in batches) > 0
