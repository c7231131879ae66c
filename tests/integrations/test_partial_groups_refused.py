"""Partial groups (``SchedulerConfig.screen_size``) where an adapter does not support them: ``SnoozeGRPOTrainer`` takes
them on one process only (tests/integrations/test_trl_screen.py runs them), and refuses them on several processes and
with TRL's round-wide advantage scaling; ``SnoozeAsyncGRPOTrainer`` and verl's async modes refuse the option by name,
pointing to what supports it (docs/integrations/*.md say which do); verl's sync trainer takes it
(tests/integrations/test_verl_screen.py runs it)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import snooze


def test_the_sync_trl_trainer_takes_screening_on_one_process_only() -> None:
    pytest.importorskip("trl", reason="needs the [trl] extra")
    from snooze.integrations.trl import _checks

    cfg = snooze.SchedulerConfig(batch_size=2, group_size=4, screen_size=2)
    args = SimpleNamespace(shuffle_dataset=True, generation_batch_size=8)
    _checks.check_compatible(cfg, args, 4, 1, None)  # one process: supported
    with pytest.raises(snooze.IntegrationError, match=r"screen_size=2 on 2 processes: .*one process only") as err:
        _checks.check_compatible(cfg, args, 4, 2, None)
    assert "reference trainer" in str(err.value) and "docs/integrations/trl.md" in str(err.value)
    _checks.check_compatible(cfg.replace(screen_size=None), args, 4, 2, None)  # the same config without it passes


@pytest.mark.parametrize(
    ("setting", "refused"),
    [
        ({"scale_rewards": "batch"}, r"scale_rewards='batch' with SchedulerConfig.screen_size=2: .*two rounds"),
        ({"multi_objective_aggregation": "normalize_then_sum"}, r"'normalize_then_sum' with .*screen_size=2: "),
    ],
)
def test_the_sync_trl_trainer_refuses_round_wide_advantages_with_screening(setting: dict, refused: str) -> None:
    pytest.importorskip("trl", reason="needs the [trl] extra")
    from snooze.integrations.trl import _checks

    cfg = snooze.SchedulerConfig(batch_size=2, group_size=4, screen_size=2)
    args = SimpleNamespace(shuffle_dataset=True, generation_batch_size=8, **setting)
    with pytest.raises(snooze.IntegrationError, match=refused):
        _checks.check_compatible(cfg, args, 4, 1, None)
    _checks.check_compatible(cfg.replace(screen_size=None), args, 4, 1, None)  # TRL's own setting without screening
    for fine in ({"scale_rewards": True}, {"scale_rewards": False}, {"scale_rewards": "none"}):
        _checks.check_compatible(
            cfg, SimpleNamespace(shuffle_dataset=True, generation_batch_size=8, **fine), 4, 1, None
        )


@pytest.mark.parametrize("how", ["snooze_config", "scheduler"])
def test_snooze_grpo_trainer_refuses_batch_scaling_with_screening_before_any_model_loads(
    how: str, tmp_path: Path
) -> None:
    pytest.importorskip("trl", reason="needs the [trl] extra")
    from datasets import Dataset
    from trl import GRPOConfig

    from integrations import _trl_tiny as tiny
    from snooze.integrations.trl import SnoozeGRPOTrainer

    records = [{"id": f"z{i}", "prompt": p} for i, p in enumerate(tiny.LINES)]
    rows = Dataset.from_list(records)
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, use_cpu=True, scale_rewards="batch"
    )
    given: dict[str, Any] = {"snooze_config": {"screen_size": 2}}
    if how == "scheduler":
        cfg = snooze.SchedulerConfig(batch_size=1, group_size=4, screen_size=2)
        given = {"scheduler": snooze.Scheduler({"train": records}, cfg)}
    with pytest.raises(snooze.IntegrationError, match=r"scale_rewards='batch' with SchedulerConfig.screen_size=2"):
        SnoozeGRPOTrainer(
            model=str(tmp_path / "no_such_model"), reward_funcs=tiny.reward_len, args=args, train_dataset=rows, **given
        )


def test_snooze_async_grpo_trainer_refuses_screening_before_any_model_loads(tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="needs the [trl] extra")
    from importlib.metadata import version

    from datasets import Dataset
    from packaging.version import Version

    from integrations import _trl_tiny as tiny

    if Version(version("trl")) < Version("1.16.0"):
        pytest.skip("SnoozeAsyncGRPOTrainer needs trl >= 1.16.0")
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from snooze.integrations.trl import SnoozeAsyncGRPOTrainer

    rows = Dataset.from_list([{"prompt": p} for p in tiny.LINES])
    args = AsyncGRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4, use_cpu=True, bf16=False
    )
    with pytest.raises(snooze.IntegrationError, match=r"screen_size=2: .*SnoozeAsyncGRPOTrainer.*reference trainer"):
        SnoozeAsyncGRPOTrainer(
            model=str(tmp_path / "no_such_model"),
            reward_funcs=tiny.reward_len,
            args=args,
            train_dataset=rows,
            snooze_config={"screen_size": 2},
        )


@pytest.mark.parametrize("mode", ["colocate_async", "separate_async"])
def test_verls_async_modes_refuse_screening_by_name(mode: str, tmp_path: Path) -> None:
    pytest.importorskip("verl", reason="needs the [verl] extra")
    from integrations._verl_env import compose
    from snooze.integrations.verl._options import read_options

    sync_step = "trainer.v1.separate_async.parameter_sync_step=1"  # (its default, 4, is refused on its own)
    config: Any = compose(tmp_path, sync_step, snooze={"policy": "dynamic_sampling", "screen_size": 2})
    refused = rf"trainer.v1.snooze.screen_size=2: .*async modes \({mode}\).*trainer_mode=snooze"
    with pytest.raises(snooze.IntegrationError, match=refused):
        read_options(config, mode)
    without = compose(tmp_path, sync_step, snooze={"policy": "dynamic_sampling"})
    assert read_options(without, mode).scheduler.screen_size is None


def test_verls_sync_trainer_takes_screening(tmp_path: Path) -> None:
    """verl's sync mode (``trainer.v1.trainer_mode=snooze``) runs partial groups (tests/integrations/test_verl_screen.py
    runs them in verl's ``fit()``): the option is read, not refused."""
    pytest.importorskip("verl", reason="needs the [verl] extra")
    from integrations._verl_env import compose
    from snooze.integrations.verl._options import read_options

    config: Any = compose(tmp_path, snooze={"policy": "dynamic_sampling", "screen_size": 2})
    assert read_options(config).scheduler.screen_size == 2
