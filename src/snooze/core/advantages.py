"""GRPO advantages as pure, vectorised functions.

GRPO (Shao et al. 2024, https://arxiv.org/abs/2402.03300) centres each rollout's reward on its
group's mean and divides by the group's std. Dr. GRPO (Liu et al. 2025,
https://arxiv.org/abs/2503.20783) drops the division, which biases towards neither easy nor hard
groups; scaling by one batch-wide std is the middle ground some recipes use.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from snooze.core._checks import as_real
from snooze.core.classify import group_means, reward_array
from snooze.core.errors import ConfigError, RewardError

__all__ = ["grpo_advantages", "scaled_advantages", "ADVANTAGE_SCALES"]


def _scale_group(centred: np.ndarray, rewards: np.ndarray, eps: float) -> np.ndarray:
    # Sample std (ddof=1), as TRL and verl compute it: a [1, 0, 0, 0] group scores [1.5, -.5, -.5, -.5].
    G = centred.shape[1]
    if G < 2:
        return centred / (rewards.std(axis=1, ddof=1, keepdims=True) + eps)
    std = np.sqrt(np.square(centred.T).sum(axis=0) / (G - 1))  # [N]; .T: numpy reduces a short inner axis slowly
    return centred / (std[:, None] + eps)


def _scale_batch(centred: np.ndarray, rewards: np.ndarray, eps: float) -> np.ndarray:
    return centred / (rewards.std(ddof=1) + eps) if rewards.size > 1 else centred


def _scale_none(centred: np.ndarray, rewards: np.ndarray, eps: float) -> np.ndarray:
    return centred


ADVANTAGE_SCALES: dict[str, Callable[[np.ndarray, np.ndarray, float], np.ndarray]] = {
    "group": _scale_group,
    "batch": _scale_batch,
    "none": _scale_none,
}


def grpo_advantages(rewards: np.ndarray, scale: str = "group", eps: float = 1e-6) -> np.ndarray:
    """Per-rollout advantages. ``rewards``: ``[N, G]``; returns float64 ``[N, G]``.

    ``scale``: ``"group"`` (GRPO), ``"batch"`` (one std over the batch), ``"none"`` (Dr. GRPO).
    ``eps`` keeps zero-spread groups at exactly 0 instead of 0/0.

    One right answer in four: mean 0.25, sample std 0.5 (``"none"`` only centres):

    >>> grpo_advantages(np.array([[1.0, 0.0, 0.0, 0.0]])).round(4).tolist()  # eps = 1e-6 in the denominator
    [[1.5, -0.5, -0.5, -0.5]]
    >>> grpo_advantages(np.array([[1.0, 0.0, 0.0, 0.0]]), "none").tolist()
    [[0.75, -0.25, -0.25, -0.25]]
    """
    if not isinstance(scale, str) or scale not in ADVANTAGE_SCALES:
        raise ConfigError(f"advantage scale {scale!r}: must be one of {sorted(ADVANTAGE_SCALES)}")
    eps = as_real(eps, "eps", 0.0)
    r = reward_array(rewards, "pass a float array shaped [groups, group_size]")
    if r.ndim != 2:
        raise RewardError(f"rewards must be 2-D [groups, group_size], got shape {r.shape}")
    if scale == "group" and r.shape[0] and r.shape[1] < 2:
        raise RewardError(
            f"rewards have shape {r.shape}: a group of one rollout has no std; GRPO needs group_size >= 2"
        )
    if not np.isfinite(r).all():
        raise RewardError("rewards hold NaN or infinite values; advantages of them are meaningless")
    return scaled_advantages(r, scale, eps)


def scaled_advantages(r: np.ndarray, scale: str, eps: float) -> np.ndarray:
    """:func:`grpo_advantages` of checked arguments (the scheduler's batch)."""
    if r.shape[0] == 0:
        return r.copy()
    centred = r - group_means(r)[:, None]  # [N, G]
    return ADVANTAGE_SCALES[scale](centred, r, eps)
