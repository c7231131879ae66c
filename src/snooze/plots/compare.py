"""``write_compare_figures``: the PNG figures of ``snooze compare``, from its run directories."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from snooze.core.errors import ConfigError, DataError
from snooze.logs import read_metrics
from snooze.plots._mpl import pyplot
from snooze.plots.efficiency import Records, figure_dapo_waste, figure_efficiency
from snooze.plots.mix import figure_mix
from snooze.plots.tradeoff import figure_tradeoff

__all__ = ["FIGURE_FILES", "load_runs", "write_compare_figures"]

logger = logging.getLogger(__name__)

FIGURE_FILES = ("fig1_dapo_waste.png", "fig2_efficiency.png", "fig3_mix.png", "fig4_tradeoff.png")
"""File names of figures 1-4 inside the output directory."""

_DPI = 130  # sharp on a laptop screen, ~100-200 kB per figure


def load_runs(runs: Mapping[str, Sequence[Path]]) -> dict[str, list[Records]]:
    """Read every run's metrics; a run whose metrics cannot be read is left out with a warning."""
    loaded: dict[str, list[Records]] = {}
    for arm, dirs in runs.items():
        seeds = []
        for d in dirs:
            try:
                recs = read_metrics(d)
            except DataError as e:
                logger.warning("arm %s: leaving out run %s: %s", arm, d, e)
                continue
            if recs:
                seeds.append(recs)
        if seeds:
            loaded[arm] = seeds
    return loaded


def _builders(loaded: dict[str, list[Records]]) -> list[tuple[str, Callable[[], Any]]]:
    return [
        (
            FIGURE_FILES[0],
            lambda: figure_dapo_waste(loaded["dynamic_sampling"]) if "dynamic_sampling" in loaded else None,
        ),
        (FIGURE_FILES[1], lambda: figure_efficiency(loaded)),
        (FIGURE_FILES[2], lambda: figure_mix(loaded)),
        (FIGURE_FILES[3], lambda: figure_tradeoff(loaded)),
    ]


def write_compare_figures(out_dir: Path, runs: Mapping[str, Sequence[Path]]) -> list[Path]:
    """Draw figures 1-4 of ``snooze compare`` into ``out_dir`` and return the paths written.

    ``runs`` maps an arm name (``grpo``, ``dynamic_sampling``, ``filter``, ``snooze``,
    ``fig3-filter``, ``fig3-snooze``, ``fig3-snooze-quota``) to its per-seed run directories,
    each holding ``metrics.jsonl``. Missing arms, unreadable runs and absent metrics only skip
    what cannot be drawn (logged); this never raises for them, so a comparison's results are
    never lost to a plotting problem. Without matplotlib it writes nothing and logs how to fix it.
    """
    try:
        plt = pyplot()
    except ConfigError as exc:
        logger.warning("figures skipped: %s", exc)
        return []
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    loaded = load_runs(runs)
    written: list[Path] = []
    for name, build in _builders(loaded):
        try:
            fig = build()
            if fig is None:
                continue
            try:
                fig.savefig(out / name, dpi=_DPI)
            finally:
                plt.close(fig)
        except Exception:  # a figure is a by-product: log the bug, keep the comparison's other outputs
            logger.exception("could not draw %s; the other figures are unaffected", name)
            continue
        written.append(out / name)
    return written
