"""GRPO advantages as pure, vectorised functions.

GRPO (Shao et al. 2024, https://arxiv.org/abs/2402.03300) centres each rollout's reward on its
group's mean and divides by the group's std. Dr. GRPO (Liu et al. 2025,
https://arxiv.org/abs/2503.20783) drops the division, which biases towards neither easy nor hard
groups; scaling by one batch-wide std is the middle ground some recipes use.

Rewards so large that a group's sum or its sum of squares overflows float64 (near ``1e154`` and above)
are not left to give all-zero or NaN advantages: the groups that overflow (the whole batch for
``"batch"``) are computed again on their rewards divided by a power of two near their largest
magnitude, which changes no digit of the quotient. Every other group keeps the value of the direct
formula, bit for bit.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from snooze._kit.checks import as_real
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
    adv = scaled_advantages(r, scale, eps)
    if not np.isfinite(adv).all():  # only "none": a centred reward beyond float64 (rewards ~1e308 apart)
        raise RewardError(
            "rewards are so far apart that their centred values exceed float64; rescale the rewards or use "
            "scale='group' / 'batch'"
        )
    return adv


def scaled_advantages(r: np.ndarray, scale: str, eps: float) -> np.ndarray:
    """:func:`grpo_advantages` of checked arguments (the scheduler's batch)."""
    if r.shape[0] == 0:
        return r.copy()
    try:
        with np.errstate(over="raise"):  # the usual case: the direct formula, nothing to check after it
            centred = r - group_means(r)[:, None]  # [N, G]
            return ADVANTAGE_SCALES[scale](centred, r, eps)
    except FloatingPointError:
        return _rescaled(r, scale, eps)


def _pow2_below(x: np.ndarray) -> np.ndarray:
    """A power of two in ``(x / 2, x]`` (``x`` > 0, finite): dividing by it is exact (short of subnormals)."""
    return np.ldexp(1.0, np.frexp(x)[1] - 1)


def _rescaled(r: np.ndarray, scale: str, eps: float) -> np.ndarray:
    """Advantages of rewards whose sums or squares overflow: those groups (the batch, for ``"batch"``)
    computed on ``r / s``, ``s`` a power of two at their largest magnitude; the rest as usual."""
    with np.errstate(over="ignore", invalid="ignore"):
        if scale == "batch":
            s = float(_pow2_below(np.abs(r).max()))
            small = r / s
            centred = small - group_means(small)[:, None]
            return centred / (small.std(ddof=1) + eps / s) if r.size > 1 else centred * s
        centred = r - group_means(r)[:, None]
        out = ADVANTAGE_SCALES[scale](centred, r, eps)
        bad = ~np.isfinite(out).all(axis=1) | ~np.isfinite(group_means(r))
        if scale == "group":
            bad |= ~np.isfinite(np.square(centred).sum(axis=1))  # an infinite std gave 0 for every rollout
        if not bad.any():
            return out
        rows = r[bad]
        s = _pow2_below(np.abs(rows).max(axis=1))[:, None]  # [B, 1]; > 0: a zero group overflows nothing
        small = rows / s
        c = small - group_means(small)[:, None]
        if scale == "group":
            std = np.sqrt(np.square(c).sum(axis=1, keepdims=True) / (r.shape[1] - 1))
            out[bad] = c / (std + eps / s)
        else:  # "none": centred rewards in their own units (infinite only beyond float64)
            out[bad] = c * s
        return out
