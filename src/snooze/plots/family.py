"""The regime family's frontier: one panel per regime, generated rollouts against late accuracy.

Every arm's seeds as small markers and their mean as a large one, DAPO's late accuracy +-1 point as a
band (the recommended setting's constraint), so a reader sees in each regime which arms save and which
lose accuracy. Drawn from each regime's ``summary.json`` (``snooze compare``'s output), as
:func:`snooze.experiments.summary_file.read_summary` reads and checks it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from snooze.plots._mpl import pyplot
from snooze.plots.style import arm_color, arm_label

__all__ = ["figure_family", "frontier_points", "cost_unit"]

_MARKERS = {
    "dynamic_sampling": "s",
    "snooze-f1-carry": "D",
    "snooze-f1-carry-screen4": "P",
    "snooze-f1": "<",
    "snooze-f2": ">",
    "snooze": "o",
    "predictive": "*",
}
"""The arms drawn (plain GRPO and the one-round mode, at a quarter of DAPO's generation or less and far below
its accuracy, would squash every panel; the table has them)."""
_LABELS = {"snooze": "data snoozing, factor 5"}


def cost_unit(summary: Mapping[str, Any]) -> str:
    """``"rollouts"`` when every arm of the summary counted them, else ``"groups"`` (older summaries): with partial
    groups a stopped screen is a group of k rollouts, so only rollouts compare arms."""
    return "rollouts" if all("rollouts" in entry for entry in summary.values()) else "groups"


def frontier_points(summary: dict[str, Any]) -> dict[str, np.ndarray]:
    """``{arm: [[generated rollouts (or groups: :func:`cost_unit`), late accuracy], ...]}`` per seed from one
    regime's summary."""
    out = {}
    key = "rollouts" if cost_unit(summary) == "rollouts" else "gen_groups"
    for arm, entry in summary.items():
        kind = "sampled" if "sampled" in entry.get("accuracy", {}) else "greedy"
        gen = entry[key]["by_seed"]
        late = entry["accuracy"][kind]["late"]["by_seed"]
        pts = [(float(g), float(a)) for g, a in zip(gen, late) if not (math.isnan(g) or math.isnan(a))]
        if pts:
            out[arm] = np.array(pts)
    return out


def figure_family(summaries: Mapping[str, dict[str, Any]], path: Path) -> Path | None:
    """Draw the frontier of every regime's summary (``{regime: summary.json's arms}``, read and checked by the
    caller) into ``path`` (PNG); ``None`` when there is none."""
    found = list(summaries.items())
    if not found:
        return None
    plt = pyplot()
    from matplotlib.ticker import PercentFormatter

    cols = min(3, len(found))
    rows = math.ceil(len(found) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.9 * rows), squeeze=False)
    for ax, (name, summary) in zip(axes.flat, found):
        points = frontier_points(summary)
        dapo = points.get("dynamic_sampling")
        if dapo is not None:
            acc = float(dapo[:, 1].mean())
            ax.axhspan(
                acc - 0.01,
                acc + 0.01,
                color=arm_color("dynamic_sampling"),
                alpha=0.10,
                linewidth=0,
                label="DAPO's late accuracy +-1 point",
            )
        for arm, pts in points.items():
            if arm not in _MARKERS:
                continue
            color, marker = arm_color(arm), _MARKERS.get(arm, "D")
            ax.scatter(pts[:, 0], pts[:, 1], color=color, marker=marker, s=40, alpha=0.5, linewidths=0)
            mean = pts.mean(axis=0)
            ax.scatter(
                [mean[0]],
                [mean[1]],
                color=color,
                marker=marker,
                s=150,
                edgecolors="black",
                linewidths=0.8,
                label=_LABELS.get(arm, arm_label(arm)),
            )
        ax.set_title(name, fontsize=12)
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=1))
        ax.set(xlabel=f"generated {cost_unit(summary)} (fewer is cheaper)", ylabel="late held-out avg@k")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(found) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=9, frameon=False)
    fig.suptitle(
        "The regime family: generation against late accuracy (small: one seed; large: the mean over seeds)", fontsize=13
    )
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
