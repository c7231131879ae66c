"""A finished run's saving re-estimated from its per-step metrics: what DAPO's dynamic sampling would have
generated for the same batches, by this version's estimator (``snooze/saved/*``, docs/metrics.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from snooze.core.config import SchedulerConfig
from snooze.core.errors import ConfigError
from snooze.core.saved import Shape, saved_from_metrics
from snooze.logs import read_metrics


def saved_dapo_groups(metrics: str | os.PathLike[str] | Sequence[Mapping[str, Any]], config: SchedulerConfig) -> float:
    """The groups DAPO would have generated over the run (``total/saved_dapo_groups``), recomputed.

    ``metrics``: the run's directory, its ``metrics.jsonl``, or its lines as :func:`snooze.logs.read_metrics`
    returns them; they need every step's ``full`` metrics (``snooze/audit/*``, ``snooze/drawn/*``,
    ``snooze/skipped``), else a :class:`DataError` names what is missing. ``config``: the run's
    :class:`SchedulerConfig` (its ``batch_size``, ``gen_batch_size`` and ``max_gen_rounds`` shape DAPO's steps).
    Divide by the run's ``total/gen_groups`` for the saving ratio. The estimate decides nothing in a run, so a
    newer estimator can re-read an older run; how far to trust it: docs/metrics.md."""
    if not isinstance(config, SchedulerConfig):
        raise ConfigError(
            f"config must be the run's SchedulerConfig, not {type(config).__name__}: a reference run's is "
            "SchedulerConfig.from_dict of the 'scheduler' entry of its config.json"
        )
    if isinstance(metrics, (bytes, bytearray, memoryview)):
        raise ConfigError(
            f"metrics must be a run directory, a metrics.jsonl path (a str or a pathlib.Path) or a list of its "
            f"lines, not {type(metrics).__name__}"
        )
    if isinstance(metrics, (str, os.PathLike)):
        metrics = read_metrics(metrics)
    elif not isinstance(metrics, Sequence):
        raise ConfigError(
            "metrics must be a run directory, a metrics.jsonl path or a list of its lines, "
            f"not {type(metrics).__name__}"
        )
    return saved_from_metrics(metrics, Shape(config.batch_size, config.gen_size, config.max_gen_rounds))
