"""What the TRL tests share: a word-level tokenizer with a chat template, a tiny Llama (causal LM and reward
model), small prompt-only datasets in TRL's two formats, and :class:`Trace`, which checks that every row
``SnoozeGRPOTrainer`` hands TRL is a generated row of a group the scheduler kept.

Nothing is downloaded: models and tokenizers are built here (and saved to a folder where a test passes a
model *name*, as TRL's own tests pass hub ids).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

WORDS = (
    "beautiful is better than ugly explicit implicit simple complex flat nested sparse dense readability "
    "counts errors never pass silently yes no ok user assistant system \\boxed{4} 4 <think> </think>"
).split()
CHAT = (
    "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}"
    "{% if add_generation_prompt %}assistant {% endif %}"
)
LINES = [  # prompt-only rows, as TRL's "zen" test dataset (17 + 2 lines of the Zen of Python there)
    "beautiful is better than",
    "explicit is",
    "simple is better",
    "complex",
    "flat is better than",
    "sparse is better",
    "readability",
    "errors should never",
    "ugly is",
    "implicit is not",
    "nested is",
    "dense",
]
TEST_LINES = ["readability counts", "errors never pass", "simple is"]


def since(package: str, version: str, what: str) -> pytest.MarkDecorator:
    """Skip a test of ``what``, which ``package`` (``trl``, ``transformers``) has only from ``version`` on: the TRL
    tests also run against the oldest TRL of the supported range (scripts/test_trl_oldest.sh)."""
    from importlib.metadata import version as installed

    from packaging.version import Version

    have = installed(package)
    return pytest.mark.skipif(
        Version(have) < Version(version), reason=f"{what} needs {package} >= {version} ({package} {have} installed)"
    )


def tokenizer() -> Any:
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *WORDS])}
    tok = Tokenizer(WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = WhitespaceSplit()
    out = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    out.chat_template = CHAT
    return out


RESPONSE_TEMPLATE = {  # how transformers parses an assistant turn of CHAT (TRL's async rollout worker needs one)
    "defaults": {"role": "assistant"},
    "start_anchor": "assistant",
    "fields": {"content": {"close_pattern": r"\s*<eos>\s*", "content": "text"}},
}


def chat_tokenizer() -> Any:
    """:func:`tokenizer` with a response template, for TRL's async rollout worker (it parses each completion)."""
    tok = tokenizer()
    tok.response_template = RESPONSE_TEMPLATE
    return tok


def _config(vocab_size: int, **kw: Any) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
        **kw,
    )


def causal_lm(seed: int = 0) -> Any:
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(_config(len(WORDS) + 3))


def reward_model(seed: int = 1) -> Any:
    from transformers import LlamaForSequenceClassification

    torch.manual_seed(seed)
    return LlamaForSequenceClassification(_config(len(WORDS) + 3, num_labels=1))


def save(model: Any, folder: Path) -> str:
    """``model`` and the tokenizer saved to ``folder``: a name TRL loads as it loads a hub id."""
    model.save_pretrained(folder)
    tokenizer().save_pretrained(folder)
    return str(folder)


def prompts(conversational: bool = False, lines: list[str] = LINES) -> Any:
    from datasets import Dataset

    if conversational:
        return Dataset.from_list([{"prompt": [{"role": "user", "content": x}]} for x in lines])
    return Dataset.from_list([{"prompt": x} for x in lines])


def changed(before: dict[str, torch.Tensor], model: Any) -> list[str]:
    """Names of the parameters that did not change (TRL's own check, with its message)."""
    return [n for n, p in before.items() if torch.equal(p, model.get_parameter(n))]


def snapshot(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


class Trace:
    """Records each generation of a SnoozeGRPOTrainer: TRL's output of every round, the round's rewards, the
    batch the scheduler finished, and the rows the adapter handed TRL; :meth:`check` compares them.

    Install with ``Trace(trainer, monkeypatch)`` before ``trainer.train()``.
    """

    def __init__(self, trainer: Any, monkeypatch: Any) -> None:
        from trl import GRPOTrainer

        self.trainer = trainer
        self.steps: list[dict[str, Any]] = []
        self._rounds: list[tuple[dict[str, torch.Tensor], np.ndarray]] = []
        original = GRPOTrainer._generate_and_score_completions

        def one_round(inner: Any, inputs: Any) -> Any:
            out = original(inner, inputs)
            if inner.model.training:  # evaluation is TRL's own path, not the scheduler's
                per_func = inner._round_rewards.detach().float().cpu()  # what TRL gathered for this round
                rewards = (per_func * inner.reward_weights.detach().float().cpu()).nansum(dim=1)
                rewards[torch.isnan(per_func).all(dim=1)] = float(inner.scheduler.config.reward_range[0])
                self._rounds.append((out, rewards.numpy().astype(np.float64)))
            return out

        monkeypatch.setattr(GRPOTrainer, "_generate_and_score_completions", one_round)
        scheduled = trainer._generate_and_score_completions
        previous = trainer.on_batch

        def generation(inputs: Any) -> Any:
            self._rounds = []
            out = scheduled(inputs)
            if trainer.model.training:
                self.steps[-1].update(rounds=self._rounds, handed=out)
            return out

        def on_batch(batch: Any) -> None:
            self.steps.append({"batch": batch})
            if previous is not None:
                previous(batch)

        trainer._generate_and_score_completions = generation
        trainer.on_batch = on_batch

    def check(self, keeps_zero_signal: bool = False) -> None:
        """Every row TRL trained on is, in order, a row of a round of the same step, group by group; the groups
        are the batch's candidates with the rewards the scheduler recorded, each with signal (unless the policy
        keeps zero-signal groups); every other row is inert (no loss token, advantage 0)."""
        G = int(self.trainer.num_generations)
        assert self.steps, "no generation was traced"
        for step in self.steps:
            batch, handed, rounds = step["batch"], step["handed"], step["rounds"]
            blocks = [
                (rows_of(out, lo, lo + G), rewards[lo : lo + G])
                for out, rewards in rounds
                for lo in range(0, out["completion_ids"].shape[0], G)
            ]
            at = 0
            for i, cand in enumerate(batch.candidates):
                mine = rows_of(handed, i * G, (i + 1) * G)
                while at < len(blocks) and blocks[at][0] != mine:
                    at += 1
                assert at < len(blocks), f"step {batch.step}: group {i} ({cand.id}) handed to TRL was not generated"
                np.testing.assert_allclose(blocks[at][1], batch.rewards[i], rtol=1e-6, atol=1e-6)
                assert keeps_zero_signal or np.ptp(batch.rewards[i]) > 0, f"{cand.id}: trained without signal"
                at += 1
            rest = slice(len(batch) * G, None)
            assert not handed["completion_mask"][rest].any() and not handed["advantages"][rest].any()

    def trained_groups(self) -> list[int]:
        return [len(s["batch"]) for s in self.steps]


def rows_of(out: dict[str, torch.Tensor], lo: int, hi: int) -> list[tuple[Any, ...]]:
    """Rows ``[lo, hi)`` of a generation output as (prompt tokens, completion tokens, advantage), padding removed."""
    rows = []
    for r in range(lo, hi):
        prompt = out["prompt_ids"][r][out["prompt_mask"][r].bool()].tolist()
        completion = out["completion_ids"][r][out["completion_mask"][r].bool()].tolist()
        rows.append((tuple(prompt), tuple(completion), float(out["advantages"][r])))
    return rows


def reward_len(completions: list[Any], **kwargs: Any) -> list[float]:
    """Rewards longer completions (TRL's tests' ``reward_func``)."""
    return [float(len(c if isinstance(c, str) else c[0]["content"])) for c in completions]


RewardFunc = Callable[..., list[Any]]
