"""TRL's own ``GRPOTrainer`` test cases of reward functions and reward models, run against
``SnoozeGRPOTrainer`` (what the port changes: ``_trl_ported``): one or several functions, weights, sync and
async, ``None`` outputs, extra columns, aggregation, and what a reward function may call.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
torch = pytest.importorskip("torch")

from integrations import _trl_ported as ported  # noqa: E402
from integrations import _trl_tiny as tiny  # noqa: E402
from integrations._trl_ported import make_trainer, reward_unique, train_and_check  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

names = ported.names  # the shared fixture: the tiny models (one torch thread: tests/conftest.py)


def test_train_different_reward_model(names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, trace = make_trainer(
        names,
        tmp_path,
        monkeypatch,
        reward=tiny.reward_model(seed=7),
        data=tiny.prompts(True),
        reward_processing_classes=tiny.tokenizer(),
    )
    train_and_check(trainer, trace)


@pytest.mark.parametrize(
    "conversational", [False, True], ids=["test_train_reward_func_standard", "test_train_reward_func_conversational"]
)
def test_train_reward_func(
    conversational: bool, names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = make_trainer(
        names, tmp_path, monkeypatch, reward=tiny.reward_len, data=tiny.prompts(conversational)
    )
    train_and_check(trainer, trace)
    assert trainer.scheduler.config.out_of_range == "accept"  # lengths lie outside [0, 1]: recorded as they are
    assert max(float(s["batch"].rewards.max()) for s in trace.steps) > 1


def test_train_multiple_reward_funcs(names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, trace = make_trainer(names, tmp_path, monkeypatch, reward=[tiny.reward_len, reward_unique])
    train_and_check(trainer, trace)


def test_train_sync_and_async_reward_funcs(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ones(completions: list[Any], **kwargs: Any) -> list[float]:
        return [1 for _ in completions]

    async def unique_async(completions: list[Any], **kwargs: Any) -> list[float]:
        await asyncio.sleep(0)
        return reward_unique(completions)

    trainer, trace = make_trainer(names, tmp_path, monkeypatch, reward=[tiny.reward_len, ones, unique_async])
    train_and_check(trainer, trace)


def test_train_multiple_reward_funcs_with_None_output(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_applicable(completions: list[Any], **kwargs: Any) -> list[None]:
        return [None] * len(completions)

    trainer, trace = make_trainer(names, tmp_path, monkeypatch, reward=[tiny.reward_len, not_applicable])
    train_and_check(trainer, trace)


def test_train_multiple_reward_funcs_with_weights(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = make_trainer(
        names, tmp_path, monkeypatch, reward=[tiny.reward_len, reward_unique], reward_weights=[0.7, 0.3]
    )
    train_and_check(trainer, trace)
    last = trainer.state.log_history[-1]
    for key in (
        "rewards/reward_len/mean",
        "rewards/reward_len/std",
        "rewards/reward_unique/mean",
        "rewards/reward_unique/std",
    ):
        assert key in last
    # ours: the scheduler was given TRL's weighted sum, and its range is the weights' (each function in [0, 1])
    assert trainer.scheduler.config.reward_range == (0.0, 1.0)
    handed = trace.steps[0]["handed"]
    texts = trainer.processing_class.batch_decode(handed["completion_ids"][:3], skip_special_tokens=True)
    want = [0.7 * len(t) + 0.3 * len(set(t)) for t in texts]
    np.testing.assert_allclose(trace.steps[0]["batch"].rewards[0], want, rtol=1e-5)


@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
def test_reward_metric_reflects_reward_weights(
    aggregation: str, names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def one(completions: list[Any], **kwargs: Any) -> list[float]:
        return [1.0] * len(completions)

    def zero(completions: list[Any], **kwargs: Any) -> list[float]:
        return [0.0] * len(completions)

    trainer, trace = make_trainer(
        names,
        tmp_path,
        monkeypatch,
        reward=[one, zero],
        reward_weights=[0.7, 0.3],
        multi_objective_aggregation=aggregation,
        max_steps=2,
    )
    before = tiny.snapshot(trainer.model)
    trainer.train()
    trace.check()  # nothing handed to TRL but inert rows
    assert abs(trainer.state.log_history[-1]["reward"] - 0.7) < 1e-5
    # ours: every group is a constant 0.7 of the range (0, 1), flat: none is trained on, nothing moves,
    # and each step generated max_gen_rounds rounds looking for signal
    steps = [h for h in trainer.state.log_history if "snooze/gen/rounds" in h]
    assert all(h["snooze/gen/rounds"] == 8 and h["snooze/train/groups"] == 0 for h in steps)
    assert all(h["snooze/groups/flat"] == h["snooze/gen/groups"] for h in steps)
    assert len(tiny.changed(before, trainer.model)) == len(before)


def test_train_multiple_mixed_reward_funcs(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = make_trainer(names, tmp_path, monkeypatch, reward=[tiny.reward_len, names["reward"]])
    train_and_check(trainer, trace)


def test_train_reward_func_additional_column(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tiny.prompts()
    data = data.add_column("some_values", list(range(len(data))))
    seen: list[tuple[str, int]] = []

    def reward_func(prompts: list[str], completions: list[str], some_values: list[int], **kwargs: Any) -> list[float]:
        seen.extend(zip(prompts, some_values))
        return [float(abs(len(c) - v)) for c, v in zip(completions, some_values, strict=True)]

    trainer, trace = make_trainer(names, tmp_path, monkeypatch, reward=reward_func, data=data)
    train_and_check(trainer, trace)
    # ours: each prompt came with its own row's column (the scheduler's records are the dataset's rows)
    assert seen and set(seen) <= {(p, i) for i, p in enumerate(tiny.LINES)}


def test_train_normalize_then_sum_aggregation(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = make_trainer(
        names,
        tmp_path,
        monkeypatch,
        reward=[tiny.reward_len, reward_unique],
        multi_objective_aggregation="normalize_then_sum",
    )
    train_and_check(trainer, trace)


def test_warning_raised_all_rewards_none(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def always_none(completions: list[Any], **kwargs: Any) -> list[None]:
        return [None] * len(completions)

    trainer, _ = make_trainer(names, tmp_path, monkeypatch, reward=always_none, max_steps=1)
    with caplog.at_level("WARNING", logger="trl.trainer.grpo_trainer"):
        trainer.train()
    assert "All reward functions returned None for the following kwargs:" in caplog.text
    # ours: an unscored completion counts as the low end of the range, so every group is too hard
    step = next(h for h in trainer.state.log_history if "snooze/gen/groups" in h)
    assert step["snooze/groups/too_hard"] == step["snooze/gen/groups"] > 0 and step["snooze/train/groups"] == 0


def test_train_with_reward_func_accessing_trainer_state(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[int] = []

    def reward_func(completions: list[Any], **kwargs: Any) -> list[float]:
        trainer_state = kwargs.get("trainer_state")
        assert trainer_state is not None and hasattr(trainer_state, "global_step")
        steps.append(trainer_state.global_step)
        return reward_unique(completions)

    trainer, trace = make_trainer(names, tmp_path, monkeypatch, reward=reward_func)
    trainer.train()
    trace.check()
    assert sorted(set(steps)) == [0, 1, 2]  # ours: every round of step k is scored at global step k


def test_train_reward_func_with_log_extra(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reward_func(completions: list[Any], **kwargs: Any) -> list[float]:
        log_extra = kwargs.get("log_extra")
        assert log_extra is not None
        log_extra("test_column", [c[:5] for c in completions])
        return tiny.reward_len(completions)

    trainer, trace = make_trainer(names, tmp_path, monkeypatch, reward=reward_func, log_completions=True)
    trainer.train()
    assert "test_column" in trainer._logs["extra"]
    trace.check()


def test_train_reward_func_with_log_metric(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reward_func(completions: list[Any], **kwargs: Any) -> list[float]:
        log_metric = kwargs.get("log_metric")
        assert log_metric is not None
        log_metric("custom_accuracy", 0.75)
        return tiny.reward_len(completions)

    trainer, trace = make_trainer(names, tmp_path, monkeypatch, reward=reward_func)
    trainer.train()
    assert "custom_accuracy" in {k for entry in trainer.state.log_history for k in entry}
    trace.check()
