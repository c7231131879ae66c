"""Held-out accuracy, two ways: greedy decoding, and avg@k at the rollout temperature.

Both check answers exactly, per task.

- :func:`accuracy_by_task`: one greedy completion per prompt. It moves only when an argmax flips,
  so it can stay flat while RL keeps sharpening the sampled distribution.
- :func:`sampled_accuracy_by_task`: the mean reward of ``k`` completions per prompt sampled at a
  temperature (papers' avg@k, an unbiased estimate of a sampled answer's accuracy). At the rollout
  temperature this is what GRPO optimises: the chance that one rollout is right. The samples come
  from a generator seeded afresh (``seed``) for every set on every call, so every evaluation of a set,
  in every arm, uses the same random numbers (differences between two evaluations are the model's,
  not the sampler's; a set scores the same whichever sets are evaluated with it), and evaluating
  never moves the training run's generator.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from snooze.trainer.config import MAX_NEW_TOKENS
from snooze.trainer.model import TinyGPT, greedy, sample
from snooze.trainer.tasks import verify
from snooze.trainer.tokenizer import CharTokenizer

__all__ = ["accuracy_by_task", "sampled_accuracy_by_task", "MAX_NEW_TOKENS", "EVAL_SEED"]

"""Longest completion sampled: the longest built-in answer (7 reversed letters, a 4-digit sum) + EOS, with room."""

EVAL_SEED = 1234
"""Seed of the sampled evaluation's generator (fixed: common random numbers across steps, arms and seeds)."""

# Sequences per sampling call: bounds memory (a few MB), keeps batches large; fixed, as the samples depend on it.
_EVAL_ROWS = 4096


@torch.no_grad()
def accuracy_by_task(
    model: TinyGPT, sets: Mapping[str, Sequence[Mapping[str, Any]]], max_new: int = MAX_NEW_TOKENS
) -> dict[str, float]:
    """Greedy exact-match accuracy of ``model`` on each named list of ``{"prompt", "answer"}`` records."""
    return _score(model, sets, max_new, k=1, temperature=0.0, seed=EVAL_SEED)


@torch.no_grad()
def sampled_accuracy_by_task(
    model: TinyGPT,
    sets: Mapping[str, Sequence[Mapping[str, Any]]],
    k: int,
    temperature: float,
    max_new: int = MAX_NEW_TOKENS,
    seed: int = EVAL_SEED,
) -> dict[str, float]:
    """avg@k: per task, the mean exact-match reward of ``k`` completions per prompt sampled at ``temperature``."""
    return _score(model, sets, max_new, k=k, temperature=temperature, seed=seed)


def _score(
    model: TinyGPT, sets: Mapping[str, Sequence[Mapping[str, Any]]], max_new: int, k: int, temperature: float, seed: int
) -> dict[str, float]:
    tok = CharTokenizer()
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: dict[str, float] = {}
    chunk_size = max(1, _EVAL_ROWS // k)
    for name, records in sets.items():
        # seeded afresh per set: a set's score does not depend on which other sets are evaluated with it
        gen = torch.Generator(device=device).manual_seed(seed) if temperature > 0 else None
        correct = 0.0
        for start in range(0, len(records), chunk_size):
            chunk = records[start : start + chunk_size]
            ids, mask = (torch.from_numpy(x).to(device) for x in tok.encode_prompts([r["prompt"] for r in chunk]))
            if temperature > 0:
                toks = sample(model, ids, mask, k, max_new, temperature, gen).tokens  # [len(chunk)*k, T]
            else:
                toks = greedy(model, ids, mask, max_new)
            texts = [tok.decode(t) for t in toks.cpu().numpy()]
            correct += sum(verify(text, chunk[i // k]["answer"]) for i, text in enumerate(texts))
        out[name] = correct / max(len(records) * k, 1)
    model.train(was_training)
    return out
