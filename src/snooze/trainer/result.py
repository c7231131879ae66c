"""What a finished run of the reference loop reports: :class:`RunResult`, read back from its ``metrics.jsonl``
by :func:`read_result` (so a result can be rebuilt from the run folder at any time)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snooze.core.errors import StateError
from snooze.logs import METRICS_FILE, late_evaluations, read_metrics

__all__ = ["RunResult", "read_result", "eval_curve"]


@dataclass
class RunResult:
    """What a finished run reports."""

    run_dir: Path
    steps: int
    base_accuracy: float
    final_accuracy: float
    final_by_task: dict[str, float]
    totals: dict[str, float]
    wall_seconds: float
    base_by_task: dict[str, float] = field(default_factory=dict)
    """Greedy accuracy of the base model (step 0) per task."""
    sampled_base: float = math.nan
    """avg@k at the rollout temperature of the base model (NaN without ``eval_samples``)."""
    sampled_final: float = math.nan
    """avg@k at the rollout temperature after the last update."""
    sampled_base_by_task: dict[str, float] = field(default_factory=dict)
    sampled_final_by_task: dict[str, float] = field(default_factory=dict)
    late_accuracy: float = math.nan
    """Greedy accuracy averaged over the last :data:`LATE_EVALS` evaluations after the base's."""
    sampled_late: float = math.nan
    """avg@k at the rollout temperature averaged over the same evaluations."""
    curve: list[dict[str, float]] = field(default_factory=list)
    """Every evaluation in order (:func:`eval_curve`): ``updates``, the ``rollouts`` and ``tokens`` spent on the
    batches those updates trained on, ``greedy`` and ``sampled`` accuracy."""


def eval_curve(lines: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """Per evaluated line of a run's metrics, what its weights cost: ``updates`` (``eval/updates``), the
    cumulative ``rollouts`` (``total/cost_rollouts``: every rollout and scoring pass; ``total/rollouts`` in a log
    written before it) and ``tokens`` (``total/cost_tokens``; NaN where the log lacks them or some group was
    reported without them) of the batches trained through update ``updates`` (the totals of the line of step
    ``updates - 1``, whose batch the last update trained on; 0 for the base model), and its ``greedy`` and
    ``sampled`` accuracy (NaN where not measured). The cost of reaching an accuracy (Pilot-Commit's measure,
    docs/results.md) is read from it."""
    spent: dict[int, tuple[float, float]] = {}
    for x in lines:
        rollouts = x.get("total/cost_rollouts", x.get("total/rollouts"))
        tokens = x.get("total/cost_tokens") if not x.get("total/tokens_missing") else None
        spent[int(x["step"])] = (_number(rollouts), _number(tokens))
    out = []
    for x in lines:
        if x.get("eval/accuracy") is None:
            continue
        updates = int(_get(x, "eval/updates")) if x.get("eval/updates") is not None else int(x["step"])
        rollouts, tokens = (0.0, 0.0) if updates == 0 else spent.get(updates - 1, (math.nan, math.nan))
        out.append(
            {
                "updates": float(updates),
                "rollouts": rollouts,
                "tokens": tokens,
                "greedy": _get(x, "eval/accuracy"),
                "sampled": _get(x, "eval/sampled_accuracy"),
            }
        )
    return out


def read_result(run_dir: str | Path) -> RunResult:
    """A run's result from its ``metrics.jsonl``: base (step 0), last evaluation and the mean of the last
    :data:`~snooze.logs.LATE_EVALS` after the base's (:func:`~snooze.logs.late_evaluations`), last totals."""
    run_dir = Path(run_dir)
    lines = read_metrics(run_dir)
    evals = [x for x in lines if x.get("eval/accuracy") is not None]
    if not lines or not evals:
        raise StateError(f"{run_dir / METRICS_FILE}: no evaluated steps; run the training first")
    last, final, first = lines[-1], evals[-1], evals[0] if evals[0]["step"] == 0 else {}
    totals = {k: float(v) for k, v in last.items() if k.startswith("total/")}
    late = late_evaluations(evals)
    return RunResult(
        run_dir,
        int(last["step"]) + 1,
        _get(first, "eval/accuracy"),
        float(final["eval/accuracy"]),
        _by_task(final, "eval/accuracy"),
        totals,
        float(last["time/elapsed_s"]),
        base_by_task=_by_task(first, "eval/accuracy"),
        sampled_base=_get(first, "eval/sampled_accuracy"),
        sampled_final=_get(final, "eval/sampled_accuracy"),
        sampled_base_by_task=_by_task(first, "eval/sampled_accuracy"),
        sampled_final_by_task=_by_task(final, "eval/sampled_accuracy"),
        late_accuracy=_mean(late, "eval/accuracy"),
        sampled_late=_mean(late, "eval/sampled_accuracy"),
        curve=eval_curve(lines),
    )


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def _get(line: Mapping[str, Any], key: str) -> float:
    value = line.get(key)
    return math.nan if value is None else float(value)


def _mean(lines: Sequence[Mapping[str, Any]], key: str) -> float:
    """The mean of ``key`` over the lines (NaN when one of them lacks it)."""
    return sum(_get(x, key) for x in lines) / len(lines)


def _by_task(line: Mapping[str, Any], prefix: str) -> dict[str, float]:
    return {
        k.removeprefix(prefix + "/"): float(v) for k, v in line.items() if k.startswith(prefix + "/") and v is not None
    }
