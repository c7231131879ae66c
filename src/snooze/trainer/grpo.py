"""The GRPO policy-gradient update: clipped ratio, token-level aggregation, optional KL to the base.

Loss (per token ``t`` of rollout ``i``, advantage ``A_i`` from the scheduler's batch):

    r = exp(logp_new - logp_old)                        # ratio against the rollout policy
    pg = -min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A)    # PPO clip; DAPO's asymmetric "clip-higher"
    kl = exp(logp_ref - logp_new) - (logp_ref - logp_new) - 1  # k3 estimator, >= 0 (Schulman 2020)
    loss = sum_{i,t} mask * (pg + beta * kl) / sum_{i,t} mask   # token-level mean (DAPO)

GRPO: https://arxiv.org/abs/2402.03300. DAPO (clip-higher, token-level loss): https://arxiv.org/abs/2503.14476.
"""

from __future__ import annotations

import torch

from snooze.trainer.config import GRPOConfig

__all__ = ["GRPOConfig", "grpo_loss"]


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
    ``kl`` (mean k3 to the base, 0 without it), ``ratio`` and ``ratio_max`` (mean and largest ratio over the
    tokens: 1 on-policy, away from 1 when the rollouts came from older weights).
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
            "ratio_max": float(ratio.masked_fill(~mask.bool(), 0.0).max()),
        }
    return loss, stats
