"""``RewardLogger`` inside a real TRL ``GRPOTrainer.train()`` (tiny Llama built here, nothing downloaded): the
plain run writes a reward log with its header, one line per training group with TRL's weighted rewards, no
evaluation group; ``snooze replay`` reads it; a resumed run cuts it back and goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
torch = pytest.importorskip("torch")

from integrations import _trl_tiny as tiny  # noqa: E402
from snooze import IntegrationError  # noqa: E402
from snooze.cli.main import main  # noqa: E402
from snooze.logs import read_reward_log  # noqa: E402

pytestmark = pytest.mark.trl

G, GROUPS = 4, 2  # per step: 8 completions = 2 prompts x 4


class Scores:
    """Two reward functions (one ``async``) that remember what they returned, and whether TRL was training."""

    def __init__(self) -> None:
        self.calls: list[tuple[bool, list[Any], list[float], list[float | None]]] = []
        self.trainer: Any = None

    def longer(self, completions: list[Any], **kwargs: Any) -> list[float]:
        return [float(len(c.split()) % 2) for c in completions]

    async def has_is(self, completions: list[Any], id: list[Any], **kwargs: Any) -> list[float | None]:
        out = [None if i == "r3" else float("is" in c.split()) for i, c in zip(id, completions)]
        a = self.longer(completions)
        self.calls.append((bool(self.trainer.model.training), list(id), a, out))
        return out


def _data(lines: list[str], prefix: str) -> Any:
    from datasets import Dataset

    return Dataset.from_list([{"id": f"{prefix}{i}", "prompt": x} for i, x in enumerate(lines)])


def _trainer(tmp: Path, scores: Scores, log: Path, **kw: Any) -> Any:
    from trl import GRPOConfig, GRPOTrainer

    from snooze.integrations.trl import RewardLogger

    logger = RewardLogger(log)
    args = GRPOConfig(
        output_dir=str(tmp / "out"),
        learning_rate=0.1,
        per_device_train_batch_size=G * GROUPS,
        num_generations=G,
        max_completion_length=5,
        report_to="none",
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
        logging_steps=1,
        reward_weights=[0.5, 0.5],
        eval_strategy="steps",
        eval_steps=2,
        per_device_eval_batch_size=G,
        **{"max_steps": 3, "save_strategy": "no", **kw},
    )
    trainer = GRPOTrainer(
        model=tiny.save(tiny.causal_lm(), tmp / "model"),
        reward_funcs=logger.wrap([scores.longer, scores.has_is]),
        args=args,
        train_dataset=_data(tiny.LINES, "r"),
        eval_dataset=_data(tiny.TEST_LINES, "t"),
        callbacks=[logger],
    )
    scores.trainer = trainer
    return trainer


def _expected(scores: Scores) -> list[tuple[str, list[float]]]:
    """The groups of the training calls, with TRL's weighted sum (``None`` as absent: nansum)."""
    out = []
    for training, ids, a, b in scores.calls:
        if not training:
            continue
        rows = [0.5 * x + (0.0 if y is None else 0.5 * y) for x, y in zip(a, b)]
        out += [(ids[k], rows[k : k + G]) for k in range(0, len(rows), G)]
    return out


def test_a_plain_grpo_run_writes_a_reward_log_replay_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scores, log = Scores(), tmp_path / "rewards.jsonl"
    trainer = _trainer(tmp_path, scores, log)
    assert trainer.reward_func_names == ["longer", "has_is"]  # TRL's metrics keep the functions' names
    trainer.train()
    assert any(not training for training, *_ in scores.calls), "TRL evaluated nothing: the test checks nothing"
    got = read_reward_log(log)
    h = got.header
    assert (h.group_size, h.batch_size, h.gen_batch_size, h.policy, h.dynamic_sampling, h.source) == (
        G,
        GROUPS,
        GROUPS,
        "grpo",
        False,
        "trl.RewardLogger",
    )
    assert got.steps.tolist() == [0, 0, 1, 1, 2, 2]  # three training steps, no evaluation group
    assert list(zip(got.ids, got.rewards.tolist())) == _expected(scores) and set(got.datasets) == {"train"}
    assert main(["replay", str(log), "--out", str(tmp_path / "replay"), "--no-plot"]) == 0
    assert "the comparison with DAPO does not apply" in capsys.readouterr().err


def test_a_resumed_run_cuts_the_log_back_and_goes_on(tmp_path: Path) -> None:
    log = tmp_path / "rewards.jsonl"
    first = Scores()
    _trainer(tmp_path, first, log, max_steps=4, save_strategy="steps", save_steps=2).train()
    whole = log.read_text().splitlines()
    assert [json.loads(x)["step"] for x in whole[1:]] == [0, 0, 1, 1, 2, 2, 3, 3]
    again = Scores()
    _trainer(tmp_path, again, log, max_steps=4, save_strategy="steps", save_steps=2).train(
        resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2")
    )
    lines = log.read_text().splitlines()
    assert lines[:5] == whole[:5] and [json.loads(x)["step"] for x in lines[1:]] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [json.loads(x)["id"] for x in lines[5:]] == [i for i, _ in _expected(again)]


def test_what_the_logger_cannot_log_is_refused(tmp_path: Path) -> None:
    from snooze.integrations.trl import RewardLogger

    with pytest.raises(IntegrationError, match="a reward model's scores never pass through a function"):
        RewardLogger(tmp_path / "r.jsonl").wrap([tiny.reward_model()])
    with pytest.raises(IntegrationError, match="is a folder"):
        RewardLogger(tmp_path)
    logger = RewardLogger(tmp_path / "r.jsonl")
    with pytest.raises(IntegrationError, match="no reward function went through RewardLogger.wrap"):
        logger.on_train_begin(_trainer(tmp_path, Scores(), tmp_path / "x.jsonl").args, None, None)


def test_the_logger_checks_its_range_when_built_and_refuses_a_snooze_trainer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 51, the TRL logger: ``reward_range`` was checked only when training began (after the model loaded);
    a ``SnoozeGRPOTrainer`` given the logger's functions wrote a header claiming a plain one-round run; a TRL
    version string that cannot be read (``main``) passed with no word."""
    import logging

    import trl

    from snooze.integrations.trl import RewardLogger, SnoozeGRPOTrainer

    with pytest.raises(IntegrationError, match=r"RewardLogger\(reward_range\)"):
        RewardLogger(tmp_path / "r.jsonl", reward_range=(1.0, 0.0))
    logged = RewardLogger(tmp_path / "r.jsonl").wrap([Scores().longer])
    with pytest.raises(IntegrationError, match="wrapped by RewardLogger"):
        SnoozeGRPOTrainer(model="never-loaded", reward_funcs=logged, snooze_config={"batch_size": 2})
    monkeypatch.setattr(trl, "__version__", "main")
    with caplog.at_level(logging.WARNING):
        RewardLogger(tmp_path / "r.jsonl")
    assert "trl 'main': not a version snooze can read, so it is unchecked" in caplog.text
