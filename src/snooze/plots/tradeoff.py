"""Figure 4: what each arm paid in generation against what it ended at, one point per seed.

The trade-off of a skipping policy at a glance: left is cheaper, up is better. Two columns: the final
accuracy (the last evaluation) and the late one (the mean of the last
:data:`~snooze.logs.LATE_EVALS` evaluations after the base's, which one dip at the end moves less; the
summary table has both). The top row shows every arm; the bottom row zooms on DAPO's accuracy, where
differences of a point or two between the skipping arms are otherwise too small to see. DAPO's
accuracy is drawn as a band of +-1 point (the reference experiment's "same accuracy"), and DAPO's
generation divided by 1.5 and by 3 as vertical lines (the targets the issue set), beside "one round
per step" (every group generated trained on: the floor no policy can pass).
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from snooze.logs import LATE_EVALS, late_evaluations
from snooze.plots._mpl import pyplot
from snooze.plots.efficiency import Records, accuracy_key
from snooze.plots.style import arm_color, arm_label

__all__ = ["figure_tradeoff", "final_point", "late_point", "TRADEOFF_ARMS"]

logger = logging.getLogger(__name__)

TRADEOFF_ARMS = ("dynamic_sampling", "grpo", "filter", "snooze-f1", "snooze-f2", "snooze", "predictive")
"""Arms of figure 4, in legend order (the figure-3 arms train on other data and are left out)."""

_MARKERS = {
    "dynamic_sampling": "s",
    "grpo": "v",
    "filter": "X",
    "snooze-f1": "<",
    "snooze-f2": ">",
    "snooze": "o",
    "predictive": "*",
}
_SAME = 0.01  # +-1 point of DAPO's accuracy: "the same final accuracy"


def _groups_and_evals(records: Records, key: str) -> tuple[float, Records] | None:
    """One run's last ``total/gen_groups`` and its lines that evaluated ``key`` (``None`` when it
    logged neither)."""
    groups = [r["total/gen_groups"] for r in records if r.get("total/gen_groups") is not None]
    evals = [r for r in records if r.get(key) is not None]
    return (float(groups[-1]), evals) if groups and evals else None


def final_point(records: Records, key: str) -> tuple[float, float] | None:
    """``(total generated groups, final accuracy)`` of one run: its last step's total and its last
    evaluation (``None`` when it logged neither)."""
    got = _groups_and_evals(records, key)
    return None if got is None else (got[0], float(got[1][-1][key]))


def late_point(records: Records, key: str) -> tuple[float, float] | None:
    """``(total generated groups, late accuracy)`` of one run: its last step's total and the mean of
    ``key`` over its late evaluations (:func:`~snooze.logs.late_evaluations`; ``None`` as for
    :func:`final_point`)."""
    got = _groups_and_evals(records, key)
    return None if got is None else (got[0], float(np.mean([r[key] for r in late_evaluations(got[1])])))


_PANELS = (
    ("final", final_point, "the last evaluation"),
    ("late", late_point, f"the mean of the last {LATE_EVALS} evaluations"),
)
"""Figure 4's columns: ``(when, point of a run, what the accuracy is)``."""


def figure_tradeoff(runs: dict[str, list[Records]]) -> Any | None:
    """Figure 4: generated groups (x) against held-out accuracy (y), final (left) and late (right),
    every arm, seeds as points; with DAPO present, a second row zooms on DAPO's accuracy, where the
    skipping arms are."""
    arms = [a for a in TRADEOFF_ARMS if runs.get(a)] + sorted(
        a for a in runs if a not in TRADEOFF_ARMS and not a.startswith("fig3-")
    )
    key = accuracy_key({a: runs[a] for a in arms})
    panels = []
    for when, point, ylabel in _PANELS:
        pts = {a: [p for p in (point(r, key) for r in runs[a]) if p is not None] for a in arms}
        panels.append((when, ylabel, {a: np.array(p) for a, p in pts.items() if p}))
    if not panels[0][2]:
        logger.info("figure 4 skipped: no arm logged generated groups and a final evaluation")
        return None
    plt = pyplot()
    zoom = "dynamic_sampling" in panels[0][2]
    fig, axes = plt.subplots(2 if zoom else 1, 2, figsize=(17, 11.5 if zoom else 6.4), sharex=True, squeeze=False)
    what = "avg@k" if key.startswith("eval/sampled") else "greedy"
    for col, (when, meaning, points) in enumerate(panels):
        _draw(axes[0][col], points, runs, f"{when} held-out accuracy ({what})")
        axes[0][col].set_title(f"{_title(points, when)}\n({when}: {meaning})", fontsize=11)
        if zoom:
            lo, hi = _zoom(points["dynamic_sampling"])
            _draw(axes[1][col], points, runs, f"{when} held-out accuracy ({what})")
            axes[1][col].set_ylim(lo, hi)
            axes[1][col].set_title(
                f"the same, zoomed on DAPO's {when} accuracy "
                f"({_ZOOM_BELOW * 100:.0f} points below to {_ZOOM_ABOVE * 100:.0f} above)",
                fontsize=10,
            )
    for ax in axes[:-1].flat:
        ax.set_xlabel("")
    axes[0][1].legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=9, frameon=False)
    n = max(len(p) for p in panels[0][2].values())
    fig.text(
        0.99,
        0.01,
        f"Small markers: one seed each ({n} per arm at most); large: the mean over seeds.",
        ha="right",
        va="bottom",
        fontsize=8,
        color="#555555",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


_ZOOM_BELOW, _ZOOM_ABOVE = 0.06, 0.03  # the zoomed row: DAPO's mean accuracy -6 to +3 points


def _zoom(dapo: np.ndarray) -> tuple[float, float]:
    acc = float(dapo[:, 1].mean())
    return acc - _ZOOM_BELOW, acc + _ZOOM_ABOVE


def _draw(ax: Any, points: dict[str, np.ndarray], runs: dict[str, list[Records]], ylabel: str) -> None:
    """One panel: DAPO's guides, then each arm's seeds (small) and mean (large)."""
    from matplotlib.ticker import PercentFormatter

    dapo = points.get("dynamic_sampling")
    if dapo is not None:
        _dapo_guides(ax, dapo, runs["dynamic_sampling"])
    for arm, pts in points.items():
        color, marker = arm_color(arm), _MARKERS.get(arm, "D")
        ax.scatter(pts[:, 0], pts[:, 1], color=color, marker=marker, s=46, alpha=0.55, linewidths=0)
        mean = pts.mean(axis=0)
        ax.scatter(
            [mean[0]],
            [mean[1]],
            color=color,
            marker=marker,
            s=170,
            edgecolors="black",
            linewidths=0.8,
            label=arm_label(arm),
        )
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=0))
    ax.set(xlabel="generated groups over the run (fewer is cheaper)", ylabel=ylabel)
    ax.xaxis.set_tick_params(labelbottom=True)
    ax.grid(alpha=0.3)


def _dapo_guides(ax: Any, dapo: np.ndarray, records: list[Records]) -> None:
    """DAPO's accuracy +-1 point, its generation / 1.5 and / 3, and one round per step."""
    groups, acc = dapo[:, 0].mean(), dapo[:, 1].mean()
    ax.axhspan(
        acc - _SAME,
        acc + _SAME,
        color=arm_color("dynamic_sampling"),
        alpha=0.08,
        linewidth=0,
        label="DAPO's accuracy +-1 point",
    )
    for div, style in ((1.5, ":"), (3.0, "--")):
        ax.axvline(groups / div, color="#555555", linestyle=style, linewidth=1.0, label=f"DAPO / {div:g}")
    trained = [r[-1].get("total/train_groups") for r in records if r]
    trained = [t for t in trained if t is not None]
    if trained:
        ax.axvline(
            float(np.mean(trained)), color="black", linewidth=1.2, label="one round per step (all groups trained on)"
        )


def _title(points: dict[str, np.ndarray], when: str = "final") -> str:
    """The finding: each arm's generation against DAPO's and its accuracy gap (``when``: final or
    late), from the means."""
    if "dynamic_sampling" not in points:
        return f"Generated groups against {when} held-out accuracy"
    g0, a0 = points["dynamic_sampling"].mean(axis=0)
    best = [a for a in ("predictive", "snooze") if a in points]
    parts = []
    for arm in best:
        g, a = points[arm].mean(axis=0)
        parts.append(f"{arm_label(arm)}: {g0 / g:.2f}x fewer groups than DAPO, {100 * (a - a0):+.1f} points")
    return f"Generation against {when} accuracy\n" + ("\n".join(parts) if parts else "DAPO and the other arms")
