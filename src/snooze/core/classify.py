"""Reward checks and group classification (docs/concepts.md, "Prompts, groups, outcomes"), vectorised over groups.

Outcome codes are small integers so a whole report is one ``int8`` array:

====  ============  =====================================================
code  name          meaning
====  ============  =====================================================
0     ``signal``    rewards spread above the tolerance: the group teaches
1     ``too_easy``  no spread, mean >= ``easy_threshold`` of the range
2     ``too_hard``  no spread, mean <= ``hard_threshold`` of the range
3     ``flat``      no spread, mean in between (a constant partial reward)
====  ============  =====================================================
"""

from __future__ import annotations

import numpy as np

from snooze.core.errors import RewardError

__all__ = ["SIGNAL", "TOO_EASY", "TOO_HARD", "FLAT", "OUTCOME_NAMES", "check_rewards", "classify_groups", "group_means"]

SIGNAL, TOO_EASY, TOO_HARD, FLAT = 0, 1, 2, 3
OUTCOME_NAMES: tuple[str, ...] = ("signal", "too_easy", "too_hard", "flat")


def check_rewards(
    rewards: object, n_groups: int, group_size: int, reward_range: tuple[float, float]
) -> np.ndarray:
    """Return ``rewards`` as a float64 array ``[n_groups, group_size]`` or raise :class:`RewardError`.

    Nothing is clamped or dropped: a single bad value rejects the whole report, and the message
    names the first offending group and rollout.
    """
    try:
        arr = np.asarray(rewards, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise RewardError(
            f"rewards could not be read as numbers ({exc}); pass a float array shaped "
            f"[n_candidates={n_groups}, group_size={group_size}]"
        ) from None
    if arr.shape != (n_groups, group_size):
        raise RewardError(
            f"rewards have shape {arr.shape}, expected [n_candidates={n_groups}, group_size={group_size}]: "
            "one row per reported candidate, one column per rollout"
        )
    low, high = reward_range
    if arr.size and arr.min() >= low and arr.max() <= high:  # two reductions; NaN fails both comparisons
        return arr
    bad = ~np.isfinite(arr) | (arr < low) | (arr > high)
    if bad.any():
        g, r = (int(i) for i in np.argwhere(bad)[0])
        raise RewardError(
            f"reward {arr[g, r]!r} at group {g}, rollout {r} is "
            + ("not finite" if not np.isfinite(arr[g, r]) else f"outside reward_range [{low}, {high}]")
            + f" ({int(bad.sum())} bad value(s) in all); fix the reward function or set "
            "SchedulerConfig.reward_range; nothing was recorded"
        )
    return arr


def group_means(rewards: np.ndarray) -> np.ndarray:
    """Mean reward of each group. ``[N, G]`` -> ``[N]``.

    Summed over a transposed copy: numpy reduces over a short inner axis (G) about 5x slower."""
    r = np.asarray(rewards, dtype=np.float64)
    return np.ascontiguousarray(r.T).sum(axis=0) / r.shape[1]


def classify_groups(
    rewards: np.ndarray,
    reward_range: tuple[float, float] = (0.0, 1.0),
    easy_threshold: float = 0.99,
    hard_threshold: float = 0.01,
    signal_tol: float = 1e-6,
) -> np.ndarray:
    """Outcome code of each group. ``rewards``: ``[N, G]`` (already checked). Returns ``int8 [N]``.

    Signal is judged on the *population* std (ddof=0) in units of the range, so the verdict does
    not depend on G and a group of identical floats never counts as signal (its mean is its value,
    exactly). The std is computed only where the group's range leaves the verdict open.

    >>> classify_groups(np.array([[1.0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [0.5, 0.5, 0.5, 0.5]])).tolist()
    [0, 1, 2, 3]
    """
    low, high = reward_range
    span = high - low
    r = np.asarray(rewards, dtype=np.float64)
    cols = np.ascontiguousarray(r.T)  # [G, N]: numpy reduces over a short inner axis slowly; this is ~5x faster
    lo, hi = cols.min(axis=0), cols.max(axis=0)  # [N]
    spread = (hi - lo) / span  # range of the group in units of the reward range
    mean = (lo - low) / span  # exact for a constant group (every non-signal group below but the tiny-spread ones)
    # Population std >= range / sqrt(2G), so a group whose range exceeds tol * sqrt(2G) is signal
    # without computing its std; only groups with a nonzero range below that need the exact test.
    signal = spread > signal_tol * np.sqrt(2.0 * r.shape[1])
    unsure = np.flatnonzero((spread > 0) & ~signal)
    if unsure.shape[0]:
        norm = (r[unsure] - low) / span
        signal[unsure] = norm.std(axis=1) > signal_tol
        mean[unsure] = norm.mean(axis=1)
    out = np.full(r.shape[0], FLAT, dtype=np.int8)
    out[mean >= easy_threshold] = TOO_EASY
    out[mean <= hard_threshold] = TOO_HARD
    out[signal] = SIGNAL
    return out
