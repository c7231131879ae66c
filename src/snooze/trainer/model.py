"""A small decoder-only transformer (nanoGPT-shaped) with KV-cached batched sampling.

Prompts are left-padded (see :meth:`CharTokenizer.encode_prompts`); every forward takes a key mask
and per-row positions so padding changes nothing a real token sees. Sampling and the training
forward compute log-probs of the *same* tempered distribution (``logits / temperature``), so the
GRPO ratio of a fresh rollout is exactly 1 before the first update.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from snooze.core.errors import ConfigError
from snooze.trainer.config import check_int
from snooze.trainer.tokenizer import EOS, PAD

__all__ = ["ModelConfig", "TinyGPT", "Rollouts", "sample", "completion_logprobs", "greedy"]

KVCache = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the policy network. The defaults give ~0.45M parameters."""

    vocab_size: int = 46
    """Tokens (the char tokenizer's ``vocab_size``)."""

    n_layer: int = 4
    """Transformer blocks."""

    n_head: int = 4
    """Attention heads per block."""

    d_model: int = 96
    """Width of the residual stream; must divide by ``n_head``."""

    max_len: int = 40
    """Longest sequence (prompt + completion) the position table covers."""

    def __post_init__(self) -> None:
        for name in ("vocab_size", "n_layer", "n_head", "d_model", "max_len"):
            check_int(self, name, 1)  # (True was a layer)
        if self.d_model % self.n_head:
            raise ConfigError(f"ModelConfig: d_model={self.d_model} must be a multiple of n_head={self.n_head}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, 4 * cfg.d_model), nn.GELU(), nn.Linear(4 * cfg.d_model, cfg.d_model)
        )

    def forward(
        self, x: torch.Tensor, attn_mask: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.n_head, d // self.n_head).transpose(1, 2) for z in (q, k, v))  # [B, H, T, Dh]
        if past is not None:
            k, v = torch.cat([past[0], k], dim=2), torch.cat([past[1], v], dim=2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)  # [B, H, T, Dh]
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x)), (k, v)


class TinyGPT(nn.Module):
    """Token + learned position embeddings, pre-LN blocks, tied output head."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.max_len, cfg.d_model)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layer))  # GPT-2's residual scaling

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(
        self, ids: torch.Tensor, key_mask: torch.Tensor, pos: torch.Tensor, cache: KVCache | None = None
    ) -> tuple[torch.Tensor, KVCache]:
        """Logits ``[B, T, V]`` for ``ids [B, T]`` at positions ``pos [B, T]``.

        ``key_mask [B, L+T]`` (bool) marks real tokens among the cached ``L`` columns and the new ``T``.
        """
        b, t = ids.shape
        past_len = 0 if cache is None else cache[0][0].shape[2]
        cols = past_len + t
        causal = torch.ones(t, cols, dtype=torch.bool, device=ids.device).tril(diagonal=past_len)  # [T, L+T]
        allowed = causal[None] & key_mask[:, None, :]  # [B, T, L+T]
        self_col = torch.arange(t, device=ids.device)[:, None] + past_len == torch.arange(cols, device=ids.device)[None]
        allowed = allowed | self_col[None]  # a pad query sees itself: no all-masked row, no NaN
        attn_mask = allowed[:, None]  # [B, 1, T, L+T]
        x = self.tok(ids) + self.pos(pos.clamp(0, self.cfg.max_len - 1))
        new_cache: KVCache = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, attn_mask, None if cache is None else cache[i])
            new_cache.append(kv)
        return self.ln_f(x) @ self.tok.weight.T, new_cache


@dataclass
class Rollouts:
    """Sampled completions of ``N`` prompts x ``G`` rows each (row ``n*G + g``)."""

    prompt_ids: torch.Tensor  # [N*G, P] left-padded
    prompt_mask: torch.Tensor  # [N*G, P] bool
    tokens: torch.Tensor  # [N*G, T] completion ids, PAD after EOS
    logprobs: torch.Tensor  # [N*G, T] log-prob of each sampled token (0 where masked)
    mask: torch.Tensor  # [N*G, T] bool, True up to and including EOS


def _shift(ids_mask: torch.Tensor) -> torch.Tensor:
    return (ids_mask.long().cumsum(dim=1) - 1).clamp(min=0)  # position of each column within its row


def _prefill(
    model: TinyGPT, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, group_size: int
) -> tuple[torch.Tensor, KVCache]:
    """Run each prompt once and copy its last logits ``[N*G, V]`` and KV cache to its ``group_size`` rows.

    A group's rows share the prompt, so the prompt's forward is done once per prompt, not once per rollout.
    """
    logits, cache = model(prompt_ids, prompt_mask, _shift(prompt_mask))  # [N, P, V]
    last = logits[:, -1, :].repeat_interleave(group_size, dim=0)
    return last, [(k.repeat_interleave(group_size, dim=0), v.repeat_interleave(group_size, dim=0)) for k, v in cache]


@torch.no_grad()
def sample(
    model: TinyGPT,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    group_size: int,
    max_new: int,
    temperature: float,
    generator: torch.Generator | None,
) -> Rollouts:
    """``group_size`` completions per prompt; ``temperature <= 0`` is greedy."""
    ids = prompt_ids.repeat_interleave(group_size, dim=0)  # [N*G, P]
    mask = prompt_mask.repeat_interleave(group_size, dim=0)
    rows = ids.shape[0]
    next_pos = mask.sum(dim=1, keepdim=True)  # [N*G, 1]
    step_logits, cache = _prefill(model, prompt_ids, prompt_mask, group_size)  # [N*G, V]
    key_mask = mask
    done = torch.zeros(rows, dtype=torch.bool, device=ids.device)
    toks, logps, valid = [], [], []
    for _ in range(max_new):
        step_logits = step_logits.float()
        if temperature > 0:
            logp_all = torch.log_softmax(step_logits / temperature, dim=-1)
            tok = torch.multinomial(logp_all.exp(), 1, generator=generator).squeeze(1)
        else:
            logp_all = torch.log_softmax(step_logits, dim=-1)
            tok = logp_all.argmax(dim=-1)
        live = ~done
        tok = torch.where(live, tok, torch.full_like(tok, PAD))
        toks.append(tok)
        logps.append(
            torch.where(live, logp_all.gather(1, tok[:, None]).squeeze(1), torch.zeros_like(tok, dtype=logp_all.dtype))
        )
        valid.append(live)
        done = done | (tok == EOS)
        if bool(done.all()):
            break
        key_mask = torch.cat([key_mask, live[:, None]], dim=1)
        logits, cache = model(tok[:, None], key_mask, next_pos, cache)
        step_logits = logits[:, -1, :]
        next_pos = next_pos + 1
    return Rollouts(ids, mask, torch.stack(toks, 1), torch.stack(logps, 1), torch.stack(valid, 1))


def completion_logprobs(
    model: TinyGPT,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    tokens: torch.Tensor,
    mask: torch.Tensor,
    temperature: float = 1.0,
    group_size: int = 1,
) -> torch.Tensor:
    """Log-probs ``[B, T]`` of ``tokens`` given the prompts, with gradients (the training forward).

    ``group_size``: rows come in runs of that many sharing one prompt (a GRPO group, as :func:`sample`
    returns them); each prompt is then run once and its KV cache shared by its rows, the same log-probs
    for about half the work on short completions.
    """
    if group_size > 1:
        first, cache = _prefill(model, prompt_ids[::group_size], prompt_mask[::group_size], group_size)  # [B, V]
        key_mask = torch.cat([prompt_mask, mask], dim=1)
        pos = _shift(key_mask)[:, prompt_ids.shape[1] :]
        logits, _ = model(tokens, key_mask, pos, cache)  # [B, T, V]: column t predicts completion token t+1
        step_logits = torch.cat([first[:, None, :], logits[:, :-1, :]], dim=1).float()
    else:
        ids = torch.cat([prompt_ids, tokens], dim=1)  # [B, P+T]
        key_mask = torch.cat([prompt_mask, mask], dim=1)
        logits, _ = model(ids, key_mask, _shift(key_mask))
        p = prompt_ids.shape[1]
        step_logits = logits[:, p - 1 : -1, :].float()  # column p-1+t predicts completion token t
    if temperature > 0:
        step_logits = step_logits / temperature
    logp = torch.log_softmax(step_logits, dim=-1).gather(2, tokens[:, :, None]).squeeze(2)
    return logp * mask


def greedy(model: TinyGPT, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, max_new: int) -> torch.Tensor:
    """Greedy completions ``[N, T]`` (one per prompt), for evaluation."""
    return sample(model, prompt_ids, prompt_mask, 1, max_new, 0.0, None).tokens
