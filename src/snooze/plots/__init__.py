"""Every figure snooze draws, with the metrics helpers behind them.

``snooze compare``'s (the design note's figures 1-3 and the trade-off, figure 4; the design note
is the blog post this project implements: docs/concepts.md, "The design note") and the offline
analyses' (``snooze replay``, ``snooze stratify``).

numpy at import; matplotlib is imported by :func:`snooze.plots._mpl.pyplot` when a figure is drawn
(extra ``[plots]``). See ``docs/figures.md`` for which metric feeds which panel.
"""

from snooze.plots.compare import FIGURE_FILES, load_runs, write_compare_figures
from snooze.plots.efficiency import figure_dapo_waste, figure_efficiency
from snooze.plots.metrics import (
    SeedAggregate,
    aggregate_seeds,
    cumulative_batches,
    dataset_names,
    moving_average,
    series,
)
from snooze.plots.mix import figure_mix
from snooze.plots.offline import plot_pass_rates, plot_replay, plot_strata
from snooze.plots.tradeoff import figure_tradeoff

__all__ = [
    "FIGURE_FILES",
    "SeedAggregate",
    "aggregate_seeds",
    "cumulative_batches",
    "dataset_names",
    "figure_dapo_waste",
    "figure_efficiency",
    "figure_mix",
    "figure_tradeoff",
    "load_runs",
    "moving_average",
    "series",
    "plot_replay",
    "plot_pass_rates",
    "plot_strata",
    "write_compare_figures",
]
