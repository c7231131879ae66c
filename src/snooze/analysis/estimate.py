"""The replay's headline: the rollouts (and groups, and tokens) a policy would have generated for the log's run,
with an interval.

For each policy the replay knows which logged encounters it would have skipped (``skipped``, ``bool [N]``).
Skipping a group saves its generation, but a skipped group that had signal in the log is a signal group the
policy's run must generate elsewhere to train on as many. Taking those replacements at the rate the policy's
kept encounters carry signal, the policy generates

    groups = (N - K) * S / (S - M)

for the log's ``S`` signal groups, where ``N`` groups were logged, ``K`` skipped and ``M`` of the skipped
had signal ("at equal signal").

**Rollouts and tokens.** The same estimate in any unit a group has a size in: a group's rollouts (its count of
rewards in the log) and, where the log gives them, its generated tokens. With ``W`` the log's total in that unit,
``W_K`` the skipped groups' and the replacements drawn from the kept encounters (so at their mean size),

    cost = (W - W_K) * S / (S - M)

(``groups`` is the case of a size of 1 per group). Tokens vary from group to group, so their saving is not the
groups' saving: a policy that skips too-easy prompts, whose answers are often short, saves a smaller share of
tokens than of rollouts. On the reference experiment this is the estimate that lands nearest a real
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

from collections.abc import Mapping
from typing import Any

import numpy as np

from snooze._kit.checks import as_int

__all__ = ["headline", "RESAMPLES", "LEVEL", "UNITS"]

RESAMPLES = 1000
"""Bootstrap resamples: the 2.5% and 97.5% quantiles of 1,000 move by well under a point between seeds."""

LEVEL = 0.95
"""Central share of the resampled estimates the interval holds."""

UNITS = ("rollouts", "tokens")
"""The sizes a group's cost is counted in beside its count (:func:`headline`'s ``sizes``)."""

_CHUNK_BYTES = 64 << 20
"""Memory the resampled counts of one chunk may take (8 bytes per prompt and resample, beside one resample's
draws): a 1M-prompt log resamples 8 at a time, a 500-prompt log all 1,000 at once. A chunk is one matrix product
with the prompts' sums, so the sums are read once per chunk, not once per resample. Every row is drawn from one
generator in turn, as the unchunked computation drew them (a ``[b, P]`` draw equals ``b`` draws of ``[P]``), so
the result does not depend on the chunk size: bit for bit the same (``tests/analysis/test_estimate.py``)."""


def _cost_ratio(w: np.ndarray, wk: np.ndarray, s: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``cost / W`` (module docstring) from the log's total ``w``, the skipped groups' ``wk`` and the signal
    groups ``s``, ``m``; NaN where every signal group is missed, or the log's total is 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(s > 0, s / (s - m), 1.0)  # no signal in the log: nothing to replace
        cost = np.where(s - m > 0, (w - wk) * scale, np.where(s > 0, np.nan, w - wk))
        return np.where(w > 0, cost / w, np.nan)


def _ratios(sums: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``groups / N``, ``M / K`` and ``M / S`` from ``[..., 4]`` sums of (N, K, S, M); NaN where undefined."""
    n, k, s, m = (sums[..., i] for i in range(4))
    with np.errstate(divide="ignore", invalid="ignore"):
        return _cost_ratio(n, k, s, m), np.where(k > 0, m / k, np.nan), np.where(s > 0, m / s, np.nan)


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


def _prompt_sums(
    prompt: np.ndarray,
    signal: np.ndarray,
    skipped: dict[str, np.ndarray],
    n_prompts: int,
    cols: np.ndarray | None = None,
) -> np.ndarray:
    """``[P, 2 + 2 * policies]``: each prompt's N and S, then each policy's K and M (one copy of N and S for all),
    written into ``cols`` where given (a view of the columns of every unit, so they are held once)."""
    if cols is None:
        cols = np.empty((n_prompts, 2 + 2 * len(skipped)))
    cols[:, 0] = np.bincount(prompt, minlength=n_prompts)
    cols[:, 1] = np.bincount(prompt, weights=signal, minlength=n_prompts)
    for q, mask in enumerate(skipped.values()):
        cols[:, 2 + 2 * q] = np.bincount(prompt, weights=mask, minlength=n_prompts)
        cols[:, 3 + 2 * q] = np.bincount(prompt, weights=mask & signal, minlength=n_prompts)
    return cols


def _size_sums(
    prompt: np.ndarray, signal: np.ndarray, skipped: dict[str, np.ndarray], size: np.ndarray, cols: np.ndarray
) -> None:
    """Into ``cols`` (``[P, 1 + 2 * policies]``): each prompt's total ``size`` (a group's rollouts or tokens), then
    each policy's skipped groups' and skipped signal groups' totals."""
    n_prompts = cols.shape[0]
    size = size.astype(np.float64)
    cols[:, 0] = np.bincount(prompt, weights=size, minlength=n_prompts)
    for q, mask in enumerate(skipped.values()):
        cols[:, 1 + 2 * q] = np.bincount(prompt, weights=np.where(mask, size, 0), minlength=n_prompts)
        cols[:, 2 + 2 * q] = np.bincount(prompt, weights=np.where(mask & signal, size, 0), minlength=n_prompts)


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
    sizes: Mapping[str, np.ndarray | None] | None = None,
) -> dict[str, dict[str, Any]]:
    """The headline of each policy (module docstring), keyed by policy name.

    ``prompt``: ``int [N]`` dense prompt index of each logged group; ``signal``: ``bool [N]``; ``skipped``:
    policy name -> ``bool [N]``; ``sizes``: unit of :data:`UNITS` -> each group's size in it (``int [N]``:
    ``rollouts``, its count of rewards; ``tokens``, its generated tokens), ``None`` or absent where not known.
    Each entry: ``log_groups`` (N), ``groups`` and ``groups_interval`` (``None``
    when every signal group would be missed), ``saved_frac`` and ``saved_interval`` (1 - groups / N),
    ``skipped_groups`` (K), ``skipped_with_signal`` (M), ``signal_groups`` (S), ``missed_share`` and
    ``missed_share_interval`` (M / S, the share of all the log's signal the policy would have skipped; ``None``
    when the log has no signal), ``risk`` and ``risk_interval`` (M / K; ``None`` when nothing is skipped),
    ``prompts``, ``resamples``, ``level``; and for each unit ``u`` of :data:`UNITS` (each ``None`` when its sizes
    are not known): ``log_<u>`` (W), ``<u>`` and ``<u>_interval`` (the cost in that unit), ``<u>_saved_frac``
    and ``<u>_saved_interval`` (1 - cost / W), ``skipped_<u>`` (W_K) and ``skipped_<u>_with_signal`` (the
    skipped signal groups' total), and ``<u>_known``. The resamples are the same draws for every unit, so the
    units' numbers are of one bootstrap; a unit in which every group has one size (a log's rollouts: its G) is
    the groups' numbers times that size, with no columns of its own.
    """
    as_int(resamples, "resamples", 1)
    n_prompts = int(prompt.max()) + 1 if prompt.size else 0
    known = {u: np.asarray(v) for u, v in (sizes or {}).items() if u in UNITS and v is not None}
    same = {u: float(v[0]) for u, v in known.items() if v.size and v[0] > 0 and not np.any(v != v[0])}
    summed = {u: v for u, v in known.items() if u not in same}  # one size for every group: the groups' numbers x it
    base = 2 + 2 * len(skipped)
    cols = np.empty((n_prompts, base + len(summed) * (1 + 2 * len(skipped))))  # held once: 8 bytes a prompt a column
    _prompt_sums(prompt, signal, skipped, n_prompts, cols[:, :base])  # [P, 2 + 2 * policies]
    for j, size in enumerate(summed.values()):  # [P, 1 + 2 * policies] each
        at = base + j * (1 + 2 * len(skipped))
        _size_sums(prompt, signal, skipped, size, cols[:, at : at + 1 + 2 * len(skipped)])
    sums = _resampled(cols, resamples, seed)
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
        for u in UNITS:
            out[name].update(_unknown(u) if u not in same else _scaled(u, out[name], same[u]))
        for j, u in enumerate(summed):
            at = base + j * (1 + 2 * len(skipped))
            cols_u = [at, at + 1 + 2 * q, at + 2 + 2 * q]  # W, W_K, the skipped signal groups' total
            out[name].update(_in_unit(u, totals[cols_u], total, sums[:, cols_u], _of_policy(sums, q), level))
    return out


def _unknown(unit: str) -> dict[str, Any]:
    """A unit's headline fields when its sizes are not known: each ``None``."""
    keys = (f"log_{unit}", unit, f"{unit}_interval", f"{unit}_saved_frac", f"{unit}_saved_interval")
    keys += (f"skipped_{unit}", f"skipped_{unit}_with_signal")
    return {**dict.fromkeys(keys), f"{unit}_known": False}


def _scaled(unit: str, h: Mapping[str, Any], size: float) -> dict[str, Any]:
    """A unit's headline fields when every group has the same ``size`` (a log's rollouts: G each): the groups'."""

    def times(value: Any) -> Any:
        return None if value is None else [v * size for v in value] if isinstance(value, list) else value * size

    return {
        f"log_{unit}": int(h["log_groups"] * size),
        unit: times(h["groups"]),
        f"{unit}_interval": times(h["groups_interval"]),
        f"{unit}_saved_frac": h["saved_frac"],
        f"{unit}_saved_interval": h["saved_interval"],
        f"skipped_{unit}": int(h["skipped_groups"] * size),
        f"skipped_{unit}_with_signal": int(h["skipped_with_signal"] * size),
        f"{unit}_known": True,
    }


def _in_unit(
    unit: str, sizes: np.ndarray, groups: np.ndarray, b_sizes: np.ndarray, b_groups: np.ndarray, level: float
) -> dict[str, Any]:
    """A unit's headline fields from its totals (W, W_K, W_M) and the groups' (N, K, S, M), and their resamples."""
    w = float(sizes[0])
    ratio = float(_cost_ratio(sizes[0], sizes[1], groups[2], groups[3]))
    inter = _interval(_cost_ratio(b_sizes[:, 0], b_sizes[:, 1], b_groups[:, 2], b_groups[:, 3]), level)
    bad = np.isnan(ratio)
    return {
        f"log_{unit}": int(w),
        unit: None if bad else ratio * w,
        f"{unit}_interval": None if inter is None or bad else [inter[0] * w, inter[1] * w],
        f"{unit}_saved_frac": None if bad else 1.0 - ratio,
        f"{unit}_saved_interval": None if inter is None or bad else [1.0 - inter[1], 1.0 - inter[0]],
        f"skipped_{unit}": int(sizes[1]),
        f"skipped_{unit}_with_signal": int(sizes[2]),
        f"{unit}_known": True,
    }
