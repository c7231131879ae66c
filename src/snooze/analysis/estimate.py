"""The replay's headline: the groups a policy would have generated for the log's run, with an interval.

For each policy the replay knows which logged encounters it would have skipped (``skipped``, ``bool [N]``).
Skipping a group saves its generation, but a skipped group that had signal in the log is a signal group the
policy's run must generate elsewhere to train on as many. Taking those replacements at the rate the policy's
kept encounters carry signal, the policy generates

    groups = (N - K) * S / (S - M)

for the log's ``S`` signal groups, where ``N`` groups were logged, ``K`` skipped and ``M`` of the skipped
had signal ("at equal signal"). On the reference experiment this is the estimate that lands nearest a real
run of the policy (``docs/offline-analysis.md``, "Replay against reality"); the step simulation and the raw
skipped share are kept as details.

**Interval.** Prompts are resampled with replacement (a bootstrap over the log's prompts: a prompt's
encounters stay together, as a policy's decisions about a prompt depend on each other) and the ratio
``groups / N`` is recomputed on each resample; the interval is its central ``level`` quantile range times
the log's ``N``. It measures how much the estimate depends on which prompts the run happened to draw, not
how far a real run of the policy drifts from the logged one (a real run trains another model).

**Missed signal.** What the replay can measure of the accuracy cost offline: the signal groups the policy
would have skipped, ``M``, and their share of all the log's signal, ``M / S``, with the same bootstrap
interval. The share of the *skipped* encounters that had signal (``M / K``, the "risk" per skip) is kept as
a detail: a rule that skips the most looks as safe by it while it misses the most signal. Whether missing
signal costs held-out accuracy is for a real run to say (:mod:`snooze.analysis.verdict` prints what this
project measured).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snooze._kit.checks import as_int

__all__ = ["headline", "RESAMPLES", "LEVEL"]

RESAMPLES = 1000
"""Bootstrap resamples: the 2.5% and 97.5% quantiles of 1,000 move by well under a point between seeds."""

LEVEL = 0.95
"""Central share of the resampled estimates the interval holds."""

_CHUNK_BYTES = 64 << 20
"""Memory the resampled counts of one chunk may take (8 bytes per prompt and resample, beside one resample's
draws): a 1M-prompt log resamples 8 at a time, a 500-prompt log all 1,000 at once. A chunk is one matrix product
with the prompts' sums, so the sums are read once per chunk, not once per resample. Every row is drawn from one
generator in turn, as the unchunked computation drew them (a ``[b, P]`` draw equals ``b`` draws of ``[P]``), so
the result does not depend on the chunk size: bit for bit the same (``tests/analysis/test_estimate.py``)."""


def _ratios(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``groups / N``, ``M / K`` and ``M / S`` from ``[..., 4]`` sums of (N, K, S, M); NaN where undefined."""
    n, k, s, m = (sums[..., i] for i in range(4))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(s > 0, s / (s - m), 1.0)  # no signal in the log: nothing to replace
        groups = np.where(s - m > 0, (n - k) * scale, np.where(s > 0, np.nan, n - k))
        return groups / n, np.where(k > 0, m / k, np.nan), np.where(s > 0, m / s, np.nan)


def _interval(values: np.ndarray, level: float) -> list[float] | None:
    finite = values[np.isfinite(values)]
    if finite.size < values.size * 0.9:  # undefined on many resamples: no honest interval
        return None
    lo, hi = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return [float(lo), float(hi)]


def chunk_rows(n_prompts: int, resamples: int) -> int:
    """Resamples drawn at once for ``n_prompts`` prompts: as many as :data:`_CHUNK_BYTES` holds, at least 1."""
    return max(1, min(resamples, _CHUNK_BYTES // (8 * max(n_prompts, 1))))


def _resampled(cols: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """``[resamples, C]``: sums of ``cols`` (``[P, C]``) over the log's prompts drawn with replacement.

    Chunked by :func:`chunk_rows`: its peak is one chunk's counts, not ``resamples x P`` at once (issue 51)."""
    n_prompts = cols.shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, cols.shape[1]))
    rows = chunk_rows(n_prompts, resamples)
    counts = np.empty((rows, n_prompts))  # [b, P] times each prompt is drawn in each resample of the chunk
    for start in range(0, resamples, rows):
        b = min(rows, resamples - start)
        for i in range(b):
            counts[i] = np.bincount(rng.integers(0, n_prompts, size=n_prompts), minlength=n_prompts)
        out[start : start + b] = counts[:b] @ cols  # exact: integer sums far below 2**53
    return out


def _prompt_sums(prompt: np.ndarray, signal: np.ndarray, skipped: dict[str, np.ndarray], n_prompts: int) -> np.ndarray:
    """``[P, 2 + 2 * policies]``: each prompt's N and S, then each policy's K and M (one copy of N and S for all)."""
    cols = np.empty((n_prompts, 2 + 2 * len(skipped)))
    cols[:, 0] = np.bincount(prompt, minlength=n_prompts)
    cols[:, 1] = np.bincount(prompt, weights=signal, minlength=n_prompts)
    for q, mask in enumerate(skipped.values()):
        cols[:, 2 + 2 * q] = np.bincount(prompt, weights=mask, minlength=n_prompts)
        cols[:, 3 + 2 * q] = np.bincount(prompt, weights=mask & signal, minlength=n_prompts)
    return cols


def _of_policy(sums: np.ndarray, q: int) -> np.ndarray:
    """``[..., 4]`` (N, K, S, M) of policy ``q`` from ``[..., 2 + 2 * policies]`` sums."""
    return np.stack([sums[..., 0], sums[..., 2 + 2 * q], sums[..., 1], sums[..., 3 + 2 * q]], axis=-1)


def headline(
    prompt: np.ndarray,
    signal: np.ndarray,
    skipped: dict[str, np.ndarray],
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """The headline of each policy (module docstring), keyed by policy name.

    ``prompt``: ``int [N]`` dense prompt index of each logged group; ``signal``: ``bool [N]``; ``skipped``:
    policy name -> ``bool [N]``. Each entry: ``log_groups`` (N), ``groups`` and ``groups_interval`` (``None``
    when every signal group would be missed), ``saved_frac`` and ``saved_interval`` (1 - groups / N),
    ``skipped_groups`` (K), ``skipped_with_signal`` (M), ``signal_groups`` (S), ``missed_share`` and
    ``missed_share_interval`` (M / S, the share of all the log's signal the policy would have skipped; ``None``
    when the log has no signal), ``risk`` and ``risk_interval`` (M / K; ``None`` when nothing is skipped),
    ``prompts``, ``resamples``, ``level``.
    """
    as_int(resamples, "resamples", 1)
    n_prompts = int(prompt.max()) + 1 if prompt.size else 0
    cols = _prompt_sums(prompt, signal, skipped, n_prompts)  # [P, 2 + 2 * policies]
    sums = _resampled(cols, resamples, seed)  # [resamples, 2 + 2 * policies]
    totals = cols.sum(axis=0)
    out: dict[str, dict[str, Any]] = {}
    for q, name in enumerate(skipped):
        total = _of_policy(totals, q)
        ratio, risk, missed = (float(x) for x in _ratios(total))
        b_ratio, b_risk, b_missed = _ratios(_of_policy(sums, q))
        n = float(total[0])
        inter = _interval(b_ratio, level)
        out[name] = {
            "log_groups": int(n),
            "groups": None if np.isnan(ratio) else ratio * n,
            "groups_interval": None if inter is None or np.isnan(ratio) else [inter[0] * n, inter[1] * n],
            "saved_frac": None if np.isnan(ratio) else 1.0 - ratio,
            "saved_interval": None if inter is None or np.isnan(ratio) else [1.0 - inter[1], 1.0 - inter[0]],
            "skipped_groups": int(total[1]),
            "skipped_with_signal": int(total[3]),
            "signal_groups": int(total[2]),
            "missed_share": None if np.isnan(missed) else missed,
            "missed_share_interval": None if np.isnan(missed) else _interval(b_missed, level),
            "risk": None if np.isnan(risk) else risk,
            "risk_interval": None if np.isnan(risk) else _interval(b_risk, level),
            "prompts": n_prompts,
            "resamples": resamples,
            "level": level,
        }
    return out
