"""Reading back what ``snooze compare`` wrote, for the tables built across comparisons (the regime family,
the staleness table): ``summary.json`` (the fields they read), ``regime.json`` and ``run_meta.json``.

Each field is taken as the type it must be (:class:`~snooze._kit.record.Record`), or a
:class:`~snooze.DataError` names the file and the field: a number that is a string or a boolean, an
integer no float holds (``10**400``), an infinity, an array of the wrong length (the arms are paired with
DAPO seed by seed: one seed too few would pair the wrong runs), a missing key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from snooze._kit.json import read_json
from snooze._kit.record import Record
from snooze.core.errors import DataError

__all__ = ["read_summary", "read_regime", "read_run_meta", "DAPO", "RECOMMENDED_ARM"]

DAPO = "dynamic_sampling"
RECOMMENDED_ARM = "snooze-f1-carry"
"""The arm of the recommended setting (``snooze.RECOMMENDED``, the audit at its default); it runs by default."""


def _seeds(entry: Record, key: str, low: float, high: float, nan: bool) -> list[float]:
    """``entry[key]`` as per-seed numbers in ``[low, high]``; ``NaN`` (how ``json.dumps`` writes a value
    that was not measured) only where ``nan``."""
    values = entry.array(key)
    if not values:
        raise entry.fail(key, "is an empty array: one value per seed is needed")
    out = []
    for i, value in enumerate(values):
        if nan and isinstance(value, float) and math.isnan(value):
            out.append(value)
        else:
            out.append(entry.check_real(f"{key}[{i}]", value, low, high))
    return out


def read_summary(path: Path, fix: str) -> dict[str, dict[str, Any]]:
    """The arms of ``summary.json`` with what the cross-comparison tables read, checked: per arm
    ``gen_groups.by_seed`` (finite, >= 0) and its headline accuracy's ``late.by_seed`` (in [0, 1], NaN where
    not measured), at most as many seeds as DAPO's (an arm run on fewer pairs with DAPO's first ones). The
    entries keep the summary's shape (``paired`` reads them)."""
    top = Record(read_json(path, DataError, fix), str(path), DataError, fix)
    if not top.keys():
        raise top.fail(None, "holds no arm")
    out: dict[str, dict[str, Any]] = {}
    for arm in top.keys():
        top.check_text(arm, arm)
        entry = top.obj(arm)
        gen = _seeds(entry.obj("gen_groups"), "by_seed", 0.0, math.inf, nan=False)
        accuracy = entry.obj("accuracy")
        kind = "sampled" if accuracy.has("sampled") else "greedy"
        late = _seeds(accuracy.obj(kind).obj("late"), "by_seed", 0.0, 1.0, nan=True)
        if len(late) != len(gen):
            seeds = f"{len(late)} seeds, but gen_groups.by_seed has {len(gen)}"
            raise entry.fail(f"accuracy.{kind}.late.by_seed", seeds)
        out[arm] = {"gen_groups": {"by_seed": gen}, "accuracy": {kind: {"late": {"by_seed": late}}}}
        out[arm].update(_cost(entry, len(gen), kind))
    if DAPO in out:  # every arm of a comparison starts at the same seed: an arm pairs with DAPO's first seeds
        want = len(out[DAPO]["gen_groups"]["by_seed"])
        for arm, entry in out.items():
            if len(entry["gen_groups"]["by_seed"]) > want:
                raise top.fail(
                    f"{arm}.gen_groups.by_seed",
                    f"{len(entry['gen_groups']['by_seed'])} seeds, but {DAPO} has {want}: arms are paired seed by "
                    "seed, so DAPO needs every seed an arm has",
                )
    return out


def _cost(entry: Record, seeds: int, kind: str) -> dict[str, Any]:
    """What a summary written since costs were recorded adds (each optional, each checked when there):
    ``rollouts.by_seed`` (finite, >= 0), ``gen_tokens.by_seed`` (>= 0, NaN where not known) and ``curve.by_seed``
    (per seed, every evaluation's ``rollouts`` and ``tokens`` spent and its ``kind`` accuracy), one per seed; a
    summary written before lacks them, and the family table leaves their columns empty."""
    out: dict[str, Any] = {}
    for key, nan in (("rollouts", False), ("gen_tokens", True)):
        if entry.has(key):
            values = _seeds(entry.obj(key), "by_seed", 0.0, math.inf, nan=nan)
            if len(values) != seeds:
                raise entry.fail(f"{key}.by_seed", f"{len(values)} seeds, but gen_groups.by_seed has {seeds}")
            out[key] = {"by_seed": values}
    if entry.has("curve"):
        runs = entry.obj("curve").array("by_seed")
        if len(runs) != seeds:
            raise entry.fail("curve.by_seed", f"{len(runs)} seeds, but gen_groups.by_seed has {seeds}")
        out["curve"] = {"by_seed": [_curve(entry, i, run, kind) for i, run in enumerate(runs)]}
    return out


def _curve(entry: Record, seed: int, run: Any, kind: str) -> list[dict[str, float]]:
    """One seed's evaluations (``curve.by_seed[seed]``): ``rollouts`` and ``tokens`` spent (>= 0, or NaN) and the
    ``kind`` accuracy as ``accuracy`` (in [0, 1], NaN where not measured)."""
    key = f"curve.by_seed[{seed}]"
    if not isinstance(run, list):
        raise entry.fail(key, "expected an array of evaluations")
    out = []
    for i, point in enumerate(run):
        item = Record(point, entry.where, entry.error, entry.fix, f"{entry.path}.{key}[{i}]".lstrip("."))
        tokens, acc = item.raw("tokens"), item.raw(kind)
        out.append(
            {
                "rollouts": rollouts if _nan(rollouts := item.raw("rollouts")) else item.number("rollouts", 0.0),
                "tokens": tokens if _nan(tokens) else item.number("tokens", 0.0),
                "accuracy": acc if _nan(acc) else item.number(kind, 0.0, 1.0),
            }
        )
    return out


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def read_regime(path: Path, fix: str) -> dict[str, Any]:
    """``regime.json``: its ``checks`` (each a ``criterion`` and a ``target`` text, a ``value``, ``met`` true,
    false or null) as :func:`~snooze.experiments.regime.regime_table` prints them."""
    record = Record(read_json(path, DataError, fix), str(path), DataError, fix)
    for i, item in enumerate(record.array("checks")):
        check = Record(item, str(path), DataError, fix, f"checks[{i}]")
        check.text("criterion")
        check.text("target")
        check.raw("value")
        if check.raw("met") is not None:
            check.flag("met")
    return record.value


def read_run_meta(path: Path, fix: str) -> Mapping[str, Any]:
    """``run_meta.json``: ``wall_seconds`` (finite, >= 0) and ``resumed_runs`` (an integer >= 0)."""
    record = Record(read_json(path, DataError, fix), str(path), DataError, fix)
    return {"wall_seconds": record.number("wall_seconds", 0.0), "resumed_runs": record.integer("resumed_runs")}
