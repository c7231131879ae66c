"""What the ported TRL ``GRPOTrainer`` cases share (``test_trl_ported*.py``).

The cases are TRL's ``tests/test_grpo_trainer.py`` (the trl 1.16.0 sdist ships no tests; the cases are
those of the newest snapshot available, each checked against trl 1.16.0's GRPOConfig), one case per TRL
test of the same name, with TRL's own assertions. What changes, and why:

- models and data are built here (``_trl_tiny``): a 1-layer Llama stands for TRL's tiny Qwen, a Llama
  sequence classifier for its tiny reward model, and 12 prompt-only rows for its "zen" dataset; where TRL
  passes a hub id, the test passes the folder the model was saved to;
- ``use_cpu=True, bf16=False`` (the CI has no GPU) and ``max_steps=3`` (TRL trains 3 epochs of 17 prompts,
  51 steps a case; 3 steps move every parameter too and keep the suite's time low);
- TRL's assertions (a train loss, every parameter changed, a logged key) hold for a trainer that ignores
  the scheduler, so each case also runs :class:`_trl_tiny.Trace`: every row handed to TRL is a generated
  row of a group the scheduler kept, with the rewards it recorded and a non-zero spread.

A test module takes the fixtures by name: ``names = ported.names`` (and ``one_thread`` from tests/conftest.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from integrations import _trl_tiny as tiny


@pytest.fixture(scope="module")
def names(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Folders standing for TRL's hub ids: the tiny causal LM and the tiny reward model."""
    root = tmp_path_factory.mktemp("models")
    return {"model": tiny.save(tiny.causal_lm(), root / "lm"), "reward": tiny.save(tiny.reward_model(), root / "rm")}


def grpo_args(tmp: Path, **kw: Any) -> Any:
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


def make_trainer(
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
        args=grpo_args(tmp, **kw),
        train_dataset=tiny.prompts() if data is None else data,
        **extra,
    )
    return trainer, tiny.Trace(trainer, monkeypatch)


def train_and_check(trainer: Any, trace: tiny.Trace, keeps_zero_signal: bool = False) -> None:
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
