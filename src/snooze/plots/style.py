"""Colours, labels and the one drawing primitive (mean line + min-max band) shared by every figure.

Matplotlib is only imported by the callers of :func:`plot_band` (lazily), never by this module
at import time. Arm colours follow the design note's figure 2 (the design note is the blog post this project implements:
docs/concepts.md, "The design note"): DAPO red, filtering blue, snoozing green.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snooze.plots.metrics import SeedAggregate

__all__ = ["ARM_COLORS", "ARM_LABELS", "STRATUM_COLORS", "arm_color", "arm_label", "plot_band", "window_mean"]

ARM_COLORS: dict[str, str] = {
    "grpo": "#7f7f7f",
    "dynamic_sampling": "#d62728",
    "filter": "#1f77b4",
    "snooze": "#2ca02c",
    "snooze-f1": "#98df8a",
    "snooze-f2": "#5cb85c",
    "snooze-f1-carry": "#00441b",
    "snooze-f1-carry-screen4": "#6a3d9a",
    "one-round": "#8c564b",
    "predictive": "#ff7f0e",
    "fig3-filter": "#1f77b4",
    "fig3-snooze": "#2ca02c",
    "fig3-snooze-quota": "#9467bd",
}
"""One colour per arm, the same in every figure."""

ARM_LABELS: dict[str, str] = {
    "grpo": "plain GRPO (no filtering)",
    "dynamic_sampling": "DAPO dynamic sampling",
    "filter": "difficulty filtering",
    "snooze": "data snoozing",
    "snooze-f1": "data snoozing, factor 1",
    "snooze-f2": "data snoozing, factor 2",
    "snooze-f1-carry": "recommended: snoozing factor 1, surplus carried",
    "snooze-f1-carry-screen4": "recommended + a screen of 4 rollouts first",
    "one-round": "one round a step, too-easy skipped (GRPO's budget)",
    "predictive": "predictive skipping",
    "fig3-filter": "difficulty filtering (stream mix)",
    "fig3-snooze": "data snoozing (stream mix)",
    "fig3-snooze-quota": "data snoozing (quota mix)",
}
"""Legend text per arm; unknown arms are labelled by their name."""

STRATUM_COLORS: dict[str, str] = {"easy": "#e69f00", "hard": "#56318f"}
"""Colours of the easy and hard strata in figure 3.

For datasets named ``easy:...``/``hard:...``, or ``...-easy``/``...-hard``.
"""

_FALLBACK = ("#8c564b", "#e377c2", "#17becf", "#bcbd22", "#ff7f0e")


def arm_color(arm: str) -> str:
    """The arm's colour; unknown arms get a stable colour from a fallback palette."""
    return ARM_COLORS.get(arm, _FALLBACK[sum(map(ord, arm)) % len(_FALLBACK)])


def arm_label(arm: str) -> str:
    """The arm's legend text."""
    return ARM_LABELS.get(arm, arm)


def plot_band(ax: Any, agg: SeedAggregate, color: str, label: str, **line_kw: Any) -> None:
    """Draw the mean over seeds as a line and, when there are several seeds, the min-max band."""
    if len(agg) == 0:
        return
    if agg.n_seeds > 1:
        ax.fill_between(agg.steps, agg.lo, agg.hi, color=color, alpha=0.18, linewidth=0)
    ax.plot(agg.steps, agg.mean, color=color, label=label, **line_kw)


def window_mean(values: np.ndarray, frac: float, last: bool) -> float:
    """Mean of the first (``last=False``) or last ``frac`` of the values, at least one point; nan if empty."""
    if values.size == 0:
        return float("nan")
    n = max(1, int(round(values.size * frac)))
    return float(np.mean(values[-n:] if last else values[:n]))
