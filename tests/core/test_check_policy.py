"""check_policy: the plug-in contract.

Run on every built-in policy, and shown catching the ways a user's policy breaks it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import snooze
from snooze.core.options import POLICIES
from snooze.core.policies import Changes, Policy, register_policy

BUILT_IN = [
    pytest.param(p, {}, id=f"{p}-default") for p in ("grpo", "dynamic_sampling", "filter", "snooze", "predictive")
]
BUILT_IN += [
    pytest.param("snooze", {"options": snooze.SnoozeOptions(skip="history", factor=2)}, id="snooze-skip-factor"),
    pytest.param("snooze", {"options": snooze.SnoozeOptions(hard=True, backoff=2.0)}, id="snooze-hard-backoff"),
    pytest.param("snooze", {"mix": "quota", "weights": {"a": 2.0, "b": 1.0}}, id="snooze-mix-weights"),
    pytest.param(
        "predictive", {"options": snooze.PredictiveOptions(margin=1.0), "mix": "quota"}, id="predictive-margin-mix"
    ),
]


@pytest.mark.parametrize(("policy", "extra"), BUILT_IN)
def test_every_built_in_policy_keeps_the_contract(policy: str, extra: dict[str, Any]) -> None:
    cfg = snooze.SchedulerConfig(batch_size=4, gen_batch_size=6, group_size=4, max_gen_rounds=3, policy=policy, **extra)
    snooze.check_policy(POLICIES[policy], config=cfg)


def _registered(name: str, cls: type) -> type:
    return register_policy(name)(cls)


def test_it_catches_a_policy_that_desyncs_the_asleep_count() -> None:
    """The asleep count is the prompt memory's own, derived from the rows a report wrote: a policy that
    writes the counter of prompts outside its report desyncs it (snooze/asleep wrong for the rest of the run)."""

    class Sleepy(Policy):
        def report(self, memory: Any, report: Any) -> Changes | None:
            memory.columns["counter"][-1] = 3  # a prompt not in the report
            return None

    cls = _registered("test_sleepy", Sleepy)
    try:
        with pytest.raises(
            snooze.PolicyConformanceError,
            match=r"counts broken after step 1: dataset 'b': \(asleep, retired, blocked\) cached as \(0, 0, 0\), "
            r"the columns hold \(1, 0, 0\)",
        ):
            snooze.check_policy(cls)
    finally:
        POLICIES.unregister("test_sleepy")


def test_a_policy_that_does_not_report_its_changes_cannot_desync_the_counts() -> None:
    """Before, the counts were kept from Changes(new=...): this policy made snooze/asleep stay 0 while
    prompts slept. Now the memory counts the rows the report wrote."""

    class Quiet(Policy):
        def report(self, memory: Any, report: Any) -> Changes | None:
            p = report.prompts()
            memory.columns["counter"][p.rows[p.easy > 0]] += 2
            return None

    cls = _registered("test_quiet", Quiet)
    try:
        snooze.check_policy(cls)
        sched = snooze.Scheduler(
            {"a": [{"id": i} for i in range(8)]},
            snooze.SchedulerConfig(batch_size=2, group_size=2, policy="test_quiet"),
        )
        batch = sched.step(lambda c: [[1.0, 1.0]] * len(c))  # every group too easy: each prompt asleep
        assert batch.metrics["snooze/asleep"] == int(np.count_nonzero(sched._parts.memory.tables[0].counter)) > 0
    finally:
        POLICIES.unregister("test_quiet")


def test_it_catches_a_skip_mask_of_the_wrong_type_and_state_that_does_not_resume() -> None:
    class IntMask(Policy):
        def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
            return np.zeros(rows.shape[0], dtype=np.int64)

    class Forgetful(Policy):  # run-level state it saves but does not load
        def __init__(self, options: Any, context: Any) -> None:
            super().__init__(options, context)
            self.seen = 0

        def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
            return np.full(rows.shape[0], self.seen % 3 == 1)

        def report(self, memory: Any, report: Any) -> None:
            self.seen += len(report)

        def state_dict(self) -> dict[str, Any]:
            return {"seen": self.seen}

        def load_state_dict(self, state: Any) -> None:
            pass

    for name, cls, match in (
        ("test_int_mask", IntMask, r"'test_int_mask': skip_mask\(\) returned ndarray int64 \(12,\)"),
        ("test_forgetful", Forgetful, "state round-trip broken at step 8"),
    ):
        _registered(name, cls)
        try:
            with pytest.raises(snooze.PolicyConformanceError, match=match):
                snooze.check_policy(cls)
        finally:
            POLICIES.unregister(name)


def test_it_refuses_a_policy_that_is_not_registered_or_a_config_of_another() -> None:
    class Loose(Policy):
        pass

    with pytest.raises(snooze.ConfigError, match="register it first"):
        snooze.check_policy(Loose)
    with pytest.raises(snooze.ConfigError, match="config.policy='grpo', but the policy is registered as 'filter'"):
        snooze.check_policy(POLICIES["filter"], config=snooze.SchedulerConfig(policy="grpo"))


class _Stateful(Policy):
    """A policy whose run-level state holds ``value`` (set by the test)."""

    value: Any = 0

    def state_dict(self) -> dict[str, Any]:
        return {"counts": [1, 2], "value": type(self).value}

    def load_state_dict(self, state: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (np.zeros(3), "numpy.ndarray"),
        (np.float64(1.5), "numpy.float64"),
        (np.int64(2), "numpy.int64"),
        ((1, 2), "builtins.tuple"),
        (float("nan"), "nan, not a finite number"),
    ],
)
def test_a_policy_state_the_saved_format_cannot_hold_fails_the_check_and_the_save(
    value: Any, shown: str, tmp_path: Any
) -> None:
    """A numpy array in the state made check_policy itself raise ValueError; a numpy scalar passed it and every
    later save() raised TypeError. Both now fail where the state is taken, with the project's error naming the
    policy and the value; the checkpoint on disk is left as it was."""
    cls = _registered("test_stateful", type("Bad", (_Stateful,), {"value": value}))
    try:
        with pytest.raises(snooze.PolicyConformanceError, match=r"'test_stateful': its state_dict\(\)\['value'\] is"):
            snooze.check_policy(cls)
        sched = snooze.Scheduler({"a": [{"id": i} for i in range(5)]}, snooze.SchedulerConfig(policy="test_stateful"))
        with pytest.raises(snooze.PolicyConformanceError, match=shown.replace("(", r"\(")):
            sched.save(tmp_path / "s")
        assert not (tmp_path / "s").exists()
    finally:
        POLICIES.unregister("test_stateful")


def test_a_plain_json_state_passes_the_check() -> None:
    cls = _registered("test_plain", type("Plain", (_Stateful,), {"value": {"a": [1, 2.5, None, True, "x"]}}))
    try:
        snooze.check_policy(cls)
    finally:
        POLICIES.unregister("test_plain")


def test_a_mask_that_lets_nothing_through_fails_the_check_and_never_hangs_a_draw() -> None:
    """A mask that skips every prompt, even with the audit off: check_policy names it, and propose() gives up
    on the dataset after ``patience`` epochs instead of walking for ever."""

    class Nothing(Policy):
        def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
            return np.ones(rows.shape[0], dtype=bool)

    cls = _registered("test_nothing", Nothing)
    try:
        with pytest.raises(snooze.PolicyConformanceError, match="skip mask broken at the first round: .* drew no"):
            snooze.check_policy(cls)
        sched = snooze.Scheduler({"a": [{"id": i} for i in range(7)]}, snooze.SchedulerConfig(policy="test_nothing"))
        assert len(sched.propose()) == 0 and sched.metrics() == {}
        assert sched._parts.step_metrics.scalars["snooze/skipped"] == 7  # one epoch, then it gave up
    finally:
        POLICIES.unregister("test_nothing")


def test_a_patience_that_is_not_a_count_is_refused_when_the_scheduler_is_built() -> None:
    class Forever(Policy):
        patience = None  # an earlier promise ("walk until one comes through") that could hang a draw

        def skip_mask(self, table: Any, stream: Any, rows: np.ndarray, awake: np.ndarray) -> np.ndarray:
            return np.ones(rows.shape[0], dtype=bool)

    _registered("test_forever", Forever)
    try:
        with pytest.raises(snooze.PolicyConformanceError, match="patience=None must be an integer >= 1"):
            snooze.Scheduler({"a": [{"id": 0}]}, snooze.SchedulerConfig(policy="test_forever"))
    finally:
        POLICIES.unregister("test_forever")


def test_a_report_s_rewards_are_read_only_to_a_policy() -> None:
    """A plug-in that edits Report.rewards in place changed the caller's rewards; now it cannot, and the
    caller's array (and the batch's) keep what the rollout gave."""

    class Editor(Policy):
        def report(self, memory: Any, report: Any) -> Changes | None:
            report.rewards[:] = 0.0
            return None

    _registered("test_editor", Editor)
    try:
        sched = snooze.Scheduler(
            {"a": [{"id": 0}]}, snooze.SchedulerConfig(batch_size=1, group_size=2, policy="test_editor")
        )
        cands, rewards = sched.propose(), np.array([[1.0, 0.0]])
        with pytest.raises(ValueError, match="read-only"):
            sched.report(cands, rewards)
        assert rewards.tolist() == [[1.0, 0.0]] and len(sched.pending_candidates()) == 1  # nothing recorded
    finally:
        POLICIES.unregister("test_editor")


@pytest.mark.parametrize("field", ["new", "regressed", "retired"])
def test_changes_of_the_wrong_length_are_a_conformance_error(field: str) -> None:
    class Miscounted(Policy):
        def report(self, memory: Any, report: Any) -> Changes | None:
            p = report.prompts()
            return Changes(**{field: np.zeros(p.ds.shape[0] + 1, dtype=bool)})

    _registered("test_miscounted", Miscounted)
    try:
        sched = snooze.Scheduler({"a": [{"id": i} for i in range(3)]}, snooze.SchedulerConfig(policy="test_miscounted"))
        with pytest.raises(
            snooze.PolicyConformanceError,
            match=rf"Changes.{field} is ndarray bool \(4,\), not a bool array of shape \(3,\)",
        ):
            sched.step(lambda c: np.ones((len(c), 8)))
    finally:
        POLICIES.unregister("test_miscounted")
