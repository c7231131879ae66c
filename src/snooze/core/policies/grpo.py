"""``grpo``: no filtering. Every group enters the batch (zero-signal ones add zero advantage)."""

from __future__ import annotations

from snooze.core.policies.base import Policy, register_policy

__all__ = ["GRPO"]


@register_policy("grpo")
class GRPO(Policy):
    """Plain GRPO: the batch is the first ``batch_size`` groups generated, whatever their signal."""

    trains_on_zero_signal = True
