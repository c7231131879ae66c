"""The state envelope (format 1): what is written is format 1, and a state of a pre-release is refused with a clear
error (this release reads the states it writes, nothing older)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import snooze
from snooze.core.checkpoint import load_state

PRE_RELEASE = Path(__file__).resolve().parents[1] / "fixtures" / "state_v1" / "stream-counter"
"""A checkpoint written by snooze at ca7b707 (a pre-release; format 1 of the old layout, with ``meta.step``,
``meta.round``, flat option names in its config and ``batch.*`` / ``surplus.*`` / ``zero.*`` arrays), saved
mid-step with candidates of two rounds out, over :func:`datasets` with seed 11."""


def datasets() -> dict[str, Any]:
    """Three small datasets (string and integer ids) so epochs turn over and snoozes matter."""
    return {
        "math": [{"id": f"m{i}"} for i in range(41)],
        "code": snooze.Source.from_ids("code", np.arange(100, 129)),
        "logic": [{"id": i} for i in range(17)],
    }


def rewards(cands: Any, group_size: int) -> np.ndarray:
    """``[len(cands), G]`` rewards, a pure function of each candidate's ``(dataset, id, ticket)``:
    about 40% all-correct, 10% all-wrong, 5% flat, the rest mixed."""
    out = np.empty((len(cands), group_size))
    for i, c in enumerate(cands):
        h = zlib.crc32(f"{c.dataset}/{c.id}/{c.ticket}".encode())
        kind = h % 20
        if kind < 8:
            out[i] = 1.0
        elif kind < 10:
            out[i] = 0.0
        elif kind == 10:
            out[i] = 0.5
        else:
            row = np.random.default_rng(h).integers(0, 2, group_size).astype(float)
            row[0], row[1] = 0.0, 1.0
            out[i] = row
    return out


def test_a_state_of_a_pre_release_is_refused_with_a_clear_error() -> None:
    """Loaded by file (its own config) or into a scheduler of today's config: a StateError that names the file
    and says it is a pre-release's, and the scheduler it was loaded into is as it was."""
    with pytest.raises(snooze.StateError, match=f"{PRE_RELEASE.name}/state-.*pre-release of snooze"):
        snooze.Scheduler.load(PRE_RELEASE, datasets())
    config = snooze.SchedulerConfig(
        batch_size=6,
        gen_batch_size=7,
        group_size=4,
        options=snooze.SnoozeOptions(factor=3, backoff=2.0, max=20),
        weights={"math": 2.0, "code": 1.0, "logic": 1.0},
        carry_surplus=True,
        max_gen_rounds=3,
    )
    with pytest.raises(snooze.StateError, match=f"{PRE_RELEASE.name}/state-.*pre-release of snooze"):
        snooze.Scheduler.load(PRE_RELEASE, datasets(), config=config)
    sched = snooze.Scheduler(datasets(), config, seed=11)
    before = sched.state_dict()
    with pytest.raises(snooze.StateError, match="pre-release of snooze"):
        sched.load_state_dict(load_state(PRE_RELEASE))
    assert (
        sched.state_dict()["meta"] == before["meta"] and sched.step_index == 0 and len(sched.pending_candidates()) == 0
    )


def _trained(**cfg: Any) -> snooze.Scheduler:
    sched = snooze.Scheduler(datasets(), snooze.SchedulerConfig(batch_size=3, group_size=4, **cfg), seed=1)
    for _ in range(3):
        sched.step(lambda c: rewards(c, 4))
    sched.propose()
    return sched


def test_the_step_and_round_are_written_once_and_a_state_with_the_old_headers_is_refused() -> None:
    sched = _trained()
    state = sched.state_dict()
    meta = state["meta"]
    assert not {"step", "round", "last_metrics"} & set(meta)  # the headers of pre-releases: not written
    assert (meta["metrics"]["totals"]["steps"], meta["step_batch"]["rounds"]) == (3, 1)
    fresh = snooze.Scheduler(datasets(), sched.config, seed=1)
    fresh.load_state_dict(state)
    assert fresh.step_index == 3 and fresh.round == 1 and fresh.state_dict()["meta"] == meta
    # as pre-releases wrote it: headers, no step batch
    old = {k: v for k, v in meta.items() if k != "step_batch"}
    old.update(step=3, round=1, last_metrics={"step": 2, "efficiency": 0.5})
    fresh = snooze.Scheduler(datasets(), sched.config, seed=1)
    with pytest.raises(snooze.StateError, match="pre-release of snooze"):
        fresh.load_state_dict({"meta": old, "arrays": state["arrays"]})
    assert fresh.step_index == 0 and fresh.round == 0


def test_a_saved_state_file_is_named_by_its_finished_steps(tmp_path: Path) -> None:
    path = _trained().save(tmp_path / "ck")
    assert path.name.startswith("state-00000003-")


def test_after_a_load_metrics_are_the_totals_until_a_step_finishes() -> None:
    sched = _trained()
    resumed = snooze.Scheduler(datasets(), sched.config, seed=1)
    resumed.load_state_dict(sched.state_dict())
    totals = {k: v for k, v in sched.metrics().items() if k.startswith("total/")}
    assert resumed.metrics() == totals and totals["total/steps"] == 3
    assert resumed.step(lambda c: rewards(c, 4)).metrics == sched.step(lambda c: rewards(c, 4)).metrics


def test_policy_state_is_written_only_by_a_policy_that_keeps_some() -> None:
    from snooze.core.policies import POLICIES, Policy, register_policy

    @register_policy("test_counting")
    class Counting(Policy):
        def __init__(self, options: Any, context: Any) -> None:
            super().__init__(options, context)
            self.reports = 0

        def report(self, memory: Any, report: Any) -> None:
            self.reports += 1

        def state_dict(self) -> dict[str, Any]:
            return {"reports": self.reports}

        def load_state_dict(self, state: Any) -> None:
            self.reports = int(state["reports"])

    try:
        assert "policy" not in _trained().state_dict()["meta"]  # the built-in policies keep none: format 1 as before
        sched = _trained(policy="test_counting")
        state = sched.state_dict()
        assert (
            state["meta"]["policy"] == {"reports": sched._parts.policy.reports} and sched._parts.policy.reports >= 3
        )  # a report a round
        again = snooze.Scheduler(datasets(), sched.config, seed=1)
        again.load_state_dict(state)
        assert again._parts.policy.reports == sched._parts.policy.reports
        builtin = snooze.Scheduler(datasets(), sched.config.replace(policy="snooze"), seed=1)
        with pytest.raises(
            snooze.StateMismatchError, match="'test_counting' keeps run-level state that only it can read"
        ):
            builtin.load_state_dict(state)
        same = {**state, "meta": {**state["meta"], "config": builtin.config.to_dict()}}  # a snooze state holding one
        with pytest.raises(snooze.StateError, match="keeps no state of its own"):
            builtin.load_state_dict(same)
    finally:
        POLICIES._classes.pop("test_counting")
