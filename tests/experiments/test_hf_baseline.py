"""``snooze baseline --model M --dataset F`` with a Hugging Face causal LM (a tiny Llama saved here, nothing from a
hub), feeding ``snooze stratify``, whose curriculum the TRL trainer and the verl adapter take: ids line up."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from integrations import _trl_tiny as tiny  # noqa: E402

from snooze import StateMismatchError  # noqa: E402
from snooze.cli.main import main  # noqa: E402
from snooze.integrations.trl._data import keyed_ids  # noqa: E402

EASY = set(tiny.LINES[:4])  # always right: too easy, dropped by the curriculum
HARD = set(tiny.LINES[4:7])  # never right: too hard, left out of stage 1

REWARDS = """
EASY = {easy!r}
HARD = {hard!r}


def trl_reward(prompts, completions, **columns):
    return [1.0 if p in EASY else 0.0 if p in HARD else float(len(c.split()) % 2) for p, c in zip(prompts, completions)]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return 1.0 if ground_truth == "easy" else 0.0 if ground_truth == "hard" else float(len(solution_str.split()) % 2)
"""


def _setup(tmp: Path) -> tuple[str, Path]:
    (tmp / "rewards.py").write_text(REWARDS.format(easy=EASY, hard=HARD))
    return tiny.save(tiny.causal_lm(), tmp / "model"), tmp / "rewards.py"


def _baseline(tmp: Path, model: str, data: Path, reward: str, *extra: str) -> list[dict[str, Any]]:
    out = tmp / "base.jsonl"
    args = ["baseline", "--model", f"tiny={model}", "--dataset", str(data), "--reward", reward, "--out", str(out)]
    assert main([*args, "--samples", "6", "--max-new-tokens", "4", "--chunk", "5", *extra]) == 0
    assert main(["stratify", str(out), "--out", str(tmp / "strata"), "--group-size", "4", "--no-plot"]) == 0
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_a_trl_dataset_s_curriculum_goes_into_snooze_grpo_trainer(tmp_path: Path) -> None:
    model, rewards = _setup(tmp_path)
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": x}) + "\n" for x in tiny.LINES))
    rows = _baseline(tmp_path, model, data, f"{rewards}:trl_reward")
    ids = keyed_ids(tiny.LINES)[0]  # what SnoozeGRPOTrainer calls the rows of this train_dataset
    assert [(r["dataset"], r["id"], r["model"]) for r in rows] == [("train", i, "tiny") for i in ids]
    by_id = dict(zip(ids, tiny.LINES))
    assert all(r["rewards"] == [1.0] * 6 for r in rows if by_id[r["id"]] in EASY)
    cur = json.loads((tmp_path / "strata" / "curriculum.json").read_text())
    assert sorted(cur["drop"]["train"]) == sorted(i for i, x in by_id.items() if x in EASY)

    from trl import GRPOConfig

    from snooze.integrations.trl import SnoozeGRPOTrainer

    seen: list[str] = []

    def reward(prompts: list[str], completions: list[str], **kw: Any) -> list[float]:
        seen.extend(prompts)
        return [float(len(c.split()) % 2) for c in completions]

    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=4,
        max_steps=2,
        report_to="none",
        use_cpu=True,
        bf16=False,
        disable_tqdm=True,
        save_strategy="steps",
        save_steps=2,
    )
    trainer = SnoozeGRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=args,
        train_dataset=tiny.prompts(),
        curriculum=tmp_path / "strata" / "curriculum.json",
    )
    trainer.train()
    assert seen and not set(seen) & (EASY | HARD)  # dropped (too easy) and stage 1 (too hard) never generated
    assert (tmp_path / "out" / "checkpoint-2" / "snooze_curriculum.json").is_file()
    again = SnoozeGRPOTrainer(model=model, reward_funcs=reward, args=args, train_dataset=tiny.prompts())
    with pytest.raises(StateMismatchError, match="saved by a run with a curriculum"):
        again.restore_scheduler(tmp_path / "out" / "checkpoint-2")


def _verl_parquet(path: Path) -> Path:
    import datasets

    truths = ["easy"] * 4 + ["hard"] * 3 + ["mid"] * 5
    records = [
        {
            "data_source": "gsm" if i % 2 else "math",
            "prompt": [{"role": "user", "content": tiny.LINES[i]}],
            "reward_model": {"ground_truth": truth},
            "extra_info": {"index": 100 + i},
        }
        for i, truth in enumerate(truths)
    ]
    datasets.Dataset.from_list(records).to_parquet(str(path))
    return path


def test_a_verl_dataset_s_curriculum_goes_into_the_verl_run(tmp_path: Path) -> None:
    model, rewards = _setup(tmp_path)
    rows = _baseline(tmp_path, model, _verl_parquet(tmp_path / "train.parquet"), str(rewards))  # compute_score
    assert [(r["dataset"], r["id"]) for r in rows] == [("gsm" if i % 2 else "math", 100 + i) for i in range(12)]
    pytest.importorskip("verl")
    from snooze import SchedulerConfig
    from snooze.integrations.verl._options import VerlOptions
    from snooze.integrations.verl._prompts import PromptIndex
    from snooze.integrations.verl._run import SnoozeRun

    keys = [(r["dataset"], r["id"]) for r in rows]
    curriculum = tmp_path / "strata" / "curriculum.json"
    options = VerlOptions(scheduler=SchedulerConfig(batch_size=2, group_size=4), curriculum=curriculum)
    run = SnoozeRun(PromptIndex(keys), options)
    drawn = {(c.dataset, c.id) for _ in range(6) for c in run.scheduler.propose(4)}
    assert drawn and not drawn & {(d, i) for d, i in keys if i - 100 < 7}  # easy dropped, hard left out (stage 1)
    run.scheduler.propose(0)
    plain = SnoozeRun(PromptIndex(keys), VerlOptions(scheduler=SchedulerConfig(batch_size=2, group_size=4)))
    plain.save(tmp_path / "ckpt" / "snooze")  # a checkpoint of a run without a curriculum
    with pytest.raises(StateMismatchError, match="saved by a run without a curriculum"):
        SnoozeRun(PromptIndex(keys), options).restore(tmp_path / "ckpt" / "snooze", 0)


def test_what_the_dataset_mode_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, rewards = _setup(tmp_path)
    capsys.readouterr()  # (saving the model prints a progress bar)
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps({"prompt": "simple is"}) + "\n")
    base = ["baseline", "--dataset", str(data), "--out", str(tmp_path / "o.jsonl")]
    for extra, message in (
        (["--model", model, "--warmup"], "--warmup: for the built-in tasks; --dataset samples your dataset's prompts"),
        ([], "--dataset needs --model"),
        (["--model", model, "--reward", f"{rewards}:nope"], "has no function 'nope'"),
        (["--model", str(tmp_path / "missing")], "not a causal LM transformers can load"),
    ):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err


def test_hf_completions_takes_the_seeds_baseline_config_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A negative seed is refused (as BaselineConfig's) before a model is loaded; any other seeds torch, wrapped
    modulo 2**64 past its 64 bits (2**70 overflowed torch.manual_seed), itself below."""
    from snooze.core.errors import ConfigError
    from snooze.experiments import hf_baseline

    with pytest.raises(ConfigError, match=r"seed=-1: must be an integer >= 0"):
        hf_baseline.hf_completions("never-loaded", "m", [], 1, 1.0, 4, 1, -1)
    seeded: list[int] = []
    monkeypatch.setattr(hf_baseline, "_load", lambda name: (None, None))
    monkeypatch.setattr(torch, "manual_seed", seeded.append)
    for seed in (0, 7, 2**63 - 1, 2**70 + 5):
        assert hf_baseline.hf_completions("m", "m", [], 1, 1.0, 4, 1, seed) == []
    assert seeded == [0, 7, 2**63 - 1, 5]
