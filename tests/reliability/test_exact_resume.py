"""Issue 6.1: a run interrupted anywhere and resumed from its checkpoint is the uninterrupted run.

The workload (``benchmarks/_driver.py``) is three weighted datasets in quota mode with snoozing,
carried surplus and rewards that are a pure function of (dataset, id, ticket). Each test compares
the full log of (step, kind, dataset, id) and a hash of the final state with the reference run.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import _driver as D
import pytest

import snooze

STEPS = 40
SEED = 11


def _reference(cfg: snooze.SchedulerConfig, steps: int = STEPS) -> tuple[list[D.LogRow], str, list[dict[str, Any]]]:
    """The uninterrupted run: its log, final state hash, and a trace of the state after each action."""
    trace: list[dict[str, Any]] = []

    def record(s: snooze.Scheduler, action: int) -> snooze.Scheduler:
        trace.append(
            {
                "action": action,
                "step": s.step_index,
                "round": s.round,
                "streams": [(st.epoch, st.cursor, st.exhausted) for st in s._parts.streams],
                "pending": len(s.pending_candidates()),
            }
        )
        return s

    log: list[D.LogRow] = []
    sched, _ = D.drive(snooze.Scheduler(D.datasets(), cfg, seed=SEED), steps, log, record)
    return log, D.state_hash(sched), trace


def _resumed(
    cfg: snooze.SchedulerConfig, points: set[int], tmp: Path, via: str = "files", steps: int = STEPS
) -> tuple[list[D.LogRow], str, int]:
    """The same run, saved and restored (into a new Scheduler with freshly built sources) after each
    action in ``points``; action 0 means before anything happened."""
    resumes = 0

    def restart(s: snooze.Scheduler) -> snooze.Scheduler:
        nonlocal resumes
        resumes += 1
        if via == "memory":
            new = snooze.Scheduler(D.datasets(), cfg, seed=SEED)
            new.load_state_dict(s.state_dict())
            return new
        s.save(tmp / "ckpt")
        del s  # nothing of the old object survives the "crash"
        return snooze.Scheduler.load(tmp / "ckpt", D.datasets())

    def interrupt(s: snooze.Scheduler, action: int) -> snooze.Scheduler:
        return restart(s) if action in points else s

    sched = snooze.Scheduler(D.datasets(), cfg, seed=SEED)
    if 0 in points:
        sched = restart(sched)
    log: list[D.LogRow] = []
    sched, _ = D.drive(sched, steps, log, interrupt)
    return log, D.state_hash(sched), resumes


def _first(trace: list[dict[str, Any]], pred: Callable[[dict[str, Any]], bool], what: str) -> int:
    hits = [t["action"] for t in trace if pred(t)]
    if not hits:
        pytest.fail(f"the reference run never reached {what}; adjust the workload")
    return hits[0]


def _check(cfg: snooze.SchedulerConfig, points: set[int], tmp: Path, via: str = "files", steps: int = STEPS) -> None:
    ref_log, ref_hash, _ = _reference(cfg, steps)
    log, h, resumes = _resumed(cfg, points, tmp, via, steps)
    assert resumes == len(points)
    assert len(log) == len(ref_log)
    first_diff = next((i for i, (a, b) in enumerate(zip(log, ref_log)) if a != b), None)
    assert first_diff is None, f"log diverges at entry {first_diff}: {log[first_diff]} != {ref_log[first_diff]}"
    assert h == ref_hash


@pytest.fixture(scope="module")
def trace() -> list[dict[str, Any]]:
    return _reference(D.config())[2]


def test_reference_is_deterministic_and_exercises_snoozing() -> None:
    a, b = _reference(D.config()), _reference(D.config())
    assert a[0] == b[0] and a[1] == b[1]
    sched = snooze.Scheduler(D.datasets(), D.config(), seed=SEED)
    D.drive(sched, STEPS, [])
    totals = sched.metrics()
    assert totals["total/skipped"] > 0 and totals["snooze/asleep"] > 0  # snoozes are active
    assert len({ds for _, _, ds, _ in a[0]}) == 3


def test_resume_at_step_0(tmp_path: Path) -> None:
    _check(D.config(), {0}, tmp_path)


def test_resume_after_step_1(tmp_path: Path, trace: list[dict[str, Any]]) -> None:
    _check(D.config(), {_first(trace, lambda t: t["step"] == 1, "step 1")}, tmp_path)


def test_resume_mid_epoch(tmp_path: Path, trace: list[dict[str, Any]]) -> None:
    at = _first(trace, lambda t: t["streams"][2][1] > 40 and t["streams"][2][0] == 0, "mid-epoch of 'mul'")
    _check(D.config(), {at}, tmp_path)


def test_resume_exactly_at_epoch_boundary(tmp_path: Path, trace: list[dict[str, Any]]) -> None:
    """A stream's cursor is 0 of a new epoch: the epoch it finished ran, the next has not started."""
    at = _first(trace, lambda t: any(e >= 1 and c == 0 for e, c, _ in t["streams"]), "an epoch boundary")
    _check(D.config(), {at}, tmp_path)


def test_resume_at_epoch_boundary_that_closes_a_step(tmp_path: Path, trace: list[dict[str, Any]]) -> None:
    """The boundary falls between steps, where other frameworks lose or replay an epoch."""
    points = {t["action"] for t in trace if t["round"] == 0 and any(e >= 1 and c == 0 for e, c, _ in t["streams"])}
    at = _first(trace, lambda t: t["action"] in points or t["round"] == 0 and t["step"] >= 3, "a step boundary")
    _check(D.config(), {at}, tmp_path)


def test_resume_between_propose_and_report(tmp_path: Path, trace: list[dict[str, Any]]) -> None:
    """Saved with candidates out for rollout: they are reported to the restored scheduler."""
    at = _first(trace, lambda t: t["pending"] > 0 and t["step"] >= 2, "a pending proposal")
    _check(D.config(), {at}, tmp_path)
    _check(D.config(), {at}, tmp_path, via="memory")


def test_five_chained_resumes_within_one_epoch(tmp_path: Path, trace: list[dict[str, Any]]) -> None:
    within = [t["action"] for t in trace if all(e == 0 for e, _, _ in t["streams"])]
    assert len(within) >= 10
    points = {within[i * len(within) // 5] for i in range(5)} | {within[-1]}
    assert len(points) >= 5
    _check(D.config(), points, tmp_path)


def test_resume_after_a_finite_dataset_is_exhausted(tmp_path: Path) -> None:
    cfg = D.config(epochs=2)
    trace = _reference(cfg)[2]
    at = _first(
        trace,
        lambda t: any(x for _, _, x in t["streams"]) and not all(x for _, _, x in t["streams"]),
        "one exhausted dataset",
    )
    end = _first(trace, lambda t: all(x for _, _, x in t["streams"]), "all datasets exhausted")
    _check(cfg, {at, end}, tmp_path)


def test_resume_at_every_action_of_a_short_run(tmp_path: Path) -> None:
    """The strongest form: a save/load after every single action (and before the first) changes nothing."""
    actions = [t["action"] for t in _reference(D.config(), steps=10)[2]]
    _check(D.config(), {0, *actions}, tmp_path, via="memory", steps=10)
    _check(D.config(), {0, *actions[::3]}, tmp_path, steps=10)


def test_predictive_resumes_exactly_at_every_action_of_a_short_run(tmp_path: Path) -> None:
    """The predictive policy's run-level state (clock, rates, relaxations) and its columns survive a
    save/load after every action, as the snooze counters do."""
    cfg, steps = D.config(policy="predictive", options=snooze.PredictiveOptions(recheck=0.5, margin=3.0)), 24
    sched = snooze.Scheduler(D.datasets(), cfg, seed=SEED)
    D.drive(sched, steps, [])
    assert sched.metrics()["total/skipped"] > 0  # the policy skips in this run (after the first pass)
    actions = [t["action"] for t in _reference(cfg, steps=steps)[2]]
    _check(cfg, {0, *actions}, tmp_path, via="memory", steps=steps)
    _check(cfg, {0, *actions[::5]}, tmp_path, steps=steps)
