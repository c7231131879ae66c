"""Writing a stratification: ``prompts.csv``, ``prompts.parquet``, ``curriculum.json`` and plots."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np

from snooze.analysis.stratify import STRATA, Stratification

__all__ = ["write_stratification"]


def _write_csv(result: Stratification, path: Path) -> None:
    names = list(result.columns)
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(names)
        cols = [result.columns[n].tolist() for n in names]
        for row in zip(*cols, strict=True):
            writer.writerow(["" if isinstance(v, float) and np.isnan(v) else v for v in row])


def _write_parquet(result: Stratification, path: Path) -> bool:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ModuleNotFoundError:
        return False
    arrays = {}
    for name, col in result.columns.items():
        values = col.tolist()
        if name == "id" and len({type(v) for v in values}) > 1:
            values = [str(v) for v in values]  # Parquet columns have one type; mixed ids become strings
        arrays[name] = pa.array(values)
    pq.write_table(pa.table(arrays), path)
    return True


def write_stratification(result: Stratification, out_dir: str | os.PathLike[str], plots: bool = True) -> list[Path]:
    """Write every output of :func:`~snooze.analysis.stratify` into ``out_dir``; returns the paths written.

    ``prompts.parquet`` is skipped when pyarrow is missing (``prompts.csv`` has the same table).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "prompts.csv", out / "curriculum.json"]
    _write_csv(result, written[0])
    written[1].write_text(json.dumps(result.curriculum, indent=1) + "\n", encoding="utf-8")
    if _write_parquet(result, out / "prompts.parquet"):
        written.append(out / "prompts.parquet")
    if plots:
        from snooze.plots import plot_pass_rates, plot_strata

        datasets = result.columns["dataset"]
        rates = {
            d: {m: result.columns[f"pass_rate/{m}"][datasets == d] for m in result.models}
            for d in sorted(set(datasets.tolist()))
        }
        plot_pass_rates(rates, out / "pass_rates.png")
        plot_strata(result.mix(), STRATA, out / "strata.png")
        written += [out / "pass_rates.png", out / "strata.png"]
    return written
