"""Held-out accuracy: greedy decoding, exact-answer check, per task."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from snooze.trainer.model import TinyGPT, greedy
from snooze.trainer.tasks import verify
from snooze.trainer.tokenizer import CharTokenizer

__all__ = ["accuracy_by_task", "MAX_NEW_TOKENS"]

MAX_NEW_TOKENS = 10
"""Longest completion sampled: the longest built-in answer (7 reversed letters, a 4-digit sum) + EOS, with room."""

_EVAL_CHUNK = 512  # prompts per greedy call: bounds memory, keeps batches large


@torch.no_grad()
def accuracy_by_task(model: TinyGPT, sets: Mapping[str, Sequence[Mapping[str, Any]]], max_new: int = MAX_NEW_TOKENS) -> dict[str, float]:
    """Greedy exact-match accuracy of ``model`` on each named list of ``{"prompt", "answer"}`` records."""
    tok = CharTokenizer()
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: dict[str, float] = {}
    for name, records in sets.items():
        correct = 0.0
        for start in range(0, len(records), _EVAL_CHUNK):
            chunk = records[start : start + _EVAL_CHUNK]
            ids, mask = tok.encode_prompts([r["prompt"] for r in chunk])
            toks = greedy(model, torch.from_numpy(ids).to(device), torch.from_numpy(mask).to(device), max_new)
            correct += sum(verify(tok.decode(t), r["answer"]) for t, r in zip(toks.cpu().numpy(), chunk))
        out[name] = correct / max(len(records), 1)
    model.train(was_training)
    return out
