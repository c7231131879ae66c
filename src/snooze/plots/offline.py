"""Figures of the offline analyses: ``snooze replay``'s savings, ``snooze stratify``'s pass rates and strata."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from snooze.plots._mpl import pyplot

__all__ = ["plot_replay", "plot_pass_rates", "plot_strata"]


def _band(rows: Sequence[tuple[int, Mapping[str, Any]]], key: str, interval: str) -> tuple[list[Any], ...]:
    """``(factors, values %, lower errors, upper errors)`` of a headline field, leaving out ``None``."""
    ks, vals, lo, hi = [], [], [], []
    for k, r in rows:
        h = r["headline"]
        if h[key] is None:
            continue
        span = h[interval] or [h[key], h[key]]
        ks.append(k)
        vals.append(100 * h[key])
        lo.append(100 * (h[key] - span[0]))
        hi.append(100 * (span[1] - h[key]))
    return ks, vals, lo, hi


def plot_replay(results: Mapping[str, Mapping[str, Any]], path: str | os.PathLike[str]) -> None:
    """The replay's headline against the snooze factor: rollouts saved for the log's signal groups and the
    share of skipped encounters that had signal, each with its interval; ``filter`` as lines with its band."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for prefix, marker in (("snooze:", "o"), ("snooze-hard:", "s")):
        rows = sorted((r["factor"], r) for name, r in results.items() if name.startswith(prefix))
        if not rows:
            continue
        for key, interval, style, what in (
            ("rollouts_saved_frac", "rollouts_saved_interval", "-", "rollouts saved"),
            ("risk", "risk_interval", "--", "skipped with signal"),
        ):
            ks, vals, lo, hi = _band(rows, key, interval)
            label = f"{prefix[:-1]}: {what}"
            ax.errorbar(ks, vals, yerr=[lo, hi], marker=marker, linestyle=style, capsize=3, label=label)
    if "filter" in results:
        h = results["filter"]["headline"]
        for key, interval, style, what in (
            ("rollouts_saved_frac", "rollouts_saved_interval", "-", "rollouts saved"),
            ("risk", "risk_interval", "--", "skipped with signal"),
        ):
            if h[key] is None:
                continue
            ax.axhline(100 * h[key], color="grey", linestyle=style, label=f"filter: {what}")
            if h[interval] is not None:
                ax.axhspan(100 * h[interval][0], 100 * h[interval][1], color="grey", alpha=0.15)
    ax.set_xlabel("snooze factor")
    ax.set_ylabel("%  (saved: of the log's rollouts; with signal: of skipped)", fontsize=8)
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
