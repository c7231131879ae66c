"""Figure 3: how each stratum's share of the training batch drifts under filtering and snoozing.

Two strata of one task (datasets named ``<task>-easy`` and ``<task>-hard``) are mixed at equal
weight. Per arm, each stratum's ``dataset/<name>/batch_frac`` is smoothed per seed with a short
trailing moving average, then summarised over seeds, against the target share (its weight).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np

from snooze.plots._mpl import pyplot
from snooze.plots.efficiency import Records
from snooze.plots.metrics import SeedAggregate, aggregate_seeds, dataset_names, moving_average, series
from snooze.plots.style import STRATUM_COLORS, arm_label, plot_band, window_mean

__all__ = ["MIX_ARMS", "SMOOTH_WINDOW", "figure_mix"]

logger = logging.getLogger(__name__)

MIX_ARMS = ("fig3-filter", "fig3-snooze", "fig3-snooze-quota")
"""Arms of figure 3, one panel each, in this order."""

SMOOTH_WINDOW = 5
"""Steps in the moving average of batch shares: short enough to show drift, long enough to hide one-step noise."""

_SHORT = {"fig3-filter": "filtering", "fig3-snooze": "snoozing", "fig3-snooze-quota": "snoozing+quota"}
_TIE = 0.02  # late shares within 2 points count as the same
_LATE = 0.2  # "late" share in the titles = the mean over the last 20% of steps
_FALLBACK = ("#e69f00", "#56318f", "#009e73", "#cc79a7")


def _part(name: str) -> str | None:
    """``easy``/``hard`` when the dataset is named so.

    As snooze compare names strata (``easy:rev:3-6``), or by suffix (``add-easy``).
    """
    for part in STRATUM_COLORS:
        if name.startswith(part + ":") or name.endswith(part):
            return part
    return None


def _stratum_color(name: str, i: int) -> str:
    part = _part(name)
    return STRATUM_COLORS[part] if part is not None else _FALLBACK[i % len(_FALLBACK)]


def _shares(seeds: Sequence[Records], name: str, window: int) -> tuple[SeedAggregate, SeedAggregate]:
    """(smoothed, raw) batch share of dataset ``name`` aggregated over seeds.

    Steps with an empty training batch (``train/size`` 0: the core logs every share as 0 there)
    have no shares and are left out rather than dragging the average towards 0.
    """
    raw = [series([x for x in r if x.get("train/size") != 0], f"dataset/{name}/batch_frac") for r in seeds]
    smooth = [(s, moving_average(v, window)) for s, v in raw]
    return aggregate_seeds(smooth), aggregate_seeds(raw)


def _last_step(seeds: Sequence[Records]) -> int:
    """The last step any seed of the arm logged."""
    return max((int(x["step"]) for recs in seeds for x in recs if isinstance(x.get("step"), (int, float))), default=0)


def _focus(names: list[str]) -> str:
    """The stratum the title reports: the hard one when named so, else the last."""
    hard = [n for n in names if _part(n) == "hard"]
    return hard[0] if hard else names[-1]


def figure_mix(runs: dict[str, list[Records]], window: int = SMOOTH_WINDOW) -> object | None:
    """Figure 3: per fig3 arm, each stratum's share of the batch per step, with the target line."""
    arms = [a for a in MIX_ARMS if runs.get(a) and any(dataset_names(r) for r in runs[a])]
    if not arms:
        logger.info("figure 3 skipped: no arm among %s logs dataset/<name>/batch_frac", MIX_ARMS)
        return None
    plt = pyplot()
    from matplotlib.ticker import PercentFormatter

    # a shared step axis: an arm that ran out of data early shows how early
    fig, axes = plt.subplots(1, len(arms), figsize=(5.6 * len(arms), 4.8), sharex=True, sharey=True, squeeze=False)
    late: dict[str, tuple[str, float, float]] = {}
    n_seeds = 1
    ends = {arm: _last_step(runs[arm]) for arm in arms}
    for ax, arm in zip(axes[0], arms):
        names = sorted({n for r in runs[arm] for n in dataset_names(r)})
        target = 1.0 / len(names)
        focus = _focus(names)
        for i, name in enumerate(names):
            smooth, raw = _shares(runs[arm], name, window)
            # the first stratum is drawn wider, so lines that coincide (quota mode) stay visible
            plot_band(ax, smooth, _stratum_color(name, i), name, linewidth=3.4 if i == 0 else 1.8, zorder=3 + i)
            n_seeds = max(n_seeds, smooth.n_seeds)
            if name == focus and len(raw):
                late[arm] = (name, window_mean(raw.mean, _LATE, last=True), target)
        ax.axhline(
            target, color="black", linestyle="--", linewidth=1.0, zorder=2, label=f"target {target:.0%} (equal weight)"
        )
        if ends[arm] < max(ends.values()):  # the arm stopped early: every prompt retired (filter) or used up
            ax.axvline(
                ends[arm],
                color="#c0392b",
                linestyle=":",
                linewidth=1.6,
                zorder=2,
                label=f"data used up at step {ends[arm]}",
            )
        ax.set(title=arm_label(arm), xlabel="training step")
        ax.set_ylim(0, 1)
        ax.yaxis.set_major_formatter(PercentFormatter(xmax=1))
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=9)
    axes[0][0].set_ylabel(f"share of the training batch ({window}-step moving avg)")
    fig.suptitle(_mix_title(late), fontsize=13)
    seeds_text = f"mean over {n_seeds} seeds, shaded: min-max; " if n_seeds > 1 else ""
    fig.text(
        0.99,
        0.01,
        f"Lines: {seeds_text}late = last {_LATE:.0%} of steps, unsmoothed.",
        ha="right",
        va="bottom",
        fontsize=8,
        color="#555555",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 0.9))
    return fig


def _mix_title(late: dict[str, tuple[str, float, float]]) -> str:
    if not late:
        return "Share of each stratum in the training batch"
    names = {name for name, _, _ in late.values()}
    subject = f"'{next(iter(names))}'" if len(names) == 1 else "the focus stratum"
    parts = [f"{_SHORT.get(a, a)} {share:.0%}" for a, (_, share, _) in late.items()]
    targets = {t for _, _, t in late.values()}
    target = f" (target {next(iter(targets)):.0%})" if len(targets) == 1 else ""
    return f"Late batch share of {subject}: " + ", ".join(parts) + target + "\n" + _verdict(late)


def _verdict(late: dict[str, tuple[str, float, float]]) -> str:
    """Which arms end furthest from / closest to the target; arms within 2 points are named together."""
    drifts = {a: abs(share - target) for a, (_, share, target) in late.items()}
    top, bottom = max(drifts.values()), min(drifts.values())
    if np.isclose(top, bottom, atol=_TIE):
        return "all arms end alike"
    worst = " and ".join(_SHORT.get(a, a) for a, d in drifts.items() if d >= top - _TIE)
    best = " and ".join(_SHORT.get(a, a) for a, d in drifts.items() if d <= bottom + _TIE)
    drift, hold = ("drift" if " and " in worst else "drifts"), ("hold" if " and " in best else "holds")
    return f"{worst} {drift} most, {best} {hold} closest to the target"
