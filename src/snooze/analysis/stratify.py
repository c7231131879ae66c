"""Offline difficulty stratification (the design note's first remedy; the design note is
the blog post this project implements: docs/concepts.md, "The design note").

Baseline models roll out each prompt several times; the pooled pass rate ``p`` sorts prompts into
strata and gives each prompt's chance that a group of ``G`` rollouts carries signal,
``signal_prob = 1 - p**G - (1 - p)**G`` (binary rewards: the group has signal unless all G rollouts
agree). From those the stratification writes a curriculum (:mod:`snooze.curriculum`):

- ``too_easy`` prompts are dropped in every stage (unless ``drop_too_easy=False``);
- stage 1 leaves out ``too_hard`` prompts, stage 2 lets them in (unless ``postpone_too_hard=False``,
  then there is one stage);
- each stage's dataset weights are raised toward the expected signal:
  ``w_d = sum(max(signal_prob_i, weight_floor) for i in d if i is drawn in the stage)``, normalised
  to sum to 1. Without the floor a dataset the baselines never solve would get weight 0 and could
  never be learned; ``weight_floor`` (0.05) keeps it in the mix at a small share.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze._kit.checks import INT64_MAX, as_int, as_real, check_reward_range, finite_float, shown
from snooze.analysis.completions import Completions, _models, check_completions, read_completions
from snooze.core.errors import ConfigError, DataError

__all__ = ["StratifyConfig", "Stratification", "stratify", "STRATA", "assign_strata", "signal_prob"]

STRATA: tuple[str, ...] = ("too_easy", "easy", "medium", "hard", "too_hard")


@dataclass(frozen=True)
class StratifyConfig:
    """How prompts are sorted into strata and what the curriculum does with them."""

    group_size: int = 8
    """G of the training run: ``signal_prob`` is the chance a group of G rollouts carries signal."""

    too_hard: float = 0.0
    """Pooled pass rate at or below which a prompt is ``too_hard``."""

    hard: float = 0.25
    """Pooled pass rate at or below which a prompt is ``hard`` (and above ``too_hard``)."""

    easy: float = 0.75
    """Pooled pass rate at or above which a prompt is ``easy`` (and below ``too_easy``)."""

    too_easy: float = 1.0
    """Pooled pass rate at or above which a prompt is ``too_easy``."""

    reward_range: tuple[float, float] = (0.0, 1.0)
    """Range of the rewards in ``rewards`` lists; they are scaled to [0, 1] before averaging."""

    drop_too_easy: bool = True
    """Leave ``too_easy`` prompts out of every curriculum stage.

    ``False``: keep ``too_easy`` prompts in every curriculum stage, drawn like the others."""

    postpone_too_hard: bool = True
    """Leave ``too_hard`` prompts out of stage 1; stage 2 lets them in.

    ``False``: one curriculum stage, with the ``too_hard`` prompts in it from the start."""

    weight_floor: float = 0.05
    """Smallest ``signal_prob`` a prompt counts with in the dataset weights (see the module docstring)."""

    advance_step: int | None = None
    """Move from stage 1 to stage 2 at this step; ``None``: when ``efficiency`` stays below
    ``advance_efficiency`` for ``advance_for_steps`` steps (the included data has gone easy)."""

    advance_efficiency: float = 0.25
    """Efficiency (signal groups / generated groups) below which stage 1 counts as used up."""

    advance_for_steps: int = 3
    """Consecutive steps the efficiency must stay low before stage 2 starts."""

    def __post_init__(self) -> None:
        """Checks every field (a :class:`~snooze.ConfigError` naming it) and stores numbers as Python
        ``int``/``float`` (a numpy scalar would not go into ``curriculum.json``)."""
        fix = object.__setattr__
        fix(self, "group_size", as_int(self.group_size, "group_size", 2, INT64_MAX))
        names = ("too_hard", "hard", "easy", "too_easy")
        cuts = [finite_float(getattr(self, name)) for name in names]
        if not all(c is not None and 0.0 <= c <= 1.0 for c in cuts) or not (cuts[0] < cuts[1] <= cuts[2] < cuts[3]):  # type: ignore[operator]
            raise ConfigError(
                f"thresholds too_hard={shown(self.too_hard)}, hard={shown(self.hard)}, easy={shown(self.easy)}, "
                f"too_easy={shown(self.too_easy)}: must be pass rates in [0, 1] with too_hard < hard <= easy < too_easy"
            )
        for name, cut in zip(names, cuts, strict=True):
            fix(self, name, cut)
        fix(self, "weight_floor", as_real(self.weight_floor, "weight_floor", 0.0, 1.0, "in [0, 1]"))
        if self.advance_step is not None:
            fix(self, "advance_step", as_int(self.advance_step, "advance_step", 1, INT64_MAX))
        fix(self, "advance_for_steps", as_int(self.advance_for_steps, "advance_for_steps", 1, INT64_MAX))
        efficiency = as_real(self.advance_efficiency, "advance_efficiency", 0.0, 1.0, "an efficiency in [0, 1]")
        fix(self, "advance_efficiency", efficiency)
        fix(self, "reward_range", check_reward_range(self.reward_range))
        for name in ("drop_too_easy", "postpone_too_hard"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name}={getattr(self, name)!r}: must be True or False")


@dataclass(frozen=True)
class Stratification:
    """The per-prompt table (column name -> array, one entry per prompt) and the curriculum."""

    columns: dict[str, np.ndarray]
    """``dataset``, ``id``, ``pass_rate``, ``pass_rate/<model>``..., ``n_samples``, ``signal_prob``, ``stratum``."""

    models: list[str]
    """Baseline models, in order of first appearance."""

    curriculum: dict[str, Any]
    """JSON-safe curriculum, loadable by :meth:`snooze.curriculum.Curriculum.from_dict`."""

    def mix(self) -> dict[str, dict[str, int]]:
        """Prompts per stratum per dataset."""
        out: dict[str, dict[str, int]] = {}
        for name, stratum in zip(self.columns["dataset"].tolist(), self.columns["stratum"].tolist(), strict=True):
            out.setdefault(name, dict.fromkeys(STRATA, 0))[stratum] += 1
        return out


def signal_prob(pass_rate: np.ndarray, group_size: int) -> np.ndarray:
    """``1 - p**G - (1 - p)**G``: chance that G Bernoulli(p) rollouts are not all equal, for each pass rate.

    ``pass_rate``: a number or an array of them, each finite in ``[0, 1]``; ``group_size``: an integer
    >= 2. Anything else is a :class:`~snooze.ConfigError`."""
    group_size = as_int(group_size, "signal_prob(group_size)", 2, INT64_MAX)
    try:
        given = np.asarray(pass_rate)
    except (TypeError, ValueError, OverflowError):  # (a ragged list)
        given = np.asarray(None)
    if given.dtype.kind not in "iuf":  # not text, bools, objects (10**400) or complex numbers
        raise ConfigError(
            f"signal_prob(pass_rate): must be a pass rate or an array of them (numbers in [0, 1]), got "
            f"{type(pass_rate).__name__}" + (f" of {given.dtype}" if given.dtype != object else "")
        )
    p = given.astype(np.float64)
    bad = ~(np.isfinite(p) & (p >= 0.0) & (p <= 1.0))
    if bad.any():
        raise ConfigError(
            f"signal_prob(pass_rate): {float(p[bad].flat[0])!r} is not a pass rate; "
            "each must be a finite number in [0, 1]"
        )
    return 1.0 - p**group_size - (1.0 - p) ** group_size


def assign_strata(pass_rate: np.ndarray, cfg: StratifyConfig) -> np.ndarray:
    """Stratum name of each pass rate (``object [P]``), by the thresholds of ``cfg``."""
    p = np.asarray(pass_rate, dtype=np.float64)
    tol = 1e-12  # pooled rates are ratios of float sums; 1.0 must not miss too_easy by rounding
    conditions = [p >= cfg.too_easy - tol, p >= cfg.easy, p <= cfg.too_hard + tol, p <= cfg.hard]
    return np.select(conditions, ["too_easy", "easy", "too_hard", "hard"], default="medium").astype(object)


def _table(rows: Completions, cfg: StratifyConfig) -> tuple[dict[str, np.ndarray], list[str]]:
    keys: dict[tuple[str, Any], int] = {}
    models: dict[str, int] = {}
    p_idx = np.fromiter((keys.setdefault(k, len(keys)) for k in zip(rows.datasets, rows.ids, strict=True)), np.int64)
    m_idx = np.fromiter((models.setdefault(m, len(models)) for m in rows.models), np.int64)
    n_row, k_row = rows.counts()
    n = np.zeros((len(keys), len(models)))  # [P, M] samples
    k = np.zeros((len(keys), len(models)))  # [P, M] correct
    np.add.at(n, (p_idx, m_idx), n_row)
    np.add.at(k, (p_idx, m_idx), k_row)
    pooled = k.sum(axis=1) / n.sum(axis=1)  # [P]
    names = [d for d, _ in keys]
    ids = [i for _, i in keys]
    cols: dict[str, np.ndarray] = {
        "dataset": np.asarray(names, dtype=object),
        "id": np.asarray(ids, dtype=object),
        "pass_rate": pooled,
    }
    with np.errstate(invalid="ignore", divide="ignore"):
        for model, j in models.items():
            cols[f"pass_rate/{model}"] = np.where(n[:, j] > 0, k[:, j] / np.maximum(n[:, j], 1), np.nan)
    cols["n_samples"] = n.sum(axis=1)
    cols["signal_prob"] = signal_prob(pooled, cfg.group_size)
    cols["stratum"] = assign_strata(pooled, cfg)
    return cols, list(models)


def _weights(cols: dict[str, np.ndarray], drawn: np.ndarray, floor: float) -> dict[str, float]:
    names = sorted(set(cols["dataset"].tolist()))
    score = np.maximum(cols["signal_prob"], floor) * drawn
    raw = {d: float(score[cols["dataset"] == d].sum()) for d in names}
    total = sum(raw.values())
    if total <= 0:  # nothing drawn anywhere, or floor 0 and no signal: fall back to equal weights
        return {d: 1.0 / len(names) for d in names}
    return {d: raw[d] / total for d in names}


def _ids_where(cols: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for name, pid in zip(cols["dataset"][mask].tolist(), cols["id"][mask].tolist(), strict=True):
        out.setdefault(name, []).append(pid)
    return out


def _curriculum(cols: dict[str, np.ndarray], cfg: StratifyConfig) -> dict[str, Any]:
    stratum = cols["stratum"]
    dropped = (stratum == "too_easy") if cfg.drop_too_easy else np.zeros(stratum.shape, dtype=bool)
    postponed = (stratum == "too_hard") if cfg.postpone_too_hard else np.zeros(stratum.shape, dtype=bool)
    final = {"name": "all", "weights": _weights(cols, ~dropped, cfg.weight_floor), "exclude": {}}
    stages = [final]
    if postponed.any():
        if cfg.advance_step is not None:
            advance: list[dict[str, Any]] = [{"step": cfg.advance_step}]
        else:
            advance = [
                {"metric": "efficiency", "op": "<", "value": cfg.advance_efficiency, "for_steps": cfg.advance_for_steps}
            ]
        first = {
            "name": "without-too-hard",
            "weights": _weights(cols, ~dropped & ~postponed, cfg.weight_floor),
            "exclude": _ids_where(cols, postponed),
            "advance": advance,
        }
        stages = [first, final]
    return {
        "version": 1,
        "made_by": "snooze stratify",
        "group_size": cfg.group_size,
        "thresholds": {"too_hard": cfg.too_hard, "hard": cfg.hard, "easy": cfg.easy, "too_easy": cfg.too_easy},
        "drop": _ids_where(cols, dropped),
        "stages": stages,
    }


def stratify(
    inputs: Sequence[str | os.PathLike[str]] | Completions,
    config: StratifyConfig | None = None,
    models: Sequence[str] | None = None,
) -> Stratification:
    """Stratify prompts by their pooled baseline pass rate; see the module docstring.

    ``inputs``: JSONL/Parquet files of baseline completions (or already-read :class:`Completions`).
    ``models``: the baseline models expected in the input (each must have rows).
    """
    if config is not None and not isinstance(config, StratifyConfig):
        raise ConfigError(
            f"stratify(config={config!r:.80}): must be a StratifyConfig or None, got {type(config).__name__}"
        )
    cfg = config if config is not None else StratifyConfig()
    if isinstance(inputs, Completions):
        rows = check_completions(inputs)
        missing = [m for m in _models(models) or () if m not in set(rows.models)]
        if missing:
            raise DataError(
                f"Completions: model {missing[0]!r} has no rows; models present: {sorted(set(rows.models))}"
            )
    else:
        rows = read_completions(inputs, cfg.reward_range, models)
    cols, model_names = _table(rows, cfg)
    return Stratification(cols, model_names, _curriculum(cols, cfg))
