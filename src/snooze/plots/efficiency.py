"""Figures 1 and 2: what DAPO's dynamic sampling wastes, and what filtering/snoozing save.

Each builder takes already-read metrics (arm -> one record list per seed) and returns a
matplotlib ``Figure``, or ``None`` when the runs lack what the figure needs (it logs why).
Titles are computed from the data, so they state the run's finding, whatever it is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from snooze.plots._mpl import pyplot
from snooze.plots.metrics import SeedAggregate, aggregate_seeds, cumulative_batches, series
from snooze.plots.style import arm_color, arm_label, plot_band, window_mean

__all__ = ["Records", "figure_dapo_waste", "figure_efficiency", "accuracy_key", "EFFICIENCY_ARMS", "SAMPLED_KEY"]

logger = logging.getLogger(__name__)

Records = list[dict[str, Any]]
"""One run's metrics, one dict per logged step."""

EFFICIENCY_ARMS = ("grpo", "dynamic_sampling", "filter", "snooze")
"""Arms of figure 2, in legend order."""

_SHORT = {"grpo": "GRPO", "dynamic_sampling": "DAPO", "filter": "filtering", "snooze": "snoozing"}
_EDGE = 0.1  # "early"/"late" in titles = the first/last 10% of steps


def _agg(seeds: Sequence[Records], key: str) -> SeedAggregate:
    return aggregate_seeds([series(r, key) for r in seeds])


def _ratio(seeds: Sequence[Records], num: str, den: str) -> SeedAggregate:
    """Per-seed ``num / den`` at each step (nan where ``den`` is 0), aggregated over seeds."""
    curves = []
    for recs in seeds:
        s_num, v_num = series(recs, num)
        s_den, v_den = series(recs, den)
        common, i_num, i_den = np.intersect1d(s_num, s_den, return_indices=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            curves.append((common, np.where(v_den[i_den] > 0, v_num[i_num] / v_den[i_den], np.nan)))
    return aggregate_seeds(curves)


def _optimal_line(ax: Any, steps: np.ndarray, values: np.ndarray, label: str) -> None:
    ax.plot(steps, values, color="black", linestyle="--", linewidth=1.2, label=label)


def _footer(fig: Any, n_seeds: int) -> None:
    text = f"Lines: mean over {n_seeds} seeds; shaded: min-max over seeds." if n_seeds > 1 else "One seed."
    fig.text(0.99, 0.01, text, ha="right", va="bottom", fontsize=8, color="#555555")


def figure_dapo_waste(seeds: Sequence[Records]) -> Any | None:
    """Figure 1: under ``dynamic_sampling``, rounds per step vs the optimal 1, and the used fraction."""
    rounds = _agg(seeds, "gen/rounds")
    cum = aggregate_seeds([cumulative_batches(r) for r in seeds])
    per_step = _ratio(seeds, "train/groups", "gen/groups")
    cum_used = _ratio(seeds, "total/train_groups", "total/gen_groups")
    if len(rounds) == 0 and len(per_step) == 0:
        logger.info("figure 1 skipped: the dynamic_sampling runs log neither gen/rounds nor train/groups")
        return None
    plt = pyplot()
    from matplotlib.ticker import PercentFormatter

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    color = arm_color("dynamic_sampling")
    ax = axes[0]
    plot_band(ax, rounds, color, "generation rounds per step", linewidth=1.6)
    if len(rounds):
        _optimal_line(ax, rounds.steps, np.ones(len(rounds)), "optimal: 1 round per step")
    ax.set(title="Generation rounds per step", xlabel="training step", ylabel="generation rounds (batches)")
    ax.set_ylim(bottom=0)
    ax = axes[1]
    plot_band(ax, cum, color, "generated batches", linewidth=1.8)
    if len(cum):
        optimal = np.arange(1, len(cum) + 1, dtype=np.float64)
        ax.fill_between(cum.steps, optimal, cum.mean, color=color, alpha=0.08, label="extra generation")
        _optimal_line(ax, cum.steps, optimal, "optimal: one batch per step")
    ax.set(title="Cumulative generated batches", xlabel="training step", ylabel="generated batches (cumulative)")
    ax = axes[2]
    plot_band(ax, per_step, color, "this step", linewidth=1.0, alpha=0.6)
    plot_band(ax, cum_used, "black", "cumulative", linewidth=2.0)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1))
    ax.set_ylim(0, 1.02)
    ax.set(title="Generated groups used for gradients", xlabel="training step", ylabel="share of generated groups")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=9)
    fig.suptitle(_dapo_title(rounds, cum_used), fontsize=13)
    _footer(fig, max(rounds.n_seeds, per_step.n_seeds))
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    return fig


def _dapo_title(rounds: SeedAggregate, cum_used: SeedAggregate) -> str:
    parts = []
    if len(rounds):
        early, late = window_mean(rounds.mean, _EDGE, last=False), window_mean(rounds.mean, _EDGE, last=True)
        verb = "rise" if late > early * 1.1 else ("fall" if late < early / 1.1 else "stay")
        parts.append(f"generation rounds per step {verb} from {early:.1f} to {late:.1f} (optimal: 1)")
    if len(cum_used):
        parts.append(f"only {cum_used.mean[-1]:.0%} of generated groups reach a gradient")
    return "DAPO dynamic sampling: " + "; ".join(parts)


SAMPLED_KEY = "eval/sampled_accuracy"
"""Held-out avg@k at the rollout temperature.

Figure 2's accuracy when the runs log it (else greedy ``eval/accuracy``).
"""


def accuracy_key(runs: dict[str, list[Records]]) -> str:
    """``eval/sampled_accuracy`` when any run logs it, else ``eval/accuracy`` (greedy)."""
    logged = any(rec.get(SAMPLED_KEY) is not None for seeds in runs.values() for recs in seeds for rec in recs)
    return SAMPLED_KEY if logged else "eval/accuracy"


def figure_efficiency(runs: dict[str, list[Records]]) -> Any | None:
    """Figure 2: cumulative generated batches per arm, beside held-out accuracy per arm.

    The accuracy is avg@k at the rollout temperature when the runs log it (what GRPO optimises; greedy
    accuracy can stay flat while the sampled distribution keeps improving), else greedy."""
    arms = [a for a in EFFICIENCY_ARMS if runs.get(a)]
    key = accuracy_key({a: runs[a] for a in arms})
    cums = {a: aggregate_seeds([cumulative_batches(r) for r in runs[a]]) for a in arms}
    accs = {a: _agg(runs[a], key) for a in arms}
    cums = {a: c for a, c in cums.items() if len(c)}
    accs = {a: c for a, c in accs.items() if len(c)}
    if not cums and not accs:
        logger.info("figure 2 skipped: no arm among %s logs generation rounds or eval/accuracy", EFFICIENCY_ARMS)
        return None
    plt = pyplot()
    from matplotlib.ticker import PercentFormatter

    fig, (ax_gen, ax_acc) = plt.subplots(1, 2, figsize=(14, 5.2))
    longest = max(cums.values(), key=len, default=None)
    if longest is not None:
        _optimal_line(ax_gen, longest.steps, np.arange(1, len(longest) + 1, dtype=np.float64), "optimal: one per step")
    for arm, agg in cums.items():
        plot_band(ax_gen, agg, arm_color(arm), arm_label(arm), linewidth=2.0)
    ax_gen.set(title="Generation compute", xlabel="training step", ylabel="generated batches (cumulative rounds)")
    for arm, agg in accs.items():
        plot_band(ax_acc, agg, arm_color(arm), arm_label(arm), linewidth=2.0, marker="o", markersize=3.5)
    ax_acc.yaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=0))
    what = "avg@k at the rollout temperature" if key == SAMPLED_KEY else "greedy"
    ax_acc.set(title=f"Held-out accuracy ({what}; step 0 = base)", xlabel="training step", ylabel="held-out accuracy")
    for ax in (ax_gen, ax_acc):
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=9)
    fig.suptitle(_efficiency_title(cums, accs), fontsize=13)
    n_seeds = max([c.n_seeds for c in (*cums.values(), *accs.values())], default=1)
    _footer(fig, n_seeds)
    fig.tight_layout(rect=(0, 0.03, 1, 0.92))
    return fig


def _efficiency_title(cums: dict[str, SeedAggregate], accs: dict[str, SeedAggregate]) -> str:
    """Two lines: generation saved against DAPO, then the final held-out accuracy of every arm."""
    ref = "dynamic_sampling"
    lines = []
    others = [a for a in ("snooze", "filter") if a in cums]
    if ref in cums and others:
        clauses = []
        for arm in others:
            a, r = cums[arm], cums[ref]
            if not len(a) or not len(r):
                continue
            # at equal steps: an arm that ran out of data early is compared at its last step, and says so
            end = min(int(a.steps[-1]), int(r.steps[-1]))
            at_a, at_r = (
                np.searchsorted(a.steps, end, side="right") - 1,
                np.searchsorted(r.steps, end, side="right") - 1,
            )
            ratio = r.mean[at_r] / max(a.mean[at_a], 1e-12)
            amount = f"{ratio:.1f}x fewer" if ratio >= 1 else f"{1 / ratio:.1f}x more"
            when = f" (by step {end}, where it stopped)" if end < int(r.steps[-1]) else ""
            clauses.append(f"{arm_label(arm)} generated {amount}{when}")
        lines.append("Against DAPO dynamic sampling, " + ", ".join(clauses) + " batches")
    else:
        lines.append("Generated batches per arm")
    if accs:
        finals = ", ".join(f"{_SHORT.get(a, a)} {agg.mean[-1]:.1%}" for a, agg in accs.items())
        lines.append(f"final held-out accuracy: {finals}")
    return "\n".join(lines)
