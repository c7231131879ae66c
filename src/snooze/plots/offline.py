"""Figures of the offline analyses: ``snooze replay``'s savings, ``snooze stratify``'s pass rates and strata."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snooze.plots._mpl import pyplot

__all__ = ["plot_replay", "plot_pass_rates", "plot_strata"]


def plot_replay(results: Mapping[str, Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """Savings (share of groups skipped) and missed signal against the snooze factor; ``filter`` as lines."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for prefix, marker in (("snooze:", "o"), ("snooze-hard:", "s")):
        rows = sorted((r["factor"], r) for name, r in results.items() if name.startswith(prefix))
        if not rows:
            continue
        ks = [k for k, _ in rows]
        ax.plot(ks, [100 * r["saved_frac"] for _, r in rows], marker=marker, label=f"{prefix[:-1]}: groups saved")
        sim = [(k, r["simulated"]["saved_frac"]) for k, r in rows if "saved_frac" in r.get("simulated", {})]
        ax.plot(
            [k for k, _ in sim],
            [100 * v for _, v in sim],
            marker=marker,
            linestyle="-.",
            label=f"{prefix[:-1]}: saved, step loop rebuilt",
        )
        eq = [(k, r["predicted_saved_frac"]) for k, r in rows if r.get("predicted_saved_frac") is not None]
        ax.plot(
            [k for k, _ in eq],
            [100 * v for _, v in eq],
            marker=marker,
            linestyle=":",
            label=f"{prefix[:-1]}: saved at equal signal",
        )
        ax.plot(
            ks,
            [100 * r["missed_signal_frac"] for _, r in rows],
            marker=marker,
            linestyle="--",
            label=f"{prefix[:-1]}: signal groups missed",
        )
    if "filter" in results:
        ax.axhline(100 * results["filter"]["saved_frac"], color="grey", label="filter: groups saved")
        ax.axhline(
            100 * results["filter"]["missed_signal_frac"],
            color="grey",
            linestyle="--",
            label="filter: signal groups missed",
        )
    ax.set_xlabel("snooze factor")
    ax.set_ylabel("%  (saved: of groups; missed: of signal groups)", fontsize=8)
    ax.set_title("Replay of a logged run")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_pass_rates(rates: Mapping[str, Mapping[str, np.ndarray]], path: str | os.PathLike[str]) -> None:
    """Histogram of pass rates, one panel per dataset, one series per model (``rates[dataset][model]``)."""
    plt = pyplot()
    names = sorted(rates)
    fig, axes = plt.subplots(1, len(names), figsize=(4 * len(names), 3.2), squeeze=False)
    bins = np.linspace(0.0, 1.0, 11)
    for ax, name in zip(axes[0], names, strict=False):
        for model, values in sorted(rates[name].items()):
            ax.hist(values[np.isfinite(values)], bins=bins, histtype="step", label=model)
        ax.set_title(name)
        ax.set_xlabel("pass rate")
        ax.legend(fontsize=7)
    axes[0][0].set_ylabel("prompts")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_strata(mix: Mapping[str, Mapping[str, int]], strata: Sequence[str], path: str | os.PathLike[str]) -> None:
    """Stacked bars: the share of each stratum within each dataset (``mix[dataset][stratum]`` counts)."""
    plt = pyplot()
    names = sorted(mix)
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(names) + 2), 3.5))
    bottom = np.zeros(len(names))
    for stratum in strata:
        counts = np.array([mix[n].get(stratum, 0) for n in names], dtype=np.float64)
        totals = np.array([max(1, sum(mix[n].values())) for n in names], dtype=np.float64)
        share = counts / totals
        ax.bar(names, share, bottom=bottom, label=stratum)
        bottom += share
    ax.set_ylabel("share of prompts")
    ax.set_title("Strata per dataset")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
