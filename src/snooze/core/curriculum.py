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
import operator
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from snooze.core._checks import INT64_MAX, check_weights, finite_float, is_int, shown
from snooze.core._files import read_regular
from snooze.core._json import parse_json, same_version
from snooze.core._stateful import state_int
from snooze.core.errors import ConfigError, DataError, StateError

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
        if not isinstance(ids, list) or any(isinstance(i, bool) or not isinstance(i, (str, int)) for i in ids):
            raise ConfigError(f"{_where(source, path)}[{name!r}]: must be a list of string or integer ids")
    return {str(k): list(v) for k, v in value.items()}


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
    return Stage(
        str(raw.get("name", f"stage-{i + 1}")), weights, _ids(source, f"{path}.exclude", raw.get("exclude")), conds
    )


class Curriculum:
    """Stages applied to a :class:`~snooze.Scheduler` through its hooks; state is two counters."""

    def __init__(self, stages: list[Stage], drop: Mapping[str, list[Any]] | None = None) -> None:
        if not stages:
            raise ConfigError("a curriculum needs at least one stage")
        self.stages = list(stages)
        self.drop = {k: list(v) for k, v in (drop or {}).items()}
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
        try:
            raw = read_regular(path)  # (a FIFO is refused, not waited on)
        except FileNotFoundError:
            raise ConfigError(f"{path}: curriculum file not found") from None
        except OSError as exc:  # a folder, a FIFO, no permission, ...
            raise ConfigError(f"{path}: cannot read the curriculum file ({exc.strerror or exc})") from None
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

        One :meth:`Scheduler.set_stage` call: a weight, dataset or id the scheduler does not have is an
        error naming the stage, and the scheduler is left as it was."""
        now = self._excluded(self.current)
        back: dict[str, list[Any]] = {}
        for other in self.stages:  # let back in what another stage excluded (set_stage: this one's exclusions win)
            for name, ids in other.exclude.items():
                back.setdefault(name, []).extend(ids)
        try:
            sched.set_stage(self.current.weights, exclude=now, include=back)
        except (ConfigError, DataError) as exc:
            raise type(exc)(f"curriculum stage {self.current.name!r}: {exc}") from None
        log.info("curriculum stage %d/%d (%s) applied", self.stage + 1, len(self.stages), self.current.name)

    def _holds(self, cond: Condition, metrics: Mapping[str, Any], j: int) -> bool:
        if cond.step is not None:
            return int(metrics.get("step", -1)) + 1 >= cond.step
        metric = cond.metric or ""
        if metric not in metrics:
            near = sorted(k for k in metrics if k.split("/")[-1] == metric.split("/")[-1])[:5]
            raise ConfigError(
                f"curriculum stage {self.current.name!r}: metric {metric!r} is not in the step metrics"
                + (f"; similar keys: {near}" if near else "; see docs/metrics.md for the names")
            )
        value = float(metrics[metric])
        ok = not math.isnan(value) and _OPS[cond.op](value, cond.value)
        self.streaks[j] = self.streaks[j] + 1 if ok else 0
        return self.streaks[j] >= cond.for_steps

    def update(self, sched: Any, metrics: Mapping[str, Any] | None = None) -> bool:
        """Call after each finished step. Starts (and applies) the next stage when a condition holds."""
        if self.stage == len(self.stages) - 1:
            return False
        metrics = sched.metrics() if metrics is None else metrics
        fired = [self._holds(c, metrics, j) for j, c in enumerate(self.current.advance)]
        if not any(fired):
            return False
        self.stage += 1
        self.streaks = [0] * len(self.current.advance)
        log.info(
            "curriculum: stage %d (%s) starts after step %s", self.stage + 1, self.current.name, metrics.get("step")
        )
        self.apply(sched)
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
