"""The GRPO policy-gradient update: clipped ratio, token-level aggregation, optional KL to the base.

Loss (per token ``t`` of rollout ``i``, advantage ``A_i`` from the scheduler's batch):

    r = exp(logp_new - logp_old)                        # ratio against the rollout policy
    pg = -min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A)    # PPO clip; DAPO's asymmetric "clip-higher"
    kl = exp(logp_ref - logp_new) - (logp_ref - logp_new) - 1  # k3 estimator, >= 0 (Schulman 2020)
    loss = sum_{i,t} mask * (pg + beta * kl) / sum_{i,t} mask   # token-level mean (DAPO)

GRPO: https://arxiv.org/abs/2402.03300. DAPO (clip-higher, token-level loss): https://arxiv.org/abs/2503.14476.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from snooze.core.errors import ConfigError

__all__ = ["GRPOConfig", "grpo_loss"]


@dataclass(frozen=True)
class GRPOConfig:
    """The policy update's knobs."""

    lr: float = 1e-4
    """AdamW learning rate."""

    weight_decay: float = 0.0
    """AdamW weight decay."""

    clip_low: float = 0.2
    """Lower clip of the ratio: ``1 - clip_low``."""

    clip_high: float = 0.28
    """Upper clip of the ratio: ``1 + clip_high`` (DAPO's clip-higher keeps exploration alive)."""

    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the frozen base model; 0 turns it off (and skips the base forward)."""

    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""

    updates_per_batch: int = 1
    """Optimizer steps on each training batch; above 1 the ratio leaves 1 and the clip matters."""

    def __post_init__(self) -> None:
        for name in ("lr", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"GRPOConfig.{name}={getattr(self, name)!r}: must be > 0")
        for name in ("weight_decay", "clip_low", "clip_high", "kl_coef"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"GRPOConfig.{name}={getattr(self, name)!r}: must be >= 0")
        if self.clip_low >= 1:
            raise ConfigError(f"GRPOConfig.clip_low={self.clip_low}: must be below 1 (the ratio is positive)")
        if not (isinstance(self.updates_per_batch, int) and self.updates_per_batch >= 1):
            raise ConfigError(f"GRPOConfig.updates_per_batch={self.updates_per_batch!r}: must be an integer >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: GRPOConfig,
    ref_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Scalar loss and stats. ``logp``, ``old_logp``, ``ref_logp``, ``mask``: ``[B, T]``; ``advantages``: ``[B]``.

    Stats: ``clip_frac`` (share of tokens whose ratio was clipped against the advantage's sign),
    ``kl`` (mean k3 to the base, 0 without it), ``ratio`` (mean ratio).
    """
    m = mask.to(logp.dtype)
    n_tok = m.sum().clamp(min=1.0)
    ratio = torch.exp(logp - old_logp)  # [B, T]
    adv = advantages.to(logp.dtype)[:, None]  # [B, 1]
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - cfg.clip_low, 1.0 + cfg.clip_high) * adv
    per_tok = -torch.minimum(unclipped, clipped)  # [B, T]
    kl = torch.zeros_like(per_tok)
    if ref_logp is not None and cfg.kl_coef > 0:
        d = ref_logp - logp
        kl = torch.exp(d) - d - 1.0
        per_tok = per_tok + cfg.kl_coef * kl
    loss = (per_tok * m).sum() / n_tok
    with torch.no_grad():
        stats = {
            "clip_frac": float(((clipped < unclipped).to(m.dtype) * m).sum() / n_tok),
            "kl": float((kl * m).sum() / n_tok),
            "ratio": float((ratio * m).sum() / n_tok),
        }
    return loss, stats
