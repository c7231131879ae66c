"""``SnoozeGRPOTrainer`` built as ``GRPOTrainer`` is: the docs' quick start (TRL's own, with the class
replaced), the scheduler it builds from ``train_dataset`` and ``GRPOConfig``, and what it refuses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
torch = pytest.importorskip("torch")

import snooze  # noqa: E402
from integrations import _trl_tiny as tiny  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.usefixtures("one_thread")]

DOC = Path(__file__).resolve().parents[2] / "docs" / "integrations" / "trl.md"
HUB_MODEL = '"Qwen/Qwen2.5-0.5B-Instruct"'


@pytest.fixture(scope="module")
def model_name(tmp_path_factory: pytest.TempPathFactory) -> str:
    return tiny.save(tiny.causal_lm(), tmp_path_factory.mktemp("dropin") / "lm")


def _args(tmp: Path, **kw: Any) -> Any:
    from trl import GRPOConfig

    base = {
        "output_dir": str(tmp / "out"),
        "learning_rate": 0.1,
        "per_device_train_batch_size": 4,
        "num_generations": 4,
        "max_completion_length": 6,
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "max_steps": 3,
        "disable_tqdm": True,
        "save_strategy": "no",
        "logging_steps": 1,
    }
    return GRPOConfig(**{**base, **kw})


def _trainer(model_name: str, tmp: Path, reward: Any = tiny.reward_len, data: Any = None, **kw: Any) -> Any:
    from snooze.integrations.trl import SnoozeGRPOTrainer

    own = {k: kw.pop(k) for k in ("scheduler", "snooze_config", "on_batch") if k in kw}
    return SnoozeGRPOTrainer(
        model=model_name,
        reward_funcs=reward,
        args=_args(tmp, **kw),
        train_dataset=tiny.prompts() if data is None else data,
        **own,
    )


# -- the quick start -------------------------------------------------------------------------------------------


def _first_python_block(text: str) -> str:
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)  # type: ignore[union-attr]


def trl_quick_start() -> str:
    """TRL's own GRPOTrainer quick start, from the README in the installed trl's metadata."""
    from importlib.metadata import metadata

    readme = metadata("trl").get_payload()  # type: ignore[attr-defined]
    return _first_python_block(readme[readme.index("### `GRPOTrainer`") :])


def test_the_docs_first_example_is_trls_quick_start_with_the_class_replaced() -> None:
    ours = _first_python_block(DOC.read_text())
    want = trl_quick_start().replace(
        "from trl import GRPOTrainer", "from snooze.integrations.trl import SnoozeGRPOTrainer"
    )
    assert ours == want.replace("GRPOTrainer(", "SnoozeGRPOTrainer(")
    assert ours.count(HUB_MODEL) == 1


def test_the_quick_start_runs(model_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The docs' first example, run as written, but for three things a CPU test cannot have: the hub model is
    a tiny one saved here (its name replaced by the folder), ``load_dataset`` answers with four local rows in
    DeepMath-103K's columns, and transformers is told the CPU has bf16 (TRL's GRPOConfig defaults to bf16,
    which transformers refuses without a GPU unless use_cpu=True: TRL's quick start is written for a GPU;
    torch computes bf16 on the CPU). Before the adapter built its own scheduler, this raised TypeError
    (a required scheduler= argument)."""
    import datasets
    import transformers.training_args
    from datasets import Dataset

    rows = [{"prompt": [{"role": "user", "content": f"{w} is better than"}], "solution": "4"} for w in tiny.LINES[:4]]
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: Dataset.from_list(rows))
    monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    monkeypatch.chdir(tmp_path)  # GRPOConfig's default output_dir, "<model>-GRPO", is made here
    code = _first_python_block(DOC.read_text()).replace(HUB_MODEL, repr(model_name))
    scope: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), scope)
    trainer = scope["trainer"]
    assert trainer.state.global_step == 12  # TRL's defaults: 3 epochs of 4 prompts, one prompt (8 rows) a step
    logged = [h for h in trainer.state.log_history if "snooze/gen/rounds" in h]
    cfg = trainer.scheduler.config
    assert logged and (cfg.policy, cfg.options.factor, cfg.carry_surplus) == ("snooze", 1, True)  # the default
    assert trainer.state.epoch == pytest.approx(_passes(trainer.scheduler))


def _passes(sched: snooze.Scheduler) -> float:
    s = sched._parts.streams[0]
    return s.epoch + s.cursor / s.n


# -- the scheduler it builds -----------------------------------------------------------------------------------


def test_ids_come_from_an_id_column_or_a_stable_key_of_the_prompt(
    model_name: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from datasets import Dataset

    from snooze.integrations.trl._data import prompt_key

    with_ids = Dataset.from_list([{"id": f"r{i}", "prompt": p} for i, p in enumerate(tiny.LINES)])
    src = _trainer(model_name, tmp_path, data=with_ids).scheduler.sources[0]
    assert [src.id_of(r) for r in range(len(src))] == [f"r{i}" for i in range(len(tiny.LINES))]
    # no id column: the key of the prompt, the same whatever the order of the rows
    keyed = _trainer(model_name, tmp_path).scheduler.sources[0]
    assert [keyed.id_of(r) for r in range(len(keyed))] == [prompt_key(p) for p in tiny.LINES]
    shuffled = tiny.prompts(lines=tiny.LINES[::-1])
    again = _trainer(model_name, tmp_path, data=shuffled).scheduler.sources[0]
    assert {again.id_of(r): again.record(r)["prompt"] for r in range(len(again))} == {
        keyed.id_of(r): keyed.record(r)["prompt"] for r in range(len(keyed))
    }
    # repeated prompts: each row stays a prompt of its own (key, key#2, ...), and the trainer says so
    with caplog.at_level("WARNING", logger="snooze.integrations.trl._data"):
        dup = _trainer(
            model_name, tmp_path, data=tiny.prompts(lines=["simple is", "flat is", "simple is", "simple is"])
        )
    ids = [dup.scheduler.sources[0].id_of(r) for r in range(4)]
    k = prompt_key("simple is")
    assert ids == [k, prompt_key("flat is"), f"{k}#2", f"{k}#3"]
    assert "2 of its 4 rows repeat an earlier row's prompt" in caplog.text


def test_sizes_order_seed_and_range_come_from_grpo_config(model_name: str, tmp_path: Path) -> None:
    trainer = _trainer(
        model_name,
        tmp_path,
        reward=[tiny.reward_len, tiny.reward_len],
        reward_weights=[1.0, -0.5],
        gradient_accumulation_steps=2,
        shuffle_dataset=False,
        seed=7,
    )
    cfg, sched = trainer.scheduler.config, trainer.scheduler
    assert (cfg.group_size, cfg.batch_size, cfg.shuffle, sched.seed) == (4, 2, False, 7)  # 4 x 2 rows / 4
    assert cfg.reward_range == (-0.5, 1.0) and cfg.out_of_range == "accept"
    assert (cfg.policy, cfg.carry_surplus) == ("snooze", True)  # the default: snooze.RECOMMENDED


def test_snooze_settings_come_through_one_argument(model_name: str, tmp_path: Path) -> None:
    cfg = _trainer(model_name, tmp_path, snooze_config={"policy": "filter", "max_gen_rounds": 3}).scheduler.config
    assert (cfg.policy, cfg.max_gen_rounds, cfg.batch_size, cfg.group_size) == ("filter", 3, 1, 4)
    given = snooze.SchedulerConfig(batch_size=1, group_size=4, policy="dynamic_sampling")
    assert _trainer(model_name, tmp_path, snooze_config=given).scheduler.config is given
    with pytest.raises(
        snooze.IntegrationError, match=r"batch_size=16 \(GRPOConfig: generation_batch_size / num_generations = 1\)"
    ):
        _trainer(model_name, tmp_path, snooze_config=snooze.SchedulerConfig(policy="filter"))
    with pytest.raises(snooze.IntegrationError, match=r"group_size=8 \(GRPOConfig: num_generations = 4\)"):
        _trainer(model_name, tmp_path, snooze_config={"group_size": 8})
    with pytest.raises(snooze.ConfigError, match="snoze_factor"):
        _trainer(model_name, tmp_path, snooze_config={"snoze_factor": 3})
    with pytest.raises(snooze.IntegrationError, match="snooze_config must be a snooze.SchedulerConfig, a mapping"):
        _trainer(model_name, tmp_path, snooze_config=["filter"])
    sched = snooze.Scheduler({"d": [{"id": i, "prompt": p} for i, p in enumerate(tiny.LINES)]}, given)
    with pytest.raises(snooze.IntegrationError, match="either scheduler= .* or snooze_config="):
        _trainer(model_name, tmp_path, scheduler=sched, snooze_config={"policy": "filter"})


def test_a_scheduler_built_by_hand_must_hold_train_datasets_prompts(model_name: str, tmp_path: Path) -> None:
    """It used to train without a word on other prompts than TRL's (whose epochs and logs then meant nothing)."""
    cfg = snooze.SchedulerConfig(batch_size=1, group_size=4)
    mine = [{"id": i, "prompt": p} for i, p in enumerate(tiny.LINES)]
    same = snooze.Scheduler({"d": mine[::-1]}, cfg)  # the same prompts, in another order: fine
    assert _trainer(model_name, tmp_path, scheduler=same).scheduler is same
    other = snooze.Scheduler({"d": [*mine[:-1], {"id": 99, "prompt": "ok ok"}]}, cfg)
    with pytest.raises(
        snooze.IntegrationError, match=r"1 of its 12 prompts are not in train_dataset \(the first: 'd'/99\), and 1 of"
    ):
        _trainer(model_name, tmp_path, scheduler=other)
    no_prompt = snooze.Scheduler({"d": [{"id": i, "text": p} for i, p in enumerate(tiny.LINES)]}, cfg)
    with pytest.raises(
        snooze.IntegrationError, match="'d'/0: TRL needs each scheduler record to be a dict with a 'prompt'"
    ):
        _trainer(model_name, tmp_path, scheduler=no_prompt)
    with pytest.raises(snooze.IntegrationError, match=r"shuffle_dataset=False but SchedulerConfig.shuffle=True"):
        _trainer(model_name, tmp_path, scheduler=same, shuffle_dataset=False)


def test_no_train_dataset_is_refused_before_trl_builds_anything(tmp_path: Path) -> None:
    from snooze.integrations.trl import SnoozeGRPOTrainer

    with pytest.raises(snooze.IntegrationError, match="needs train_dataset"):
        SnoozeGRPOTrainer(model="not/loaded", reward_funcs=tiny.reward_len, args=_args(tmp_path))


# -- what TRL logs and the rewards it gives --------------------------------------------------------------------


def test_the_logged_epoch_is_passes_over_the_schedulers_pool(model_name: str, tmp_path: Path) -> None:
    """Half the prompts are solved by every completion: dynamic sampling draws more than one prompt a step, and
    the epoch TRL logs counts those draws (TRL's own count, steps / steps per epoch, would be 4/12)."""
    solved = set(tiny.LINES[::2])

    def reward(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        return [1.0 if p in solved else float(len(c) % 2) for p, c in zip(prompts, completions)]

    trainer = _trainer(model_name, tmp_path, reward=reward, max_steps=4, snooze_config={"policy": "dynamic_sampling"})
    trainer.train()
    epochs = [h["epoch"] for h in trainer.state.log_history if "snooze/gen/groups" in h]
    drawn = np.cumsum([h["snooze/gen/groups"] for h in trainer.state.log_history if "snooze/gen/groups" in h])
    assert epochs == pytest.approx((drawn / len(tiny.LINES)).tolist())
    assert epochs[-1] > 4 / len(tiny.LINES)


@tiny.since("trl", "1.7.0", "trl.rewards.get_repetition_penalty_reward")
def test_trls_own_reward_functions_train_with_the_built_scheduler(model_name: str, tmp_path: Path) -> None:
    """trl.rewards' accuracy (0/1, or None), format (0/1), length and repetition penalties (in [-1, 0]): their sum
    leaves the range the weights imply when each function is taken to score in [0, 1], (0, 4). The built
    scheduler records such rewards as they are; one built by hand with the default range stops at step 0."""
    import json

    from datasets import Dataset
    from trl.rewards import (
        accuracy_reward,
        get_repetition_penalty_reward,
        get_soft_overlong_punishment,
        think_format_reward,
    )

    from snooze.integrations.trl import SnoozeGRPOTrainer

    data = Dataset.from_list(
        [{"prompt": [{"role": "user", "content": f"{w} is"}], "solution": "4"} for w in tiny.LINES]
    )
    funcs = [accuracy_reward, think_format_reward, get_soft_overlong_punishment(6, 4), get_repetition_penalty_reward(2)]
    log = tmp_path / "rewards.jsonl"
    trainer = SnoozeGRPOTrainer(
        model=model_name, reward_funcs=funcs, args=_args(tmp_path), train_dataset=data, reward_log=log
    )
    trainer.train()
    assert trainer.scheduler.config.reward_range == (0.0, 4.0) and trainer.state.global_step == 3
    rewards = np.array([json.loads(line)["rewards"] for line in log.read_text().splitlines()[1:]])  # after the header
    assert rewards.min() < 0  # the penalties took rewards below the range: recorded, not refused
    with_ids = data.add_column("id", list(range(len(data))))
    by_hand = snooze.Scheduler({"train": with_ids}, snooze.SchedulerConfig(batch_size=1, group_size=4))
    refused = SnoozeGRPOTrainer(
        model=model_name, reward_funcs=funcs, args=_args(tmp_path), train_dataset=with_ids, scheduler=by_hand
    )
    with pytest.raises(snooze.RewardError, match=r"outside reward_range \[0.0, 1.0\].*out_of_range='accept'"):
        refused.train()


def test_a_wide_reward_range_keeps_every_group_with_spread(model_name: str, tmp_path: Path) -> None:
    """A range widened to take any reward used to make every 0/1 group no-signal (trained groups per step fell
    from 1.0 to 0.275 on one case, rounds per step rose from 1.05 to 6.55): the range no longer changes signal."""

    def half(completions: list[str], **kwargs: Any) -> list[float]:
        return [float(i % 2) for i in range(len(completions))]  # 0, 1, 0, 1 in every group: always spread

    cfg = snooze.SchedulerConfig(batch_size=1, group_size=4, policy="dynamic_sampling", reward_range=(-1e6, 1e6))
    sched = snooze.Scheduler({"train": [{"id": i, "prompt": p} for i, p in enumerate(tiny.LINES)]}, cfg)
    trainer = _trainer(model_name, tmp_path, reward=half, scheduler=sched, max_steps=4)
    trainer.train()
    steps = [h for h in trainer.state.log_history if "snooze/train/groups" in h]
    assert [h["snooze/train/groups"] for h in steps] == [1.0] * 4 and [h["snooze/gen/rounds"] for h in steps] == [
        1.0
    ] * 4


def test_a_trainer_built_the_same_way_resumes_its_own_scheduler(model_name: str, tmp_path: Path) -> None:
    """The built scheduler is a function of train_dataset and args, so a run built again from them resumes from
    its checkpoint: the state's dataset fingerprint (ids by prompt key) and config match."""
    runs: list[list[Any]] = [[], []]
    first = _trainer(model_name, tmp_path, max_steps=4, save_strategy="steps", save_steps=2, on_batch=runs[0].append)
    first.train()
    again = _trainer(model_name, tmp_path, max_steps=4, save_strategy="steps", save_steps=2, on_batch=runs[1].append)
    again.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2"))
    assert [b.step for b in runs[1]] == [2, 3]
    assert again.scheduler.metrics()["total/gen_groups"] == first.scheduler.metrics()["total/gen_groups"]
    assert [[c.id for c in b.candidates] for b in runs[1]] == [[c.id for c in b.candidates] for b in runs[0][2:]]
