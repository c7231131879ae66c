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

**Risk.** What the replay can measure of the accuracy cost offline: the share of the policy's skipped
encounters that had signal in the log (``M / K``), with the same bootstrap interval. Whether missing them
costs held-out accuracy is for a real run to say.
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

_CHUNK = 100  # resamples drawn at once: [100, prompts] counts at a time bounds memory on large logs


def _ratios(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``groups / N`` and ``M / K`` from ``[..., 4]`` sums of (N, K, S, M); NaN where undefined."""
    n, k, s, m = (sums[..., i] for i in range(4))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(s > 0, s / (s - m), 1.0)  # no signal in the log: nothing to replace
        groups = np.where(s - m > 0, (n - k) * scale, np.where(s > 0, np.nan, n - k))
        return groups / n, np.where(k > 0, m / k, np.nan)


def _interval(values: np.ndarray, level: float) -> list[float] | None:
    finite = values[np.isfinite(values)]
    if finite.size < values.size * 0.9:  # undefined on many resamples: no honest interval
        return None
    lo, hi = np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])
    return [float(lo), float(hi)]


def _resampled(stats: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """``[policies, resamples, 4]``: sums of ``stats`` (``[policies, P, 4]``) over prompts drawn with replacement."""
    n_policies, n_prompts, _ = stats.shape
    rng = np.random.default_rng(seed)
    flat = stats.transpose(1, 0, 2).reshape(n_prompts, -1)  # [P, policies * 4]: one product for all
    boots = []
    for start in range(0, resamples, _CHUNK):
        b = min(_CHUNK, resamples - start)
        draws = rng.integers(0, n_prompts, size=(b, n_prompts)) + n_prompts * np.arange(b)[:, None]  # [b, P]
        counts = np.bincount(draws.ravel(), minlength=b * n_prompts).reshape(b, n_prompts)  # times each prompt drawn
        boots.append((counts.astype(np.float64) @ flat).reshape(b, n_policies, 4).transpose(1, 0, 2))
    return np.concatenate(boots, axis=1)


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
    ``skipped_groups`` (K), ``skipped_with_signal`` (M), ``risk`` and ``risk_interval`` (M / K; ``None``
    when nothing is skipped), ``prompts``, ``resamples``, ``level``.
    """
    as_int(resamples, "resamples", 1)
    n_prompts = int(prompt.max()) + 1 if prompt.size else 0
    base = [np.bincount(prompt, minlength=n_prompts), np.bincount(prompt, weights=signal, minlength=n_prompts)]
    cols = []  # [P, 4] per policy: N, K, S, M of each prompt
    for mask in skipped.values():
        k = np.bincount(prompt, weights=mask, minlength=n_prompts)
        m = np.bincount(prompt, weights=mask & signal, minlength=n_prompts)
        cols.append(np.stack([base[0], k, base[1], m], axis=1).astype(np.float64))
    stats = np.stack(cols, axis=0) if cols else np.zeros((0, n_prompts, 4))  # [policies, P, 4]
    sums = _resampled(stats, resamples, seed)  # [policies, resamples, 4]
    out: dict[str, dict[str, Any]] = {}
    for q, name in enumerate(skipped):
        total = stats[q].sum(axis=0)
        ratio, risk = (float(x) for x in _ratios(total))
        b_ratio, b_risk = _ratios(sums[q])
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
            "risk": None if np.isnan(risk) else risk,
            "risk_interval": None if np.isnan(risk) else _interval(b_risk, level),
            "prompts": n_prompts,
            "resamples": resamples,
            "level": level,
        }
    return out
