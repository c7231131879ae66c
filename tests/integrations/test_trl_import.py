"""``snooze import trl`` on the completion logs of a real tiny ``GRPOTrainer.train()`` with
``log_completions=True`` (TRL 1.16 writes ``<output_dir>/completions/completions_<step>.parquet``; tiny Llama built
here, nothing downloaded, CPU). The same run also writes ``RewardLogger``'s reward log, the reference: every
sampled step's groups must come back with the same prompt keys and the same rewards (TRL's sum, ``None`` as
absent, weights 1), and the header must say what the import could not know."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
pytest.importorskip("pyarrow", reason="TRL's completion logs are Parquet")
torch = pytest.importorskip("torch")

from integrations import _trl_tiny as tiny  # noqa: E402
from snooze.cli.main import main  # noqa: E402
from snooze.logs import read_reward_log  # noqa: E402

pytestmark = pytest.mark.trl

G, GROUPS, STEPS = 4, 2, 3


LINES = [line for line in tiny.LINES if set(line.split()) <= set(tiny.WORDS)]
"""The prompts the tiny tokenizer gives back as written: TRL 1.0 logs a prompt decoded from its tokens (1.16 the text
itself), and the word-level tokenizer drops a word it does not know, so a key of that text would not be the
logger's. A real tokenizer gives its text back."""


def longer(completions: list[Any], **kwargs: Any) -> list[float]:
    return [float(len(c.split()) % 2) for c in completions]


def has_is(completions: list[Any], **kwargs: Any) -> list[float | None]:
    return [None if len(c.split()) == 3 else float("is" in c.split()) for c in completions]  # None: NaN in TRL's file


def _run(tmp: Path) -> tuple[Path, Path]:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from snooze.integrations.trl import RewardLogger

    logger = RewardLogger(tmp / "logger.jsonl", reward_range=(0.0, 2.0))
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
        log_completions=True,
        max_steps=STEPS,
        save_strategy="no",
    )
    GRPOTrainer(
        model=tiny.save(tiny.causal_lm(), tmp / "model"),
        reward_funcs=logger.wrap([longer, has_is]),
        args=args,
        train_dataset=Dataset.from_list([{"prompt": x} for x in LINES]),  # no id column: keyed by prompt
        callbacks=[logger],
    ).train()
    return tmp / "out", tmp / "logger.jsonl"


def test_trl_completion_logs_import_as_the_groups_the_run_generated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, reference = _run(tmp_path)
    files = sorted(p.name for p in (out / "completions").iterdir())
    assert files == [f"completions_{s:05d}.parquet" for s in range(1, STEPS + 1)]  # TRL's own files
    log_path = tmp_path / "imported.jsonl"
    assert main(["import", "trl", str(out), "--out", str(log_path), "--reward-range", "0,2"]) == 0
    printed = capsys.readouterr()
    assert "a sample" in printed.err and "with weights 1" in printed.err
    imported, ref = read_reward_log(log_path), read_reward_log(reference)
    # TRL logs at the end of a step; the logger writes the batch at the step it was generated for (one earlier)
    assert imported.steps.tolist() == [s + 1 for s in ref.steps.tolist()]
    assert imported.ids == ref.ids and imported.datasets == ref.datasets
    assert imported.rewards.tolist() == ref.rewards.tolist()
    h = imported.header
    assert (h.group_size, h.batch_size, h.source, h.reward_field) == (G, GROUPS, "snooze import trl", "longer+has_is")
    assert any("a sample" in c for c in h.caveats)
    assert main(["import", "trl", str(out), "--out", str(tmp_path / "one.jsonl"), "--reward-field", "longer"]) == 0
    one = read_reward_log(tmp_path / "one.jsonl")
    assert one.header.reward_field == "longer" and set(one.rewards.ravel().tolist()) <= {0.0, 1.0}
    weighted = tmp_path / "weighted.jsonl"
    assert main(["import", "trl", str(out), "--out", str(weighted), "--reward-weights", "1,0"]) == 0
    assert read_reward_log(weighted).rewards.tolist() == one.rewards.tolist()  # has_is weighted 0: longer alone
    assert main(["import", "trl", str(out), "--out", str(tmp_path / "w.jsonl"), "--reward-weights", "1"]) == 2
    assert "1 weights for the reward columns ['longer', 'has_is']" in capsys.readouterr().err
    assert main(["replay", str(log_path), "--out", str(tmp_path / "replay"), "--no-plot"]) == 0
    assert "a sample" in capsys.readouterr().err  # replay repeats the header's caveats
