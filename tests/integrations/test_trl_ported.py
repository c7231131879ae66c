"""TRL's own ``GRPOTrainer`` test cases, run against ``SnoozeGRPOTrainer``: its configurations, data
formats, evaluation, reference model and data order (the reward functions' cases:
``test_trl_ported_rewards.py``; what the port changes: ``_trl_ported``).

TRL's reward model gives every group spread, so the cases that differ only in their GRPOConfig generate
twice the prompts a step takes (half are surplus): handing TRL the generated rows instead of the kept
groups fails 23 of the cases.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
torch = pytest.importorskip("torch")

import snooze  # noqa: E402
from integrations import _trl_ported as ported  # noqa: E402
from integrations import _trl_tiny as tiny  # noqa: E402
from integrations._trl_ported import grpo_args, make_trainer, train_and_check  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

names = ported.names  # the shared fixture: the tiny models (one torch thread: tests/conftest.py)


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
    """With the scheduler generating twice the prompts a round that TRL's batch takes (``gen_batch_size``), under
    DAPO (``dynamic_sampling``: the surplus discarded): the reward model gives every group spread, so half the
    groups are surplus, and a trainer that handed TRL what it generated rather than what the scheduler kept would
    fail the Trace."""
    args = grpo_args(tmp_path, **CONFIG_CASES[case])
    B = args.generation_batch_size // args.num_generations  # prompts a generation takes
    trainer, trace = make_trainer(
        names,
        tmp_path,
        monkeypatch,
        snooze_config={"policy": "dynamic_sampling", "gen_batch_size": 2 * B},
        **CONFIG_CASES[case],
    )
    train_and_check(trainer, trace)
    steps = [h for h in trainer.state.log_history if "snooze/gen/groups" in h]
    assert steps and all(h["snooze/gen/groups"] == 2 * B and h["snooze/surplus/discarded"] == B for h in steps)
    if case == "test_train_multiple_iterations":  # one generation serves num_iterations optimizer steps
        assert len(trace.steps) == 2  # steps 0 and 2 of 3


@pytest.mark.parametrize("conversational", [False, True], ids=["standard_prompt_only", "conversational_prompt_only"])
def test_train_dataset_format(
    conversational: bool, names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trainer, trace = make_trainer(names, tmp_path, monkeypatch, data=tiny.prompts(conversational))
    train_and_check(trainer, trace)
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
    assert (cfg.group_size, cfg.batch_size, cfg.policy, trainer.scheduler.seed) == (8, 1, "snooze", 42)
    assert (cfg.options.factor, cfg.carry_surplus) == (1, True)  # the default: snooze.RECOMMENDED
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
    trainer, trace = make_trainer(names, tmp_path, monkeypatch, eval_dataset=tiny.prompts(lines=tiny.TEST_LINES), **kw)
    trainer.train()  # TRL asserts nothing here; ours: evaluation ran on TRL's path, training on the scheduler's
    evals = [h["step"] for h in trainer.state.log_history if "eval_loss" in h]
    assert 2 in evals and (0 in evals) == (case == "test_train_eval_on_start")
    trace.check()
    trained = {c.record["prompt"] for s in trace.steps for c in s["batch"].candidates}
    assert trained and trained <= set(tiny.LINES)


def test_train_with_sync_ref_model(names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trainer, trace = make_trainer(names, tmp_path, monkeypatch, beta=0.1, sync_ref_model=True, ref_model_sync_steps=2)
    assert trainer.ref_model is not None
    ref_before = tiny.snapshot(trainer.ref_model)
    train_and_check(trainer, trace)
    assert not tiny.changed(ref_before, trainer.ref_model), "Ref Parameter has not changed."


def test_prepare_input_called_with_correct_data(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's data-order test, on 12 rows where TRL's has 17 (both give two generation batches of 6 prompts an
    epoch). TRL inspects the dataloader's batches, which the adapter does not train on; ours inspects the
    prompts the scheduler had generated: with shuffle_dataset=False, the dataset's order."""
    from trl import GRPOTrainer

    trainer, trace = make_trainer(
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
        make_trainer(names, tmp_path, monkeypatch, data=stream, max_steps=4)
    trainer, trace = make_trainer(names, tmp_path, monkeypatch, data=Dataset.from_list(list(stream)), max_steps=4)
    train_and_check(trainer, trace)


@tiny.since("trl", "1.7.0", "TRL's warning of a sequence-level loss summed over tokens")
def test_warning_raised_sequence_level_with_token_summed_loss(
    names: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("WARNING", logger="trl.trainer.grpo_trainer"):
        make_trainer(
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

    trainer, trace = make_trainer(
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
