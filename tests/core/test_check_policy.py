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
    snooze.check_policy(POLICIES[policy], cfg)


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
        assert batch.metrics["snooze/asleep"] == int(np.count_nonzero(sched.tables[0].counter)) > 0
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
        ("test_int_mask", IntMask, "skip mask broken after step 1: .*int64"),
        ("test_forgetful", Forgetful, "state round-trip broken at step 4"),
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
        snooze.check_policy(POLICIES["filter"], snooze.SchedulerConfig(policy="grpo"))
