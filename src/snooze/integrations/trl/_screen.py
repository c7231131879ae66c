"""Partial groups (``SchedulerConfig.screen_size``) in :class:`~snooze.integrations.trl.SnoozeGRPOTrainer`, one process.

A screened group's rollouts come from two generation rounds: the screen's k, then (if it passed) its rest of
``G - k`` under the same ticket. TRL computes advantages inside each generation call, over groups of
``num_generations`` rows, so each round generates each width in its own call (``num_generations`` set to
that width) and the advantages of a joined group are computed again here over its ``G`` rewards, exactly
as TRL computes them for a group of ``G`` (``multi_objective_aggregation="sum_then_normalize"``,
``scale_rewards`` ``"group"`` or ``"none"``). ``"batch"`` scaling and ``"normalize_then_sum"`` scale by a
whole round, which a joined group does not have: they are refused (``_checks.check_screening``).

TRL's formula changed once in the supported range: from 1.6.0 a completion that every reward function
left unscored (``None``) is left out of its group's mean and standard deviation and gets advantage 0;
before, its reward counted as 0 (:data:`UNSCORED_EXCLUDED_SINCE`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["UNSCORED_EXCLUDED_SINCE", "unscored_excluded", "group_advantages", "Screen"]

UNSCORED_EXCLUDED_SINCE = (1, 6, 0)  # TRL's first release that leaves unscored completions out of a group's baseline


def unscored_excluded(version: str) -> bool:
    """Whether TRL ``version`` leaves unscored completions out of a group's mean and std (an unreadable version,
    such as a git build, is taken as a recent one)."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(version)).release >= UNSCORED_EXCLUDED_SINCE
    except InvalidVersion:
        return True


def group_advantages(
    per_func: torch.Tensor, weights: torch.Tensor, scale_rewards: str, excluded: bool, nanstd: Any
) -> torch.Tensor:
    """TRL's advantages ``[G]`` of one group from its rewards ``per_func`` ``[G, reward functions]`` (NaN: a function
    that did not score a completion), the reward ``weights`` ``[functions]``, ``scale_rewards`` (``"group"`` or
    ``"none"``) and whether unscored completions are ``excluded`` (:func:`unscored_excluded`); ``nanstd`` is TRL's
    own (``trl.trainer.utils.nanstd``). The same operations as ``GRPOTrainer._generate_and_score_completions``."""
    G = per_func.shape[0]
    rewards = (per_func * weights.to(per_func.device).unsqueeze(0)).nansum(dim=1)
    if excluded:
        rewards[torch.isnan(per_func).all(dim=1)] = torch.nan
        mean = torch.nanmean(rewards.view(-1, G), dim=1).repeat_interleave(G, dim=0)
        std = nanstd(rewards.view(-1, G), dim=1) if G > 1 else torch.zeros(1, device=rewards.device)
    else:
        mean = rewards.view(-1, G).mean(dim=1).repeat_interleave(G, dim=0)
        std = rewards.view(-1, G).std(dim=1) if G > 1 else torch.zeros(1, device=rewards.device)
    std = std.repeat_interleave(G, dim=0)
    advantages = rewards - mean
    if scale_rewards != "none":
        advantages = advantages / (std + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0) if excluded else advantages


@dataclass
class Screen:
    """A screen's k rollouts, kept under its ticket until its rest comes (or the step ends: it stopped)."""

    rows: dict[str, torch.Tensor]  # its rows of TRL's generation output
    per_func: torch.Tensor  # [k, reward functions]: TRL's rewards of those rows
    rewards: np.ndarray  # [k]: the rewards reported to the scheduler
    tokens: int | None  # its completion tokens (None: not known)
