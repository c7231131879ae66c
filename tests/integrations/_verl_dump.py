"""verl's own rollout dump (``trainer.rollout_data_dir``), written on CPU by verl 0.9.1's code: what the
tests of ``snooze import verl`` read.

- :func:`dump_dataproto`: verl's ``RayPPOTrainer._log_rollout_data`` on a real ``DataProto`` built here
  (prompt and response token ids, token-level scores with each rollout's reward on its last token, the
  ``reward_model`` ground truths, rollouts of a group next to each other as verl's ``repeat(interleave=True)``
  leaves them): verl decodes the tokens and writes ``<step>.jsonl`` through its own dump thread.
- :func:`dump_v1`: verl 0.9's v1 ``PPOTrainer._log_rollout_data`` (the sync trainer's), which reads the
  step's batch from TransferQueue: the read (``tq.kv_batch_get``) is answered by :class:`_Store`, a stand-in
  holding the same fields; the batch's keys are verl's ``{uid}_{session}_{index}`` with a fresh uid per
  prompt and step, as verl draws them. verl sorts the rows by key, decodes and writes the file.
- :func:`write_generations`: verl's JSONL writer itself (``_write_generations``), for the round trip.

A step is a list of groups ``(prompt text, [reward of each rollout], ground truth)``; texts are made of
:data:`WORDS` (``"q gsm 3"``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

Step = list[tuple[str, list[float], str]]

RESPONSE = "1 2 3"  # every rollout's response text (what verl dumps as "output")


WORDS = ["q", "gsm", "math", "user", ":"] + [str(i) for i in range(100)]


def tokenizer() -> Any:
    """A word-level tokenizer over :data:`WORDS` whose decode joins words with spaces (as a real one keeps them)."""
    from tokenizers import Tokenizer, decoders
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *WORDS])}, unk_token="<unk>"))
    tok.pre_tokenizer = WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins the words with a space between them
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def _rows(tok: Any, step: Step) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, list[str]]:
    """``prompts [B, P]`` (left-padded), ``responses [B, R]``, ``scores [B, R]`` (reward on the last token)."""
    texts = [text for text, rewards, _ in step for _ in rewards]
    truths = [truth for _, rewards, truth in step for _ in rewards]
    rewards = [r for _, rs, _ in step for r in rs]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    width = max(map(len, ids))
    prompts = torch.tensor([[tok.pad_token_id] * (width - len(x)) + x for x in ids])
    resp = tok(RESPONSE, add_special_tokens=False)["input_ids"]
    responses = torch.tensor([resp] * len(texts))
    scores = torch.zeros(responses.shape)
    scores[:, -1] = torch.tensor(rewards)
    return prompts, responses, scores, truths


def _bare(cls: type, tok: Any, step: int) -> Any:
    """A verl trainer object with only what its dump methods read: the tokenizer, the step, the dump thread."""
    trainer = cls.__new__(cls)
    trainer.tokenizer = tok
    trainer.global_steps = step
    trainer._init_dump_executor()
    return trainer


def dump_dataproto(folder: Path, steps: dict[int, Step], tok: Any) -> None:
    """Each step's groups through verl's legacy ``RayPPOTrainer._log_rollout_data`` (on a real ``DataProto``)."""
    from verl.protocol import DataProto
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    for step, groups in steps.items():
        prompts, responses, scores, truths = _rows(tok, groups)
        batch = DataProto.from_dict(
            tensors={"prompts": prompts, "responses": responses, "token_level_scores": scores},
            non_tensors={"reward_model": np.array([{"ground_truth": t} for t in truths], dtype=object)},
        )
        trainer = _bare(RayPPOTrainer, tok, step)
        trainer._log_rollout_data(batch, {}, {}, str(folder))
        trainer._shutdown_dump_executor()


class _Padded:
    """A ragged field as TransferQueue returns it: ``to_padded_tensor`` gives the padded rows."""

    def __init__(self, rows: torch.Tensor) -> None:
        self.rows = rows

    def to_padded_tensor(self, padding: int) -> torch.Tensor:
        return self.rows


class _Store:
    """The stand-in for TransferQueue's ``kv_batch_get``: the step's fields, by key, in the order asked for."""

    def __init__(self) -> None:
        self.fields: dict[str, dict[str, Any]] = {}

    def put(
        self, keys: list[str], prompts: torch.Tensor, responses: torch.Tensor, scores: torch.Tensor, truths: list[str]
    ) -> None:
        for i, key in enumerate(keys):
            self.fields[key] = {
                "prompts": prompts[i],
                "responses": responses[i],
                "rm_scores": scores[i],
                "gt": truths[i],
            }

    def kv_batch_get(self, keys: list[str], partition_id: str, select_fields: list[str]) -> dict[str, Any]:
        rows = [self.fields[k] for k in keys]
        return {
            "uid": np.array([k.rsplit("_", 2)[0] for k in keys], dtype=object),
            "prompts": _Padded(torch.stack([r["prompts"] for r in rows])),
            "responses": _Padded(torch.stack([r["responses"] for r in rows])),
            "rm_scores": torch.stack([r["rm_scores"] for r in rows]),
            "reward_model": np.array([{"ground_truth": r["gt"]} for r in rows], dtype=object),
        }


def dump_v1(folder: Path, steps: dict[int, Step], tok: Any, monkeypatch: Any) -> None:
    """Each step's groups through verl 0.9's v1 ``_log_rollout_data`` (the sync trainer's), TransferQueue's read
    answered by :class:`_Store`; keys ``{uid}_{session}_0``, a fresh uid per group and step."""
    from verl.trainer.ppo.v1 import trainer_base
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    store = _Store()
    monkeypatch.setattr(trainer_base.tq, "kv_batch_get", store.kv_batch_get)
    for step, groups in steps.items():
        prompts, responses, scores, truths = _rows(tok, groups)
        keys = [f"{uid}_{s}_0" for (_, rewards, _), uid in zip(groups, _uids(len(groups))) for s in range(len(rewards))]
        store.put(keys, prompts, responses, scores, truths)
        trainer = _bare(PPOTrainerSync, tok, step)
        trainer._log_rollout_data(SimpleNamespace(keys=keys, partition_id="train"), {}, str(folder))
        trainer._shutdown_dump_executor()


def _uids(n: int) -> list[str]:
    return [uuid.uuid4().hex for _ in range(n)]  # verl: a fresh uuid4 per prompt per step


def write_generations(folder: Path, step: int, rows: dict[str, list[Any]]) -> None:
    """verl's own JSONL writer of a step (``RayPPOTrainer._write_generations``): ``rows`` holds ``input``,
    ``score`` and any extra fields (one value per rollout), as a reward function's extra info would."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    n = len(rows["input"])
    extra = {k: v for k, v in rows.items() if k not in ("input", "score")}
    RayPPOTrainer._write_generations(rows["input"], [RESPONSE] * n, [None] * n, rows["score"], extra, str(folder), step)


def example_steps(
    steps: int = 8, prompts: int = 16, per_step: int = 8, group: int = 4, seed: int = 0
) -> dict[int, Step]:
    """A small run's dump (docs/your-run.md): ``prompts`` prompts of fixed pass rates, ``per_step`` of them a step
    in turn (each met ``steps * per_step / prompts`` times), groups of ``group`` Bernoulli rewards; steps from 1."""
    rng = np.random.default_rng(seed)
    rates = np.resize([1.0, 1.0, 0.9, 0.5, 0.2, 0.0, 1.0, 0.7], prompts)
    out: dict[int, Step] = {}
    for s in range(steps):
        picks = [(s * per_step + j) % prompts for j in range(per_step)]
        out[s + 1] = [
            (f"q {'gsm' if i % 2 else 'math'} {i}", (rng.uniform(size=group) < rates[i]).astype(float).tolist(), str(i))
            for i in picks
        ]
    return out
