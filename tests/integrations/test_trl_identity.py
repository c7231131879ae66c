"""``SnoozeGRPOTrainer`` with ``policy="grpo"`` is ``GRPOTrainer``, bit for bit.

Under ``grpo`` every group enters the batch, so with the prompts in the same order (``shuffle_dataset=False``:
the dataset's order for TRL's sampler and for the scheduler) the adapter must hand TRL exactly the rows TRL's
own generation step builds. Both trainers start from the same weights and seed; after four optimizer steps
every parameter, every logged loss and every completion generated must be equal (``torch.equal``, ``==``).
The reward is 1 for an even-length completion and for every completion of half the prompts: those groups have
no spread, and ``grpo`` trains on them too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
torch = pytest.importorskip("torch")

from integrations import _trl_tiny as tiny  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.slow]

CONFIGS = {
    "default": {},
    "loss_grpo": {"loss_type": "grpo"},
    "grad_accum_2": {"gradient_accumulation_steps": 2},
    "num_iterations_2": {"num_iterations": 2},
    "beta_0.1": {"beta": 0.1},
    "scale_rewards_batch": {"scale_rewards": "batch"},
}


def even_length(prompts: list[str], completions: list[str]) -> list[float]:
    """1 for an even-length completion; every prompt of an even place in the data is solved whatever the completion."""
    solved = set(tiny.LINES[::2])
    return [1.0 if p in solved else float(len(c.split()) % 2 == 0) for p, c in zip(prompts, completions)]


def _run(model: str, snooze: bool, tmp: Path, extra: dict[str, Any]) -> tuple[Any, list[list[str]]]:
    from trl import GRPOConfig, GRPOTrainer

    from snooze.integrations.trl import SnoozeGRPOTrainer

    torch.set_num_threads(1)
    args = GRPOConfig(
        output_dir=str(tmp / ("snooze" if snooze else "trl")),
        learning_rate=0.1,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=6,
        max_steps=4,
        shuffle_dataset=False,
        seed=0,
        report_to="none",
        use_cpu=True,
        bf16=False,
        save_strategy="no",
        disable_tqdm=True,
        logging_steps=1,
        **extra,
    )
    seen: list[list[str]] = []

    def reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        seen.append(list(completions))
        return even_length(prompts, completions)

    reward.__name__ = "even_length"
    kw: dict[str, Any] = {"snooze_config": {"policy": "grpo"}} if snooze else {}
    cls = SnoozeGRPOTrainer if snooze else GRPOTrainer
    trainer = cls(model=model, reward_funcs=reward, args=args, train_dataset=tiny.prompts(), **kw)
    trainer.train()
    return trainer, seen


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One saved tiny model both trainers load (a name: with beta > 0 TRL loads the reference model by it)."""
    return tiny.save(tiny.causal_lm(seed=0), tmp_path_factory.mktemp("identity") / "lm")


@pytest.mark.parametrize("config", list(CONFIGS))
def test_grpo_policy_is_grpo_trainer_bit_for_bit(config: str, model: str, tmp_path: Path) -> None:
    plain, plain_completions = _run(model, False, tmp_path, CONFIGS[config])
    ours, our_completions = _run(model, True, tmp_path, CONFIGS[config])
    assert our_completions == plain_completions  # the same prompts, in the same order, sampled the same
    mine = dict(ours.model.named_parameters())
    for name, p in plain.model.named_parameters():
        assert torch.equal(p, mine[name]), f"{config}: {name} differs"
    losses = [[h.get("loss") for h in t.state.log_history if "loss" in h] for t in (plain, ours)]
    assert losses[0] == losses[1] and len(losses[0]) == 4
    steps = [h for h in ours.state.log_history if "snooze/train/size" in h]
    assert len(steps) == 4 // CONFIGS[config].get("num_iterations", 1) and all(
        h["snooze/train/size"] == h["snooze/gen/groups"] for h in steps
    )  # every group trained
    zero = sum(
        h["snooze/gen/groups"] - h["snooze/train/groups"] for h in ours.state.log_history if "snooze/gen/groups" in h
    )
    assert zero > 0  # zero-spread groups among them
