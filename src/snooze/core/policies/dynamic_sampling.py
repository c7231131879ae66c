"""``dynamic_sampling``: DAPO's dynamic sampling. Zero-signal groups are dropped and generation goes
on until the batch is full (Yu et al. 2025, https://arxiv.org/abs/2503.14476); prompts' futures are
unchanged, so a solved prompt is rolled out again at every encounter."""

from __future__ import annotations

from snooze.core.policies.base import Policy, register_policy

__all__ = ["DynamicSampling"]


@register_policy("dynamic_sampling")
class DynamicSampling(Policy):
    """DAPO: the base policy's defaults exactly (drop zero-signal groups, remember nothing)."""
