"""A bad ``snooze_config``, ``scheduler=`` or dataset is refused before TRL loads anything: in milliseconds, with
the project's error, and with no model loaded (``from_pretrained`` is watched, and the model name is a folder
that does not exist, which it would refuse with an error of its own)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
pytest.importorskip("torch")

import snooze  # noqa: E402
from integrations import _trl_tiny as tiny  # noqa: E402

pytestmark = pytest.mark.trl

LIMIT_S = 1.0  # measured 0.3-5 ms each (pytest -s prints them); generous for a loaded CI machine


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every model or config TRL tries to load from a name, recorded (and refused)."""
    from transformers import AutoConfig, PreTrainedModel

    seen: list[str] = []

    def watched(name: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(name))
        raise OSError(f"test: {name} is not loaded")

    monkeypatch.setattr(PreTrainedModel, "from_pretrained", classmethod(lambda cls, name, *a, **k: watched(name)))
    monkeypatch.setattr(AutoConfig, "from_pretrained", classmethod(lambda cls, name, *a, **k: watched(name)))
    return seen


def _rows(**extra: Any) -> Any:
    from datasets import Dataset

    return Dataset.from_list([{"prompt": p, **extra} for p in tiny.LINES])


CASES = [
    "unknown policy",
    "no rounds",
    "flat option",
    "TRL's size",
    "not a mapping",
    "scheduler sizes",
    "duplicate ids",
    "no prompt column",
    "streaming",
    "a list",
    "no dataset",
]


def _bad_inputs() -> list[tuple[str, dict[str, Any], type[Exception], str]]:
    from datasets import Dataset, IterableDataset

    stream = IterableDataset.from_generator(lambda: iter([{"prompt": "a"}]))
    wrong_size = snooze.Scheduler({"d": [{"id": i, "prompt": p} for i, p in enumerate(tiny.LINES)]})
    return [
        ("unknown policy", {"snooze_config": {"policy": "nope"}}, snooze.ConfigError, "policy='nope'"),
        ("no rounds", {"snooze_config": {"max_gen_rounds": 0}}, snooze.ConfigError, "max_gen_rounds"),
        ("flat option", {"snooze_config": {"snoze_factor": 3}}, snooze.ConfigError, "snoze_factor"),
        ("TRL's size", {"snooze_config": {"batch_size": 3}}, snooze.IntegrationError, r"batch_size=3 \(GRPOConfig"),
        ("not a mapping", {"snooze_config": "filter"}, snooze.IntegrationError, "snooze_config must be"),
        ("scheduler sizes", {"scheduler": wrong_size}, snooze.IntegrationError, "group_size=8 but GRPOConfig.num_gen"),
        (
            "duplicate ids",
            {"train_dataset": Dataset.from_list([{"id": 1, "prompt": "a"}, {"id": 1, "prompt": "b"}])},
            snooze.DataError,
            "id 1 appears 2 times",
        ),
        (
            "no prompt column",
            {"train_dataset": _rows().rename_column("prompt", "text")},
            snooze.IntegrationError,
            "no 'prompt'",
        ),
        ("streaming", {"train_dataset": stream}, snooze.IntegrationError, "streaming dataset"),
        ("a list", {"train_dataset": [{"prompt": "a"}]}, snooze.IntegrationError, "must be a datasets.Dataset"),
        ("no dataset", {"train_dataset": None}, snooze.IntegrationError, "needs train_dataset"),
    ]


@pytest.mark.parametrize("case", CASES)
def test_bad_input_fails_in_milliseconds_before_any_model_loads(case: str, loads: list[str], tmp_path: Path) -> None:
    from trl import GRPOConfig

    from snooze.integrations.trl import SnoozeGRPOTrainer

    name, given, error, match = next(c for c in _bad_inputs() if c[0] == case)
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, use_cpu=True, bf16=False
    )
    kwargs = {"train_dataset": _rows(), **given}
    start = time.perf_counter()
    with pytest.raises(error, match=match):
        SnoozeGRPOTrainer(model=str(tmp_path / "no_such_model"), reward_funcs=tiny.reward_len, args=args, **kwargs)
    took = time.perf_counter() - start
    assert loads == [], f"{name}: TRL loaded {loads} before the refusal"
    assert took < LIMIT_S, f"{name}: refused after {took:.3f} s"
    print(f"{name}: refused in {took * 1000:.1f} ms")  # pytest -s shows them


def test_the_same_trainer_with_good_input_does_load_the_model(loads: list[str], tmp_path: Path) -> None:
    """The watch works: with nothing wrong, TRL gets as far as loading the model by its name."""
    from trl import GRPOConfig

    from snooze.integrations.trl import SnoozeGRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, use_cpu=True, bf16=False
    )
    with pytest.raises(OSError, match="is not loaded"):
        SnoozeGRPOTrainer(
            model=str(tmp_path / "no_such_model"), reward_funcs=tiny.reward_len, args=args, train_dataset=_rows()
        )
    assert loads and loads[0].endswith("no_such_model")


# -- the async trainer -----------------------------------------------------------------------------------------

ASYNC_CASES = [
    "tools",
    "environment",
    "own worker",
    "token budget",
    "rows not whole groups",
    "no reward",
    "bad config",
    "TRL's size",
    "duplicate ids",
]


def _async_bad_inputs() -> list[tuple[str, dict[str, Any], dict[str, Any], type[Exception], str]]:
    from datasets import Dataset

    def tool(x: int) -> int:
        """A tool.

        Args:
            x: a number.
        """
        return x

    return [
        ("tools", {"tools": [tool]}, {}, snooze.IntegrationError, "does not take tools=: a conversation"),
        ("environment", {"environment_factory": object}, {}, snooze.IntegrationError, "environment_factory="),
        ("own worker", {"rollout_worker": object()}, {}, snooze.IntegrationError, "rollout_worker="),
        ("token budget", {}, {"token_budget": 512}, snooze.IntegrationError, "token_budget=512: .* batches rows by"),
        ("rows not whole groups", {}, {"per_device_train_batch_size": 6}, snooze.IntegrationError, "6 rows a step"),
        ("no reward", {"reward_funcs": None}, {}, snooze.IntegrationError, "needs reward_funcs"),
        ("bad config", {"snooze_config": {"max_staleness": -1}}, {}, snooze.ConfigError, "max_staleness"),
        (
            "TRL's size",
            {"snooze_config": {"batch_size": 3}},
            {},
            snooze.IntegrationError,
            r"batch_size=3 \(AsyncGRPOConfig: per_device_train_batch_size x gradient_accumulation_steps",
        ),
        (
            "duplicate ids",
            {"train_dataset": Dataset.from_list([{"id": 1, "prompt": "a"}, {"id": 1, "prompt": "b"}])},
            {},
            snooze.DataError,
            "id 1 appears 2 times",
        ),
    ]


ASYNC = tiny.since("trl", "1.16.0", "SnoozeAsyncGRPOTrainer")  # snooze.integrations.trl._checks.ASYNC_OLDEST


@ASYNC
@pytest.mark.parametrize("case", ASYNC_CASES)
def test_the_async_trainer_refuses_bad_input_before_any_model_loads(
    case: str, loads: list[str], tmp_path: Path
) -> None:
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from snooze.integrations.trl import SnoozeAsyncGRPOTrainer

    name, given, config, error, match = next(c for c in _async_bad_inputs() if c[0] == case)
    args = AsyncGRPOConfig(
        output_dir=str(tmp_path),
        **{"per_device_train_batch_size": 8, "num_generations": 4, "use_cpu": True, "bf16": False, **config},
    )
    kwargs = {"reward_funcs": tiny.reward_len, "train_dataset": _rows(), **given}
    start = time.perf_counter()
    with pytest.raises(error, match=match):
        SnoozeAsyncGRPOTrainer(model=str(tmp_path / "no_such_model"), args=args, **kwargs)
    took = time.perf_counter() - start
    assert loads == [], f"{name}: TRL loaded {loads} before the refusal"
    assert took < LIMIT_S, f"{name}: refused after {took:.3f} s"
    print(f"async, {name}: refused in {took * 1000:.1f} ms")


@ASYNC
def test_a_trl_whose_async_internals_differ_is_refused_naming_the_async_range(
    monkeypatch: pytest.MonkeyPatch, loads: list[str], tmp_path: Path
) -> None:
    """A simulated TRL whose rollout loop has no _push_metrics, then one older than the async trainer's floor."""
    import trl
    from trl.experimental.async_grpo import async_rollout_worker as worker

    from snooze.integrations.trl import SnoozeAsyncGRPOTrainer
    from snooze.integrations.trl import _checks as checks

    monkeypatch.delattr(worker._AsyncRolloutLoop, "_push_metrics")
    with pytest.raises(snooze.IntegrationError, match=r"_AsyncRolloutLoop\._push_metrics is missing") as info:
        SnoozeAsyncGRPOTrainer(model=str(tmp_path / "no_such_model"), reward_funcs=tiny.reward_len)
    assert f"pip install '{checks.ASYNC_RANGE}'" in str(info.value)
    monkeypatch.undo()
    monkeypatch.setattr(trl, "__version__", "1.15.0")
    with pytest.raises(snooze.IntegrationError, match=r"supports trl>=1\.16\.0,<=1\.16\.0; trl 1\.15\.0 is installed"):
        SnoozeAsyncGRPOTrainer(model=str(tmp_path / "no_such_model"), reward_funcs=tiny.reward_len)
    assert loads == []
