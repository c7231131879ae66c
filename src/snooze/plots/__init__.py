"""Figures of ``snooze compare`` (the seed's figures 1-3) and the metrics helpers behind them.

numpy at import; matplotlib is imported lazily when a figure is drawn (extra ``[plots]``).
See ``docs/figures.md`` for which metric feeds which panel.
"""

from snooze.plots.compare import FIGURE_FILES, load_runs, write_compare_figures
from snooze.plots.efficiency import figure_dapo_waste, figure_efficiency
from snooze.plots.metrics import (
    SeedAggregate,
    aggregate_seeds,
    cumulative_batches,
    dataset_names,
    moving_average,
    read_metrics,
    series,
)
from snooze.plots.mix import figure_mix

__all__ = [
    "FIGURE_FILES",
    "SeedAggregate",
    "aggregate_seeds",
    "cumulative_batches",
    "dataset_names",
    "figure_dapo_waste",
    "figure_efficiency",
    "figure_mix",
    "load_runs",
    "moving_average",
    "read_metrics",
    "series",
    "write_compare_figures",
]
