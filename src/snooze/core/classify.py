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

Signal is DAPO's rule (``dynamic_sampling`` keeps a group whose rewards are not all equal), with a
tolerance against float noise that is relative to the rewards' own size, never to ``reward_range``:
the range only says on which side a zero-spread group lies. With a ``reward_band`` a group whose mean
lies above the band counts as too easy and one below it as too hard, whatever its spread.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from snooze._kit.checks import as_int, check_band, check_reward_range, check_thresholds
from snooze.core.errors import ConfigError, RewardError

__all__ = [
    "SIGNAL",
    "TOO_EASY",
    "TOO_HARD",
    "FLAT",
    "OUTCOME_NAMES",
    "check_rewards",
    "classify_groups",
    "classify",
    "reward_array",
    "group_means",
]

SIGNAL, TOO_EASY, TOO_HARD, FLAT = 0, 1, 2, 3
OUTCOME_NAMES: tuple[str, ...] = ("signal", "too_easy", "too_hard", "flat")


def check_rewards(
    rewards: object, n_groups: int, group_size: int, reward_range: tuple[float, float], outside: str = "raise"
) -> np.ndarray:
    """Return ``rewards`` as a float64 array ``[n_groups, group_size]`` or raise :class:`RewardError`.

    Rewards are real numbers: floats, integers or booleans (``True`` is 1), from a list, a numpy
    array or anything numpy reads (a detached torch tensor on the CPU). Strings, bytes, complex
    numbers and objects are refused, never parsed or cut to their real part. Nothing is clamped or
    dropped: a single bad value rejects the whole report, and the message names the first offending
    group and rollout. ``outside="accept"`` (``SchedulerConfig.out_of_range``) lets finite rewards
    outside ``reward_range`` through, as they are; NaN and infinities are refused either way.

    The other arguments are checked as :class:`~snooze.SchedulerConfig` checks them: a count that is
    not an integer, a range that is not ``(low, high)``, an ``outside`` other than ``"raise"`` or
    ``"accept"`` is a :class:`~snooze.ConfigError` naming it.
    """
    n_groups = as_int(n_groups, "check_rewards: n_groups", 0)
    group_size = as_int(group_size, "check_rewards: group_size", 1)
    reward_range = check_reward_range(reward_range, "check_rewards: reward_range")
    if not isinstance(outside, str) or outside not in ("raise", "accept"):
        raise ConfigError(f"check_rewards: outside={outside!r}: must be 'raise' or 'accept' (as out_of_range)")
    arr = reward_array(rewards, f"pass a float array shaped [n_candidates={n_groups}, group_size={group_size}]")
    if arr.shape != (n_groups, group_size):
        raise RewardError(
            f"rewards have shape {arr.shape}, expected [n_candidates={n_groups}, group_size={group_size}]: "
            "one row per reported candidate, one column per rollout"
        )
    low, high = (-np.inf, np.inf) if outside == "accept" else reward_range
    if arr.size and arr.min() >= low and arr.max() <= high and (outside != "accept" or np.isfinite(arr).all()):
        return arr  # two reductions (NaN fails both comparisons; infinities pass (-inf, inf), hence the last test)
    bad = ~np.isfinite(arr) | (arr < low) | (arr > high)
    if bad.any():
        g, r = (int(i) for i in np.argwhere(bad)[0])
        raise RewardError(
            f"reward {float(arr[g, r])!r} at group {g}, rollout {r} is "
            + ("not finite" if not np.isfinite(arr[g, r]) else f"outside reward_range [{low}, {high}]")
            + f" ({int(bad.sum())} bad value(s) in all); fix the reward function or set "
            "SchedulerConfig.reward_range (or out_of_range='accept'); nothing was recorded"
        )
    return arr


def reward_array(rewards: object, want: str) -> np.ndarray:
    """``rewards`` as float64, only from real numbers (numpy kinds b, i, u, f); ``want`` says what to pass."""
    if isinstance(rewards, np.ndarray) and rewards.dtype == np.float64:
        arr = rewards  # the usual report: nothing to convert
    else:
        try:
            arr = np.asarray(rewards)
        except Exception as exc:  # any array-like may fail its own way (a tensor that requires grad, a ragged list)
            hint = " (a torch tensor: pass rewards.detach().cpu())" if hasattr(rewards, "detach") else ""
            raise RewardError(
                f"rewards could not be read as an array ({type(exc).__name__}: {exc}){hint}; {want}"
            ) from None
    if arr.dtype.kind not in "biuf":
        raise RewardError(
            f"rewards must be real numbers (float, int or bool), got an array of {arr.dtype} "
            f"({_kind_name(arr.dtype.kind)}); {want}"
        )
    return arr.astype(np.float64, copy=False)


def _kind_name(kind: str) -> str:
    return {
        "U": "strings",
        "S": "bytes",
        "c": "complex numbers",
        "O": "Python objects: None, an int too large for a float, or a mix of types",
        "M": "dates",
        "m": "time spans",
        "V": "raw records",
    }.get(kind, "not numbers")


def group_means(rewards: np.ndarray) -> np.ndarray:
    """Mean reward of each group. ``[N, G]`` -> ``[N]``.

    Summed over a transposed copy: numpy reduces over a short inner axis (G) about 5x slower. A group of
    finite rewards whose sum overflows (rewards near ``1e308``) is summed again divided by a power of
    two near its largest magnitude: its mean is finite, never ``inf``; every other mean is unchanged."""
    r = np.asarray(rewards, dtype=np.float64)
    with np.errstate(over="ignore"):
        means = np.ascontiguousarray(r.T).sum(axis=0) / r.shape[1]
    if not np.isfinite(means).all():
        over = ~np.isfinite(means) & np.isfinite(r).all(axis=1)  # (a NaN or an infinite reward stays as it is)
        if over.any():
            rows = r[over]
            s = np.ldexp(1.0, np.frexp(np.abs(rows).max(axis=1))[1] - 1)  # a power of two in (max / 2, max]
            means[over] = (np.ascontiguousarray((rows / s[:, None]).T).sum(axis=0) / r.shape[1]) * s
    return means


def classify_groups(
    rewards: npt.ArrayLike,
    reward_range: tuple[float, float] = (0.0, 1.0),
    easy_threshold: float = 0.99,
    hard_threshold: float = 0.01,
    signal_tol: float = 1e-6,
    reward_band: tuple[float, float] | None = None,
    out_of_range: str = "raise",
) -> np.ndarray:
    """Outcome code of each group. ``rewards``: ``[N, G]`` real numbers in ``reward_range``. Returns ``int8 [N]``.

    Checks its arguments as :class:`~snooze.SchedulerConfig` and :meth:`~snooze.Scheduler.report` do
    (:class:`~snooze.ConfigError` for the range, thresholds and band, :class:`~snooze.RewardError` for
    the rewards). A group carries signal when the *population* std (ddof=0) of its rewards exceeds
    ``signal_tol * max(1, max |reward| of the group)``: the verdict does not depend on G nor on the
    range, and a group of identical floats never counts as signal (its mean is its value, exactly).

    >>> classify_groups(np.array([[1.0, 0, 1, 1], [1, 1, 1, 1], [0, 0, 0, 0], [0.5, 0.5, 0.5, 0.5]])).tolist()
    [0, 1, 2, 3]
    >>> classify_groups(np.array([[1.0, 0, 1, 1], [1, 0, 0, 0]]), reward_band=(0.2, 0.6)).tolist()  # means .75, .25
    [1, 0]
    """
    rr = check_reward_range(reward_range)
    easy, hard, tol = check_thresholds(easy_threshold, hard_threshold, signal_tol)
    band = check_band(reward_band)
    if out_of_range not in ("raise", "accept"):
        raise ConfigError(f"out_of_range={out_of_range!r}: must be 'raise' or 'accept'")
    arr = reward_array(rewards, "pass a float array shaped [groups, group_size]")
    if arr.ndim != 2 or arr.shape[1] < 1:
        raise RewardError(f"rewards have shape {arr.shape}, expected [groups, group_size] with group_size >= 1")
    return classify(check_rewards(arr, arr.shape[0], arr.shape[1], rr, out_of_range), rr, easy, hard, tol, band)


def classify(
    rewards: np.ndarray,
    reward_range: tuple[float, float],
    easy_threshold: float,
    hard_threshold: float,
    signal_tol: float,
    reward_band: tuple[float, float] | None = None,
) -> np.ndarray:
    """:func:`classify_groups` of arguments already checked (the scheduler's report path). ``[N, G]`` -> ``int8 [N]``.

    The std is computed only where the group's range leaves the verdict open."""
    low, high = reward_range
    span = high - low
    r = rewards
    cols = np.ascontiguousarray(r.T)  # [G, N]: numpy reduces over a short inner axis slowly; this is ~5x faster
    lo, hi = cols.min(axis=0), cols.max(axis=0)  # [N]
    # Float rounding is relative to the values rounded (float32, which TRL's rewards pass through, keeps
    # ~6e-8 of a value), so the tolerance scales with the group's largest |reward|, never with the range:
    # for rewards within [-1, 1] it is signal_tol itself.
    tol = signal_tol * np.maximum(1.0, np.maximum(np.abs(lo), np.abs(hi)))  # [N]
    spread = hi - lo
    mean = (lo - low) / span  # exact for a constant group (every non-signal group below but the tiny-spread ones)
    # Population std >= range / sqrt(2G), so a group whose range exceeds tol * sqrt(2G) is signal
    # without computing its std; only groups with a nonzero range below that need the exact test.
    signal = spread > tol * np.sqrt(2.0 * r.shape[1])
    unsure = np.flatnonzero((spread > 0) & ~signal)
    if unsure.shape[0]:
        signal[unsure] = r[unsure].std(axis=1) > tol[unsure]
        mean[unsure] = ((r[unsure] - low) / span).mean(axis=1)
    out = np.full(r.shape[0], FLAT, dtype=np.int8)
    out[mean >= easy_threshold] = TOO_EASY
    out[mean <= hard_threshold] = TOO_HARD
    out[signal] = SIGNAL
    if reward_band is not None:
        mean[signal] = (group_means(r[signal]) - low) / span
        out[mean > reward_band[1]] = TOO_EASY
        out[mean < reward_band[0]] = TOO_HARD
    return out
