"""`Curriculum`: stages of dataset weights and excluded prompts, switched at a step or on a metric.

The file (JSON; ``snooze stratify`` writes one) looks like::

    {"version": 1,
     "drop": {"math": [3, 17]},                       # excluded in every stage (e.g. too easy)
     "stages": [
       {"name": "without-too-hard", "weights": {"math": 0.6, "code": 0.4},
        "exclude": {"math": [5, 9]},                  # excluded in this stage only
        "advance": [{"step": 200},                    # any one of these starts the next stage
                    {"metric": "efficiency", "op": "<", "value": 0.25, "for_steps": 3}]},
       {"name": "all", "weights": {"math": 0.5, "code": 0.5}, "exclude": {}}]}

A stage's ``weights`` (``null`` or absent: equal weights), its exclusions and ``drop`` go to the
scheduler in one :meth:`Scheduler.set_stage` call, checked whole before anything changes. ``{"step": N}``
starts the next stage at step ``N`` (after ``N`` finished steps). A metric condition holds when
``metrics[metric] op value`` for ``for_steps`` consecutive steps of the stage (default 1); a NaN metric
does not hold.

Use::

    cur = Curriculum.from_file("strata/curriculum.json")
    cur.apply(sched)                        # stage 1 now
    for step in ...:
        batch = sched.step(rollout_fn)
        cur.update(sched, batch.metrics)    # True when a new stage started

After ``sched.load_state_dict(...)`` and ``cur.load_state_dict(...)`` call ``cur.apply(sched)`` again
(it is idempotent) so the scheduler's weights and exclusions match the restored stage.
"""

from __future__ import annotations

import logging
import math
import numbers
import operator
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from snooze._kit.checks import INT64_MAX, check_weights, finite_float, is_int, shown
from snooze._kit.files import read_regular
from snooze._kit.json import parse_json, same_version
from snooze._kit.state import state_int
from snooze.core.errors import ConfigError, DataError, StateError
from snooze.core.source import dataset_rows

__all__ = ["Curriculum", "Stage", "Condition"]

log = logging.getLogger(__name__)

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


@dataclass(frozen=True)
class Condition:
    """One way out of a stage: at a step, or when a metric holds for some steps."""

    step: int | None = None
    """Start the next stage at this step (after this many finished steps)."""

    metric: str | None = None
    """Key of the scheduler's step metrics (e.g. ``dataset/math/signal_rate``)."""

    op: str = "<"
    """Comparison of the metric with ``value``: one of ``<``, ``<=``, ``>``, ``>=``."""

    value: float = 0.0
    """Threshold the metric is compared with."""

    for_steps: int = 1
    """Consecutive steps the comparison must hold."""

    def to_dict(self) -> dict[str, Any]:
        if self.step is not None:
            return {"step": self.step}
        return {"metric": self.metric, "op": self.op, "value": self.value, "for_steps": self.for_steps}


@dataclass(frozen=True)
class Stage:
    """One stage of a curriculum."""

    name: str
    """Label used in logs and metrics."""

    weights: dict[str, float] | None
    """Dataset weights while the stage lasts (``None``: equal)."""

    exclude: dict[str, list[Any]]
    """Prompt ids left out while the stage lasts, per dataset (on top of the curriculum's ``drop``)."""

    advance: tuple[Condition, ...]
    """Any one of these starts the next stage; empty for the last stage."""


def _where(source: str, path: str) -> str:
    return f"{source}: {path}" if source else path


def _ids(source: str, path: str, value: Any) -> dict[str, list[Any]]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{_where(source, path)}: must map dataset names to lists of prompt ids")
    for name, ids in value.items():
        if not isinstance(name, str):
            raise ConfigError(f"{_where(source, path)}: key {name!r} is not a dataset name (a string)")
        if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, (str, int)) for i in ids):
            raise ConfigError(f"{_where(source, path)}[{name!r}]: must be a list of string or integer ids")
    return {k: list(v) for k, v in value.items()}


def _condition(source: str, path: str, raw: Any) -> Condition:
    if not isinstance(raw, Mapping):
        raise ConfigError(
            f"{_where(source, path)}: must be an object like {{'step': 100}} or "
            "{'metric': ..., 'op': ..., 'value': ...}"
        )
    if "step" in raw:
        step = raw["step"]
        if not is_int(step) or not 1 <= step <= INT64_MAX or len(raw) != 1:
            raise ConfigError(
                f"{_where(source, path)}: {{'step': N}} needs one integer N in [1, 2**63 - 1] and nothing else"
            )
        return Condition(step=step)
    unknown = sorted(set(raw) - {"metric", "op", "value", "for_steps"})
    if unknown or "metric" not in raw or "value" not in raw:
        raise ConfigError(
            f"{_where(source, path)}: a metric condition needs 'metric' and 'value' (and optionally 'op', "
            f"'for_steps'); unknown keys: {unknown}"
        )
    op, value, for_steps = raw.get("op", "<"), raw["value"], raw.get("for_steps", 1)
    if not isinstance(op, str) or op not in _OPS:  # a list or an object is no operator (and unhashable)
        raise ConfigError(f"{_where(source, path)}.op: {op!r} is not one of {list(_OPS)}")
    if finite_float(value) is None:
        raise ConfigError(f"{_where(source, path)}.value: {shown(value)} is not a finite number")
    if not is_int(for_steps) or not 1 <= for_steps <= INT64_MAX:
        raise ConfigError(f"{_where(source, path)}.for_steps: {shown(for_steps)} is not an integer in [1, 2**63 - 1]")
    if not isinstance(raw["metric"], str) or not raw["metric"]:
        raise ConfigError(f"{_where(source, path)}.metric: {raw['metric']!r} is not a metric name")
    return Condition(metric=raw["metric"], op=op, value=finite_float(value), for_steps=for_steps)  # type: ignore[arg-type]


def _stage(source: str, i: int, raw: Any, last: bool) -> Stage:
    path = f"stages[{i}]"
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{_where(source, path)}: must be an object with 'weights', 'exclude' and 'advance'")
    unknown = sorted(set(raw) - {"name", "weights", "exclude", "advance"})
    if unknown:
        raise ConfigError(f"{_where(source, path)}: unknown key(s) {unknown}; allowed: name, weights, exclude, advance")
    weights = raw.get("weights")
    if weights is not None:  # finite numbers >= 0 (10**400 is not one), a positive and finite sum
        weights = check_weights(weights, what=_where(source, f"{path}.weights"))
    advance = raw.get("advance", [])
    if not isinstance(advance, list):
        raise ConfigError(f"{_where(source, path)}.advance: must be a list of conditions")
    if not last and not advance:
        raise ConfigError(f"{_where(source, path)}.advance: every stage but the last needs a way out")
    conds = tuple(_condition(source, f"{path}.advance[{j}]", c) for j, c in enumerate(advance))
    name = raw.get("name", f"stage-{i + 1}")
    if not isinstance(name, str):  # (an object or null is no label: it was stringified before)
        raise ConfigError(
            f"{_where(source, path)}.name: {shown(name)} is not a string; give the stage a name or leave it out"
        )
    return Stage(name, weights, _ids(source, f"{path}.exclude", raw.get("exclude")), conds)


def _scheduler(sched: Any, call: str) -> Any:
    """``sched`` when it can take a stage (a :class:`~snooze.Scheduler`), else a ConfigError naming ``call``."""
    if not callable(getattr(sched, "set_stage", None)):
        raise ConfigError(
            f"Curriculum.{call}(sched={type(sched).__name__}): sched must be the snooze.Scheduler to stage"
        )
    return sched


def _metric_value(stage: str, metric: str, value: Any) -> float:
    """A step metric as a float (NaN stays NaN: it never holds); anything but a real number is refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ConfigError(
            f"curriculum stage {stage!r}: metric {metric!r} is {shown(value)}, not a number; pass the step's "
            "metrics (batch.metrics or sched.metrics())"
        )
    try:
        return float(value)
    except OverflowError:  # an integer beyond the largest float
        raise ConfigError(f"curriculum stage {stage!r}: metric {metric!r} is {shown(value)}, beyond a float") from None


class Curriculum:
    """Stages applied to a :class:`~snooze.Scheduler` through its hooks; state is two counters."""

    def __init__(self, stages: list[Stage], drop: Mapping[str, list[Any]] | None = None) -> None:
        if isinstance(stages, (str, bytes, Mapping)) or not isinstance(stages, (list, tuple)):
            raise ConfigError(
                f"Curriculum(stages={type(stages).__name__}): must be a list of Stage; build one from a file "
                "with Curriculum.from_file or from its parsed JSON with Curriculum.from_dict"
            )
        if not stages:
            raise ConfigError("a curriculum needs at least one stage")
        bad = [i for i, st in enumerate(stages) if not isinstance(st, Stage)]
        if bad:
            raise ConfigError(
                f"Curriculum(stages): item {bad[0]} is {type(stages[bad[0]]).__name__}, not a Stage; build a "
                "curriculum from its parsed JSON with Curriculum.from_dict"
            )
        self.drop = _ids("", "Curriculum(drop)", drop)
        self.stages = list(stages)
        self.stage = 0
        self.streaks = [0] * len(self.stages[0].advance)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "") -> Curriculum:
        """Build from the parsed curriculum file; errors name the offending field."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"{_where(source, 'curriculum')}: must be a JSON object")
        if not same_version(data.get("version", 1), 1):
            raise ConfigError(f"{_where(source, 'version')}: {data.get('version')!r} is not a known version (1)")
        raw = data.get("stages")
        if not isinstance(raw, list) or not raw:
            raise ConfigError(f"{_where(source, 'stages')}: must be a non-empty list of stages")
        stages = [_stage(source, i, s, i == len(raw) - 1) for i, s in enumerate(raw)]
        return cls(stages, _ids(source, "drop", data.get("drop")))

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Curriculum:
        """Load a curriculum JSON file (as written by ``snooze stratify``)."""
        if not isinstance(path, (str, os.PathLike)) or not str(os.fspath(path)):
            raise ConfigError(f"Curriculum.from_file(path={shown(path)}): path must be a file path (a str or a Path)")
        try:
            raw = read_regular(path)  # (a FIFO is refused, not waited on)
        except FileNotFoundError:
            raise ConfigError(f"{path}: curriculum file not found") from None
        except OSError as exc:  # a folder, a FIFO, no permission, ...
            raise ConfigError(f"{path}: cannot read the curriculum file ({exc.strerror or exc})") from None
        except ValueError as exc:  # a NUL byte in the path
            raise ConfigError(f"Curriculum.from_file(path={shown(path)}): not a usable file path ({exc})") from None
        data = parse_json(raw, str(path), ConfigError, "a curriculum is snooze stratify's curriculum.json")
        return cls.from_dict(data, source=str(path))

    @property
    def current(self) -> Stage:
        return self.stages[self.stage]

    def _excluded(self, stage: Stage) -> dict[str, list[Any]]:
        out = {k: list(v) for k, v in self.drop.items()}
        for name, ids in stage.exclude.items():
            out.setdefault(name, []).extend(ids)
        return out

    def apply(self, sched: Any) -> None:
        """Set the scheduler's weights and exclusions to the current stage's (idempotent).

        Every stage is checked against the scheduler's datasets first (a weight, dataset or id it does
        not have is an error naming the stage, raised now rather than when the run reaches that stage),
        then one :meth:`Scheduler.set_stage` call sets the current one. On an error the scheduler is
        left as it was."""
        sched = _scheduler(sched, "apply")
        sources = getattr(sched, "sources", None)
        if sources is not None:  # (a scheduler-like object without datasets is checked by its set_stage only)
            for stage in self.stages:
                self._check_stage(sources, stage)
        self._set_stage(sched, self.stage)
        log.info("curriculum stage %d/%d (%s) applied", self.stage + 1, len(self.stages), self.current.name)

    def _check_stage(self, sources: Any, stage: Stage) -> None:
        """What ``set_stage`` checks of ``stage``, against the datasets ``sources``; nothing changes."""
        try:
            if stage.weights is not None:
                check_weights(stage.weights, [s.name for s in sources])
            for name, ids in self._excluded(stage).items():
                dataset_rows(sources, "set_stage", name, ids)
        except (ConfigError, DataError) as exc:
            raise type(exc)(f"curriculum stage {stage.name!r}: {exc}") from None

    def _set_stage(self, sched: Any, index: int) -> None:
        """One ``set_stage`` call for stage ``index``: its weights and exclusions, the others' let back in."""
        stage = self.stages[index]
        back: dict[str, list[Any]] = {}
        for other in self.stages:  # let back in what another stage excluded (set_stage: this one's exclusions win)
            for name, ids in other.exclude.items():
                back.setdefault(name, []).extend(ids)
        try:
            sched.set_stage(stage.weights, exclude=self._excluded(stage), include=back)
        except (ConfigError, DataError) as exc:
            raise type(exc)(f"curriculum stage {stage.name!r}: {exc}") from None

    def _streak(self, cond: Condition, metrics: Mapping[str, Any], j: int) -> tuple[int, bool]:
        """Condition ``j``'s streak after this step (a step condition keeps 0) and whether it fires."""
        if cond.step is not None:
            if "step" not in metrics or not is_int(metrics["step"]):
                raise ConfigError(
                    f"curriculum stage {self.current.name!r}: a {{'step': {cond.step}}} condition needs the "
                    f"integer metrics['step'], got {shown(metrics.get('step'))}; pass batch.metrics or sched.metrics()"
                )
            return self.streaks[j], int(metrics["step"]) + 1 >= cond.step
        metric = cond.metric or ""
        if metric not in metrics:
            near = sorted(k for k in metrics if isinstance(k, str) and k.split("/")[-1] == metric.split("/")[-1])[:5]
            raise ConfigError(
                f"curriculum stage {self.current.name!r}: metric {metric!r} is not in the step metrics"
                + (f"; similar keys: {near}" if near else "; see docs/metrics.md for the names")
            )
        value = _metric_value(self.current.name, metric, metrics[metric])
        ok = not math.isnan(value) and _OPS[cond.op](value, cond.value)
        streak = self.streaks[j] + 1 if ok else 0
        return streak, streak >= cond.for_steps

    def update(self, sched: Any, metrics: Mapping[str, Any] | None = None) -> bool:
        """Call after each finished step. Starts (and applies) the next stage when a condition holds.

        All-or-nothing: every condition is evaluated, and the next stage set on the scheduler, before
        the stage and the streaks change; an error (a missing or non-numeric metric, a stage the
        scheduler refuses) leaves the curriculum and the scheduler as they were."""
        sched = _scheduler(sched, "update")
        if metrics is not None and not isinstance(metrics, Mapping):
            raise ConfigError(
                f"Curriculum.update(metrics={type(metrics).__name__}): metrics must map metric names to values "
                "(batch.metrics), or be None (sched.metrics())"
            )
        if self.stage == len(self.stages) - 1:
            return False
        metrics = sched.metrics() if metrics is None else metrics
        conds = self.current.advance
        streaks, fired = zip(*(self._streak(c, metrics, j) for j, c in enumerate(conds)))
        if not any(fired):
            self.streaks = list(streaks)
            return False
        self._set_stage(sched, self.stage + 1)  # raises with nothing changed
        self.stage += 1
        self.streaks = [0] * len(self.current.advance)
        log.info(
            "curriculum: stage %d (%s) starts after step %s", self.stage + 1, self.current.name, metrics.get("step")
        )
        return True

    def state_dict(self) -> dict[str, Any]:
        """JSON-safe: the stage index, the condition streaks, and the stage count (as a check)."""
        return {"version": 1, "stage": self.stage, "streaks": list(self.streaks), "n_stages": len(self.stages)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`; then call :meth:`apply` on the restored scheduler."""
        if not isinstance(state, Mapping) or not {"stage", "streaks", "n_stages"} <= set(state):
            raise StateError("curriculum state must hold stage, streaks and n_stages; pass Curriculum.state_dict()")
        streaks_given = state["streaks"]
        if not isinstance(streaks_given, list):
            raise StateError(f"curriculum state streaks={streaks_given!r} is not a list; the state is corrupt")
        stage, n = state_int(state["stage"], "curriculum stage"), state_int(state["n_stages"], "curriculum n_stages")
        streaks = [state_int(s, "curriculum streaks") for s in streaks_given]  # (int() read true and 0.9)
        if n != len(self.stages) or not 0 <= stage < n or len(streaks) != len(self.stages[stage].advance):
            raise StateError(
                f"curriculum state (stage {stage} of {n}, {len(streaks)} streaks) does not fit this curriculum "
                f"({len(self.stages)} stages): load the curriculum file the run started with"
            )
        self.stage, self.streaks = stage, streaks
