"""The supervised warm-up's stopping rule: a target per task, or on the mean; and its cache."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from snooze.core.errors import ConfigError
from snooze.trainer.model import ModelConfig
from snooze.trainer.tasks import parse_tasks
from snooze.trainer.tokenizer import CharTokenizer
from snooze.trainer.warmup import WarmupConfig, warmup

MODEL = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2)
SPECS = parse_tasks("rev:3-4,sort:3-4")
# what a fake validation reports at each check: rev learns fast, sort slowly
CHECKS = [
    {"rev:3-4": 0.5, "sort:3-4": 0.1},
    {"rev:3-4": 0.7, "sort:3-4": 0.2},
    {"rev:3-4": 0.8, "sort:3-4": 0.35},
    {"rev:3-4": 0.9, "sort:3-4": 0.5},
]


def _fake() -> Any:
    it: Iterator[dict[str, float]] = iter(CHECKS)
    return lambda model, sets: dict(next(it))


@pytest.mark.parametrize(
    ("per_task", "steps", "task_steps"), [(False, 1, {"rev:3-4": 1}), (True, 3, {"rev:3-4": 1, "sort:3-4": 3})]
)
def test_the_warmup_stops_on_every_task_or_on_the_mean(
    tmp_path: Path, per_task: bool, steps: int, task_steps: dict[str, int]
) -> None:
    cfg = WarmupConfig(target_accuracy=0.3, per_task=per_task, eval_every=1, max_steps=10, batch_size=4, val_per_task=2)
    result = warmup(SPECS, set(), cfg, MODEL, cache_dir=tmp_path, evaluate=_fake())
    assert result.steps == steps and result.task_steps == task_steps and not result.cached
    assert result.val_by_task == CHECKS[steps - 1]
    again = warmup(SPECS, set(), cfg, MODEL, cache_dir=tmp_path, evaluate=_fake())  # the cache keeps the record
    assert again.cached and again.task_steps == task_steps and again.steps == steps


def test_validation_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="val_temperature"):
        WarmupConfig(val_temperature=-1.0)
    with pytest.raises(ConfigError, match="val_samples"):
        WarmupConfig(val_samples=0)
