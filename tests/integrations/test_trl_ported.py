"""TRL's own ``GRPOTrainer`` test cases, run against ``SnoozeGRPOTrainer`` with its default policy (snooze).

Ported from ``tests/test_grpo_trainer.py`` of the TRL repository (the trl 1.16.0 sdist ships no tests; the
cases are those of the newest snapshot available, each checked against trl 1.16.0's GRPOConfig), one case
per TRL test of the same name, with TRL's own assertions. What changes, and why:

- models and data are built here (``_trl_tiny``): a 1-layer Llama stands for TRL's tiny Qwen, a Llama
  sequence classifier for its tiny reward model, and 12 prompt-only rows for its "zen" dataset; where TRL
  passes a hub id, the test passes the folder the model was saved to;
- ``use_cpu=True, bf16=False`` (the CI has no GPU) and ``max_steps=3`` (TRL trains 3 epochs of 17 prompts,
  51 steps a case; 3 steps move every parameter too and keep the suite's time low);
- TRL's assertions (a train loss, every parameter changed, a logged key) hold for a trainer that ignores
  the scheduler, so each case also runs :class:`_trl_tiny.Trace`: every row handed to TRL is a generated
  row of a group the scheduler kept, with the rewards it recorded and a non-zero spread. TRL's reward
  model gives every group spread, so the cases that differ only in their GRPOConfig generate twice the
  prompts a step takes (half are surplus): handing TRL the generated rows instead of the kept groups
  fails 23 of the cases.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
torch = pytest.importorskip("torch")

import snooze  # noqa: E402
from integrations import _trl_tiny as tiny  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.slow]


@pytest.fixture(scope="module")
def names(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Folders standing for TRL's hub ids: the tiny causal LM and the tiny reward model."""
    root = tmp_path_factory.mktemp("models")
    return {"model": tiny.save(tiny.causal_lm(), root / "lm"), "reward": tiny.save(tiny.reward_model(), root / "rm")}


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


def _args(tmp: Path, **kw: Any) -> Any:
    from trl import GRPOConfig

    base = {
        "output_dir": str(tmp),
        "learning_rate": 0.1,
        "per_device_train_batch_size": 3,
        "num_generations": 3,
        "max_completion_length": 8,
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "max_steps": 3,
        "disable_tqdm": True,
        "save_strategy": "no",
    }
    return GRPOConfig(**{**base, **kw})


def _trainer(
    names: dict[str, str],
    tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    reward: Any = None,
    data: Any = None,
    **kw: Any,
) -> tuple[Any, tiny.Trace]:
    from snooze.integrations.trl import SnoozeGRPOTrainer

    extra = {k: kw.pop(k) for k in ("eval_dataset", "reward_processing_classes", "snooze_config") if k in kw}
    trainer = SnoozeGRPOTrainer(
        model=kw.pop("model", names["model"]),
        reward_funcs=names["reward"] if reward is None else reward,
        args=_args(tmp, **kw),
        train_dataset=tiny.prompts() if data is None else data,
        **extra,
    )
    return trainer, tiny.Trace(trainer, monkeypatch)


def _train_and_check(trainer: Any, trace: tiny.Trace, keeps_zero_signal: bool = False) -> None:
    """TRL's assertions (a train loss, every parameter changed), then ours (:meth:`Trace.check`)."""
    before = tiny.snapshot(trainer.model)
    trainer.train()
    assert trainer.state.log_history[-1]["train_loss"] is not None
    assert not tiny.changed(before, trainer.model), "Parameter has not changed."
    trace.check(keeps_zero_signal)
    assert sum(trace.trained_groups()) > 0
    assert any("snooze/gen/rounds" in h for h in trainer.state.log_history)


def reward_unique(completions: list[Any], **kwargs: Any) -> list[float]:
    """Rewards completions with more unique letters (TRL's ``reward_func2``)."""
    return [float(len(set(c))) for c in completions]


# -- the cases that differ only in their configuration: TRL's test name -> GRPOConfig fields ----------------
CONFIG_CASES = {
    "test_train": {},
    "test_train_loss_types[bnpo]": {"loss_type": "bnpo", "max_completion_length": 32, "gradient_accumulation_steps": 2},
    "test_train_loss_types[dr_grpo]": {
        "loss_type": "dr_grpo",
        "max_completion_length": 32,
        "gradient_accumulation_steps": 2,
    },
    "test_train_loss_types[dapo]": {"loss_type": "dapo", "max_completion_length": 32, "gradient_accumulation_steps": 2},
    "test_train_loss_types[cispo]": {
        "loss_type": "cispo",
        "max_completion_length": 32,
        "gradient_accumulation_steps": 2,
    },
    "test_train_loss_types[sapo]": {"loss_type": "sapo", "max_completion_length": 32, "gradient_accumulation_steps": 2},
    "test_train_loss_types[luspo]": {
        "loss_type": "luspo",
        "importance_sampling_level": "sequence",
        "max_completion_length": 32,
        "gradient_accumulation_steps": 2,
    },
    "test_train_loss_types[vespo]": {
        "loss_type": "vespo",
        "max_completion_length": 32,
        "gradient_accumulation_steps": 2,
    },
    "test_train_multiple_iterations": {"num_iterations": 2},
    "test_train_beta_non_zero": {"beta": 0.1},
    "test_train_with_pad_to_multiple_of": {"pad_to_multiple_of": 8},
    "test_train_with_off_policy_mask": {"off_policy_mask_threshold": 0.5},
    "test_train_scale_rewards[False]": {"scale_rewards": False},
    "test_train_scale_rewards[group]": {"scale_rewards": "group"},
    "test_train_scale_rewards[batch]": {"scale_rewards": "batch"},
    "test_train_scale_rewards[none]": {"scale_rewards": "none"},
    "test_train_num_generations_larger_than_batch_size": {"num_generations": 6, "gradient_accumulation_steps": 2},
    "test_train_delta_clipping": {"delta": 2.0},
    "test_train_with_generation_kwargs": {
        "generation_kwargs": {"do_sample": True, "top_k": 50, "num_beams": 2, "length_penalty": -0.1}
    },
    "test_train_sequence_importance_sampling": {"num_iterations": 2, "importance_sampling_level": "sequence"},
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_trl_case(case: str, names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the scheduler generating twice the prompts a round that TRL's batch takes (``gen_batch_size``): the
    reward model gives every group spread, so half the groups are surplus, and a trainer that handed TRL what
    it generated rather than what the scheduler kept would fail the Trace."""
    args = _args(tmp_path, **CONFIG_CASES[case])
    B = args.generation_batch_size // args.num_generations  # prompts a generation takes
    trainer, trace = _trainer(
        names, tmp_path, monkeypatch, snooze_config={"gen_batch_size": 2 * B}, **CONFIG_CASES[case]
    )
    _train_and_check(trainer, trace)
    steps = [h for h in trainer.state.log_history if "snooze/gen/groups" in h]
    assert steps and all(h["snooze/gen/groups"] == 2 * B and h["snooze/surplus/discarded"] == B for h in steps)
    if case == "test_train_multiple_iterations":  # one generation serves num_iterations optimizer steps
        assert len(trace.steps) == 2  # steps 0 and 2 of 3


@pytest.mark.parametrize("conversational", [False, True], ids=["standard_prompt_only", "conversational_prompt_only"])
def test_train_dataset_format(
    conversational: bool, names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = _trainer(names, tmp_path, monkeypatch, data=tiny.prompts(conversational))
    _train_and_check(trainer, trace)
    first = trace.steps[0]["batch"].candidates[0].record["prompt"]
    assert isinstance(first, list) is conversational  # the scheduler's records are the dataset's rows, as TRL's


def test_init_minimal(names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL's: model, reward model and train_dataset only (GRPOConfig's defaults, which want bf16: see
    test_trl_dropin's quick start for why the check of bf16 is told the CPU has it)."""
    import transformers.training_args

    from snooze.integrations.trl import SnoozeGRPOTrainer

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    trainer = SnoozeGRPOTrainer(model=names["model"], reward_funcs=names["reward"], train_dataset=tiny.prompts())
    cfg = trainer.scheduler.config  # ours: the scheduler TRL's defaults imply (8 completions, 8 rows a generation)
    assert (cfg.group_size, cfg.batch_size, cfg.policy, trainer.scheduler.seed) == (8, 1, "dynamic_sampling", 42)
    assert len(trainer.scheduler.sources[0]) == len(tiny.LINES)


@pytest.mark.parametrize(
    "case", ["test_train_with_eval", "test_train_with_num_generations_eval", "test_train_eval_on_start"]
)
def test_train_with_eval(case: str, names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kw: dict[str, Any] = {"per_device_eval_batch_size": 3, "eval_strategy": "steps", "eval_steps": 2}
    kw.update(
        {
            "test_train_with_num_generations_eval": {"num_generations_eval": 1},
            "test_train_eval_on_start": {"loss_type": "grpo", "eval_on_start": True},
        }.get(case, {})
    )
    trainer, trace = _trainer(names, tmp_path, monkeypatch, eval_dataset=tiny.prompts(lines=tiny.TEST_LINES), **kw)
    trainer.train()  # TRL asserts nothing here; ours: evaluation ran on TRL's path, training on the scheduler's
    evals = [h["step"] for h in trainer.state.log_history if "eval_loss" in h]
    assert 2 in evals and (0 in evals) == (case == "test_train_eval_on_start")
    trace.check()
    trained = {c.record["prompt"] for s in trace.steps for c in s["batch"].candidates}
    assert trained and trained <= set(tiny.LINES)


def test_train_different_reward_model(names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, trace = _trainer(
        names,
        tmp_path,
        monkeypatch,
        reward=tiny.reward_model(seed=7),
        data=tiny.prompts(True),
        reward_processing_classes=tiny.tokenizer(),
    )
    _train_and_check(trainer, trace)


@pytest.mark.parametrize(
    "conversational", [False, True], ids=["test_train_reward_func_standard", "test_train_reward_func_conversational"]
)
def test_train_reward_func(
    conversational: bool, names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=tiny.reward_len, data=tiny.prompts(conversational))
    _train_and_check(trainer, trace)
    assert trainer.scheduler.config.out_of_range == "accept"  # lengths lie outside [0, 1]: recorded as they are
    assert max(float(s["batch"].rewards.max()) for s in trace.steps) > 1


def test_train_multiple_reward_funcs(names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=[tiny.reward_len, reward_unique])
    _train_and_check(trainer, trace)


def test_train_sync_and_async_reward_funcs(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ones(completions: list[Any], **kwargs: Any) -> list[float]:
        return [1 for _ in completions]

    async def unique_async(completions: list[Any], **kwargs: Any) -> list[float]:
        await asyncio.sleep(0)
        return reward_unique(completions)

    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=[tiny.reward_len, ones, unique_async])
    _train_and_check(trainer, trace)


def test_train_multiple_reward_funcs_with_None_output(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def not_applicable(completions: list[Any], **kwargs: Any) -> list[None]:
        return [None] * len(completions)

    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=[tiny.reward_len, not_applicable])
    _train_and_check(trainer, trace)


def test_train_multiple_reward_funcs_with_weights(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = _trainer(
        names, tmp_path, monkeypatch, reward=[tiny.reward_len, reward_unique], reward_weights=[0.7, 0.3]
    )
    _train_and_check(trainer, trace)
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

    trainer, trace = _trainer(
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
    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=[tiny.reward_len, names["reward"]])
    _train_and_check(trainer, trace)


def test_train_reward_func_additional_column(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tiny.prompts()
    data = data.add_column("some_values", list(range(len(data))))
    seen: list[tuple[str, int]] = []

    def reward_func(prompts: list[str], completions: list[str], some_values: list[int], **kwargs: Any) -> list[float]:
        seen.extend(zip(prompts, some_values))
        return [float(abs(len(c) - v)) for c, v in zip(completions, some_values, strict=True)]

    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=reward_func, data=data)
    _train_and_check(trainer, trace)
    # ours: each prompt came with its own row's column (the scheduler's records are the dataset's rows)
    assert seen and set(seen) <= {(p, i) for i, p in enumerate(tiny.LINES)}


def test_train_with_sync_ref_model(names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, trace = _trainer(names, tmp_path, monkeypatch, beta=0.1, sync_ref_model=True, ref_model_sync_steps=2)
    assert trainer.ref_model is not None
    ref_before = tiny.snapshot(trainer.ref_model)
    _train_and_check(trainer, trace)
    assert not tiny.changed(ref_before, trainer.ref_model), "Ref Parameter has not changed."


def test_train_normalize_then_sum_aggregation(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = _trainer(
        names,
        tmp_path,
        monkeypatch,
        reward=[tiny.reward_len, reward_unique],
        multi_objective_aggregation="normalize_then_sum",
    )
    _train_and_check(trainer, trace)


def test_warning_raised_all_rewards_none(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def always_none(completions: list[Any], **kwargs: Any) -> list[None]:
        return [None] * len(completions)

    trainer, _ = _trainer(names, tmp_path, monkeypatch, reward=always_none, max_steps=1)
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

    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=reward_func)
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

    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=reward_func, log_completions=True)
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

    trainer, trace = _trainer(names, tmp_path, monkeypatch, reward=reward_func)
    trainer.train()
    assert "custom_accuracy" in {k for entry in trainer.state.log_history for k in entry}
    trace.check()


def test_prepare_input_called_with_correct_data(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's data-order test, on 12 rows where TRL's has 17 (both give two generation batches of 6 prompts an
    epoch). TRL inspects the dataloader's batches, which the adapter does not train on; ours inspects the
    prompts the scheduler had generated: with shuffle_dataset=False, the dataset's order."""
    from trl import GRPOTrainer

    trainer, trace = _trainer(
        names,
        tmp_path,
        monkeypatch,
        gradient_accumulation_steps=3,
        steps_per_generation=4,
        num_generations=4,
        per_device_train_batch_size=6,
        num_iterations=2,
        shuffle_dataset=False,
        max_steps=-1,
    )
    first = [{"prompt": p} for p in tiny.LINES[:6] for _ in range(4)]
    second = [{"prompt": p} for p in tiny.LINES[6:] for _ in range(4)]
    with patch.object(GRPOTrainer, "training_step", wraps=trainer.training_step) as mock_prepare:
        trainer.train()
        assert mock_prepare.call_count == 48  # 3 epochs * 2 iterations * 2 generation batches * 4 steps_per_generation
        for i in range(0, 8):
            assert mock_prepare.call_args_list[i].args[1] == first
        for i in range(8, 16):
            assert mock_prepare.call_args_list[i].args[1] == second
    generated = [[c.record["prompt"] for c in s["batch"].candidates] for s in trace.steps]
    assert generated[:2] == [tiny.LINES[:6], tiny.LINES[6:]]
    assert trainer.scheduler.config.shuffle is False
    trace.check()


def test_train_with_iterable_dataset(names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRL trains on a stream; the scheduler revisits prompts by id, so a stream is refused when the trainer is
    built (it used to be taken and fail at step 0), and the fix the message gives trains."""
    from datasets import Dataset

    stream = tiny.prompts().to_iterable_dataset()
    with pytest.raises(
        snooze.IntegrationError, match=r"streaming dataset \(IterableDataset\).*Dataset.from_list\(list\(stream\)\)"
    ):
        _trainer(names, tmp_path, monkeypatch, data=stream, max_steps=4)
    trainer, trace = _trainer(names, tmp_path, monkeypatch, data=Dataset.from_list(list(stream)), max_steps=4)
    _train_and_check(trainer, trace)


def test_warning_raised_sequence_level_with_token_summed_loss(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="trl.trainer.grpo_trainer"):
        _trainer(
            names, tmp_path, monkeypatch, reward=tiny.reward_len, importance_sampling_level="sequence", loss_type="dapo"
        )
    assert "weights each sequence by its completion length" in caplog.text


def test_the_policy_decides_nothing_trl_trains_on_differs(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A case of ours beside TRL's: training under dynamic_sampling, two prompts a round, with a reward that is
    constant for every other prompt: those groups are never handed to TRL."""
    solved = set(tiny.LINES[::2])

    def reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        return [1.0 if p in solved else float(len(c) % 2) for p, c in zip(prompts, completions)]

    trainer, trace = _trainer(
        names,
        tmp_path,
        monkeypatch,
        reward=reward,
        per_device_train_batch_size=6,
        snooze_config={"policy": "dynamic_sampling"},
    )  # 2 prompts a round
    trainer.train()
    trace.check()
    trained = {c.record["prompt"] for s in trace.steps for c in s["batch"].candidates}
    assert trained and not trained & solved
