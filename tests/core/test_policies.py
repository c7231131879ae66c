"""The policy plug-in point: a registered policy with its own per-prompt column and skip mask runs, is
saved and restored, and is offered wherever the config's choices are read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import snooze
from snooze.core.policies import POLICIES, SKIP_RULES, Changes, Column, Policy, Report, register_policy


@pytest.fixture
def seen_twice() -> Iterator[type[Policy]]:
    """A policy written as a user would: one byte a prompt (groups seen), skip prompts seen twice."""

    @register_policy("test_seen_twice")
    class SeenTwice(Policy):
        columns = (Column("seen", np.uint8),)

        def skip_mask(self, table, stream, rows, awake):  # noqa: ANN001, ANN201
            return awake & (table.columns["seen"][rows] >= 2)

        def report(self, memory, report: Report) -> Changes | None:  # noqa: ANN001
            seen = memory.columns["seen"]
            np.add.at(seen, report.group_rows, 1)
            return None

    yield SeenTwice
    POLICIES._classes.pop("test_seen_twice")


def test_the_built_ins_are_registered_in_order() -> None:
    assert list(POLICIES) == ["grpo", "dynamic_sampling", "filter", "snooze", "predictive"]
    assert list(SKIP_RULES) == ["counter", "history"]
    assert POLICIES["grpo"].trains_on_zero_signal and not POLICIES["snooze"].trains_on_zero_signal


def test_names_are_checked_when_registering() -> None:
    with pytest.raises(snooze.ConfigError, match="registered already"):
        register_policy("snooze")(type("Other", (Policy,), {}))
    with pytest.raises(snooze.ConfigError, match="must be a Python identifier"):
        register_policy("two words")(type("Other", (Policy,), {}))


def test_a_plugin_policy_keeps_its_column_skips_by_its_mask_and_resumes(seen_twice, tmp_path: Path) -> None:
    data = {"d": [{"id": i} for i in range(6)]}
    cfg = snooze.SchedulerConfig(batch_size=2, group_size=2, policy="test_seen_twice", max_gen_rounds=1)
    sched = snooze.Scheduler(data, cfg, seed=0)
    issued: list[int] = []
    for _ in range(6):  # 12 encounters: every prompt is rolled out twice, then skipped
        cands = sched.propose()
        issued += [c.row for c in cands]
        sched.report(cands, np.tile([0.0, 1.0], (len(cands), 1)))
        sched.finish_step()
    assert sorted(issued) == sorted(list(range(6)) * 2)
    assert sched._parts.memory.tables[0].columns["seen"].tolist() == [2] * 6
    assert not sched.propose()  # every prompt is masked now: the walk gives up after one epoch (patience 1)
    assert (
        sched._parts.step_metrics.scalars["snooze/skipped"] == 6
        and sched._parts.memory.tables[0].columns["seen"].tolist() == [2] * 6
    )
    state = sched.state_dict()
    assert state["arrays"]["ds0.seen"].tolist() == [2] * 6
    sched.save(tmp_path / "ck")
    again = snooze.Scheduler.load(tmp_path / "ck", data)
    assert (
        isinstance(again._parts.policy, seen_twice)
        and again._parts.memory.tables[0].columns["seen"].tolist() == [2] * 6
    )


@pytest.mark.parametrize("learns", [False, True])
def test_audited_groups_reach_only_the_audited_hook(learns: bool) -> None:
    """A policy that skips every prompt it has seen once: the audit rolls some of those encounters out, and
    their groups go to ``audited``, never to ``report``. Without the hook the memory evolves as if they had
    been skipped (each prompt reported once); a hook that forgets the prompt brings it back, and only then."""
    calls: dict[str, list[int]] = {"report": [], "audited": []}

    class Once(Policy):
        columns = (Column("seen", np.uint8),)

        def skip_mask(self, table, stream, rows, awake):  # noqa: ANN001, ANN201
            return awake & (table.columns["seen"][rows] >= 1)

        def report(self, memory, report: Report) -> Changes | None:  # noqa: ANN001
            calls["report"] += np.unique(report.group_rows).tolist()  # (a prompt may come up twice in a round)
            memory.columns["seen"][report.group_rows] = 1
            return None

    if learns:

        def audited(self: Policy, memory: Any, report: Report) -> Changes | None:
            calls["audited"] += report.group_rows.tolist()
            memory.columns["seen"][report.group_rows] = 0
            return None

        Once.audited = audited  # type: ignore[method-assign]
    register_policy("test_audit_hook")(Once)
    try:
        cfg = snooze.SchedulerConfig(batch_size=4, group_size=2, max_gen_rounds=2, policy="test_audit_hook", audit=0.5)
        sched = snooze.Scheduler({"d": [{"id": i} for i in range(8)]}, cfg, seed=0)
        audited: list[int] = []
        for _ in range(12):
            cands = sched.propose()
            if cands:
                sched.report(cands, np.tile([0.0, 1.0], (len(cands), 1)))
            record = sched.finish_step().record
            row = {c.ticket: c.row for c in cands}
            audited += [row[t] for t in record.ticket[record.audit].tolist() if t in row]
        assert audited and sched.metrics()["total/audit_groups"] == len(audited)
        reported = np.bincount(calls["report"], minlength=8)
        if not learns:
            assert reported.tolist() == [1] * 8 and not calls["audited"]
        else:
            assert sorted(calls["audited"]) == sorted(audited)
            assert (reported >= 1).all() and reported.sum() > 8  # prompts came back after their audit...
            assert (reported <= 1 + np.bincount(audited, minlength=8)).all()  # ...and only after one
    finally:
        POLICIES._classes.pop("test_audit_hook")
