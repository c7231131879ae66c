"""End-to-end: the real TRL ``GRPOTrainer`` on CPU, a tiny Llama and a word-level tokenizer built here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("trl", reason="needs the [trl] extra")
torch = pytest.importorskip("torch")

import snooze  # noqa: E402
from snooze.core.checkpoint import load_state  # noqa: E402
from snooze.logs import DASHBOARD, logged_name, read_reward_log  # noqa: E402

pytestmark = pytest.mark.trl

WORDS = ["yes", "no", "maybe", "ok", "easy", "hard", "mid", "q"]
EASY, HARD = {"e0", "e1"}, {"h0"}
PROMPTS = {"e": "q easy", "m": "q mid", "h": "q hard"}
RECORDS = [{"id": i, "prompt": PROMPTS[i[0]]} for i in ["e0", "m0", "e1", "m1", "h0", "m2"]]


def _tokenizer() -> Any:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *WORDS])}
    tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def _model(vocab_size: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    return LlamaForCausalLM(cfg)


class Scorer:
    """Easy prompts always pass, the hard one always fails, mid ones pass when 'yes' is generated."""

    def __init__(self) -> None:
        self.scored: list[str] = []  # the id of every generated completion, in order
        self.__name__ = "scorer"

    def __call__(self, prompts: list[Any], completions: list[str], id: list[str], **kw: Any) -> list[float]:
        self.scored.extend(id)
        return [1.0 if i in EASY else 0.0 if i in HARD else float("yes" in c.split()) for i, c in zip(id, completions)]


def _trainer(tmp: Path, max_steps: int, scorer: Scorer, batches: list[Any], **extra: Any) -> Any:
    from datasets import Dataset
    from trl import GRPOConfig

    from snooze.integrations.trl import SnoozeGRPOTrainer

    torch.set_num_threads(2)
    cfg = snooze.SchedulerConfig(batch_size=2, group_size=4, options=snooze.SnoozeOptions(factor=5), max_gen_rounds=3)
    sched = snooze.Scheduler({"toy": RECORDS}, cfg, seed=0)
    args = GRPOConfig(
        output_dir=str(tmp / "out"),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        num_generations=4,
        max_completion_length=3,
        max_steps=max_steps,
        learning_rate=5e-2,
        logging_steps=1,
        save_strategy="steps",
        save_steps=2,
        report_to=[],
        use_cpu=True,
        bf16=False,
        seed=0,
        beta=0.0,
        temperature=1.0,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    tok = _tokenizer()
    return SnoozeGRPOTrainer(
        model=_model(len(tok)),
        reward_funcs=scorer,
        args=args,
        train_dataset=Dataset.from_list(RECORDS),
        processing_class=tok,
        scheduler=sched,
        reward_log=tmp / "rewards.jsonl",
        on_batch=batches.append,
        **extra,
    )


def test_grpo_trainer_snoozes_trains_on_signal_and_resumes(tmp_path: Path) -> None:
    scorer, batches = Scorer(), []
    trainer = _trainer(tmp_path, 4, scorer, batches)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    trainer.train()

    # 1. the scheduler ran every TRL step; easy prompts were generated once, then skipped before generation
    assert [b.step for b in batches] == [0, 1, 2, 3]
    sched = trainer.scheduler
    assert sched.metrics()["total/skipped"] > 0
    generated = {i: scorer.scored.count(i) // 4 for i in {r["id"] for r in RECORDS}}
    assert all(generated[i] == 1 for i in EASY), generated
    # 2. every trained group carried signal, and TRL got only those rows
    assert sum(len(b) for b in batches) > 0
    for b in batches:
        assert b.signal.all() and (b.rewards.std(axis=1) > 0).all()
        assert all(c.id not in EASY | HARD for c in b.candidates)
    # 3. learning happened: every parameter moved
    after = dict(trainer.model.named_parameters())
    unchanged = [n for n, p in before.items() if torch.equal(p, after[n].detach())]
    assert not unchanged, unchanged
    # 4. TRL's logs carry every scheduler metric, each once, under its name (never snooze/snooze/...)
    logged = [h for h in trainer.state.log_history if "snooze/gen/rounds" in h]
    assert len(logged) == 4 and all(h["snooze/gen/rounds"] >= 1 for h in logged)
    ours = {k for h in trainer.state.log_history for k in h if k.startswith("snooze/")}
    assert ours == {logged_name(k) for k in batches[-1].metrics} and len(ours) == len(batches[-1].metrics) > 60
    assert not [k for h in trainer.state.log_history for k in h if k.startswith("snooze/snooze/")]
    # 5. the reward log has one line per generated group, in order
    header, *lines = [json.loads(x) for x in (tmp_path / "rewards.jsonl").read_text().splitlines()]
    assert (header["source"], header["group_size"], header["policy"]) == ("snooze.trl", 4, "snooze")
    assert len(lines) * 4 == len(scorer.scored) and [x["step"] for x in lines] == sorted(x["step"] for x in lines)

    # 6. resume from checkpoint-2: the restored scheduler carries on from step 2, easy prompts stay asleep
    ckpt = tmp_path / "out" / "checkpoint-2"
    saved = load_state(ckpt / "snooze")
    assert int(saved["meta"]["metrics"]["totals"]["steps"]) == 2
    scorer2, batches2 = Scorer(), []
    trainer2 = _trainer(tmp_path, 4, scorer2, batches2)
    trainer2.train(resume_from_checkpoint=str(ckpt))
    assert [b.step for b in batches2] == [2, 3]
    totals_at_2 = batches[1].metrics["total/gen_groups"]
    assert batches2[0].metrics["total/gen_groups"] == totals_at_2 + batches2[0].metrics["gen/groups"]
    assert not EASY & set(scorer2.scored)
    lines2 = [json.loads(x) for x in (tmp_path / "rewards.jsonl").read_text().splitlines()][1:]  # header kept
    assert [x["step"] for x in lines2 if x["step"] < 2] == [x["step"] for x in lines if x["step"] < 2]
    assert len([x for x in lines2 if x["step"] >= 2]) * 4 == len(scorer2.scored)

    # 7. a checkpoint without snooze/ (a plain GRPOTrainer's) is refused: no fresh scheduler under a resumed
    # model, and the reward log is not started over
    import shutil

    plain = tmp_path / "plain" / "checkpoint-4"
    shutil.copytree(tmp_path / "out" / "checkpoint-4", plain)
    shutil.rmtree(plain / "snooze")
    log_before = (tmp_path / "rewards.jsonl").read_bytes()
    trainer3 = _trainer(tmp_path, 6, Scorer(), [])
    state_before = trainer3.scheduler.state_dict()["arrays"]
    with pytest.raises(snooze.StateError, match="not written by SnoozeGRPOTrainer"):
        trainer3.train(resume_from_checkpoint=str(plain))
    assert (tmp_path / "rewards.jsonl").read_bytes() == log_before
    state_after = trainer3.scheduler.state_dict()["arrays"]
    assert state_after.keys() == state_before.keys()
    assert all(np.array_equal(state_after[k], v) for k, v in state_before.items())
    with pytest.raises(snooze.StateError, match="pass the TRL checkpoint that holds it"):
        trainer3.restore_scheduler(ckpt / "snooze")


class LengthScorer(Scorer):
    """:class:`Scorer` that also keeps the length of every completion TRL hands the reward function."""

    def __init__(self) -> None:
        super().__init__()
        self.lengths: list[int] = []

    def __call__(self, prompts: list[Any], completions: list[str], id: list[str], **kw: Any) -> list[float]:
        self.lengths.extend(len(ids) for ids in kw["completion_ids"])
        return super().__call__(prompts, completions, id, **kw)


def test_the_tokens_reported_are_the_completion_lengths_trl_generated(tmp_path: Path) -> None:
    """``gen/tokens`` of every step, and ``total/gen_tokens``, are the lengths of the completions TRL generated
    (as its reward function sees them), summed; no group goes without its count."""
    scorer, batches = LengthScorer(), []
    _trainer(tmp_path, 3, scorer, batches).train()
    m = batches[-1].metrics
    assert len(scorer.lengths) == m["total/rollouts"] == 4 * m["total/gen_groups"]
    assert m["total/gen_tokens"] == sum(scorer.lengths) and m["total/tokens_missing"] == 0
    per_step, at = [], 0
    for b in batches:
        per_step.append(sum(scorer.lengths[at : at + b.metrics["gen/rollouts"]]))
        at += b.metrics["gen/rollouts"]
    assert [b.metrics["gen/tokens"] for b in batches] == per_step
    assert 0 < m["total/gen_tokens"] <= 3 * m["total/rollouts"]  # max_completion_length=3
    log = read_reward_log(tmp_path / "rewards.jsonl")  # each generated group with its completions' tokens
    assert log.tokens_known and int(log.tokens.sum()) == sum(scorer.lengths) and len(log) == m["total/gen_groups"]


def test_compact_metrics_log_the_five_to_watch(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, 2, Scorer(), [], snooze_metrics="compact")
    trainer.train()
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 2
    for h in steps:
        assert {k for k in h if k.startswith("snooze/")} == {logged_name(k) for k in DASHBOARD}
    with pytest.raises(snooze.ConfigError, match="snooze_metrics='all': must be one of full, compact"):
        _trainer(tmp_path, 2, Scorer(), [], snooze_metrics="all")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reward_log": 123}, "must be the path of the file"),
        ({"reward_log": "."}, "is a folder"),
        ({"reward_log": "afile/rewards.jsonl"}, "is a file, so the log cannot be created"),
        ({"on_batch": 5}, "on_batch must be a function"),
    ],
)
def test_bad_trainer_arguments_are_refused_before_training(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kwargs: dict[str, Any], match: str
) -> None:
    from snooze.integrations.trl import SnoozeGRPOTrainer

    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    sched = snooze.Scheduler({"toy": RECORDS}, snooze.SchedulerConfig(batch_size=2, group_size=4), seed=0)
    with pytest.raises(snooze.IntegrationError, match=match):  # before TRL builds anything (was: at the first round)
        SnoozeGRPOTrainer(model=None, reward_funcs=Scorer(), scheduler=sched, **kwargs)


@pytest.mark.parametrize(("save_steps", "warned"), [(1, True), (6, True), (4, False), (8, False)])
def test_saves_between_two_generations_are_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, save_steps: int, warned: bool
) -> None:
    """steps_per_generation=4 with no accumulation: one generation serves 4 optimizer steps, and only a
    save_steps that is a multiple of 4 saves the scheduler with the model that trained on its batch."""
    from datasets import Dataset
    from trl import GRPOConfig

    from snooze.integrations.trl import SnoozeGRPOTrainer

    sched = snooze.Scheduler({"toy": RECORDS}, snooze.SchedulerConfig(batch_size=4, group_size=4), seed=0)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        gradient_accumulation_steps=1,
        steps_per_generation=4,
        num_generations=4,
        save_strategy="steps",
        save_steps=save_steps,
        report_to=[],
        use_cpu=True,
        bf16=False,
        max_steps=1,
    )
    tok = _tokenizer()
    with caplog.at_level("WARNING", logger="snooze.integrations.trl"):
        SnoozeGRPOTrainer(
            model=_model(len(tok)),
            reward_funcs=Scorer(),
            args=args,
            train_dataset=Dataset.from_list(RECORDS),
            processing_class=tok,
            scheduler=sched,
        )
    said = [r.getMessage() for r in caplog.records if "not a multiple of 4" in r.getMessage()]
    assert bool(said) is warned, said
    assert not said or f"save_steps={save_steps} is not a multiple of 4" in said[0]


def test_mismatched_group_size_is_a_clear_error(tmp_path: Path) -> None:
    from datasets import Dataset
    from trl import GRPOConfig

    from snooze.integrations.trl import SnoozeGRPOTrainer

    sched = snooze.Scheduler({"toy": RECORDS}, snooze.SchedulerConfig(batch_size=2, group_size=2), seed=0)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_generations=4,
        report_to=[],
        use_cpu=True,
        bf16=False,
        max_steps=1,
    )
    tok = _tokenizer()
    with pytest.raises(snooze.IntegrationError, match="num_generations=4"):
        SnoozeGRPOTrainer(
            model=_model(len(tok)),
            reward_funcs=Scorer(),
            args=args,
            processing_class=tok,
            train_dataset=Dataset.from_list(RECORDS),
            scheduler=sched,
        )


@pytest.mark.parametrize(
    ("version", "change", "match"),
    [
        ("0.29.1", None, r"supports trl>=1\.0\.0,<=1\.16\.0; trl 0\.29\.1 is installed, older than the oldest"),
        ("1.16.0", "_calculate_rewards", r"trl 1\.16\.0: GRPOTrainer\._calculate_rewards is missing"),
        (
            "1.17.0",
            "_load_optimizer_and_scheduler",
            r"_load_optimizer_and_scheduler takes \('self', 'checkpoint', 'extra'\)",
        ),
    ],
)
def test_a_trl_below_the_range_or_with_other_internals_is_refused_before_the_model_loads(
    monkeypatch: pytest.MonkeyPatch, version: str, change: str | None, match: str
) -> None:
    """A simulated TRL: an older release, or a GRPOTrainer whose overridden methods are gone or take other
    parameters. The trainer refuses it when built, naming the supported range and the install line, before
    TRL loads anything: the model name is a folder that does not exist, which from_pretrained would refuse."""
    import trl
    from trl import GRPOTrainer

    from snooze.integrations.trl import SnoozeGRPOTrainer

    monkeypatch.setattr(trl, "__version__", version)
    if change == "_calculate_rewards":
        monkeypatch.delattr(GRPOTrainer, change)
    elif change is not None:
        monkeypatch.setattr(GRPOTrainer, change, lambda self, checkpoint, extra: None)
    with pytest.raises(snooze.IntegrationError, match=match) as info:
        SnoozeGRPOTrainer(model="/no/such/model", reward_funcs=Scorer(), train_dataset=None)
    assert "pip install 'trl>=1.0.0,<=1.16.0'" in str(info.value)


def test_a_trl_newer_than_the_range_with_the_same_internals_runs_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from trl import GRPOTrainer

    from snooze.integrations.trl import _checks as checks

    with caplog.at_level("WARNING", logger="snooze.integrations.trl._checks"):
        checks.check_trl("1.16.0", {"GRPOTrainer": GRPOTrainer}, checks.SYNC)  # the newest tested: silent
        assert not caplog.records
        checks.check_trl("1.17.0", {"GRPOTrainer": GRPOTrainer}, checks.SYNC)
    assert "trl 1.17.0 is newer than the newest release snooze is tested with (1.16.0)" in caplog.text
