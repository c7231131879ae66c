"""The plug-in face as a user meets it (issue 50, part 1): what concepts.md "Writing a policy" shows works as
shown, a typed plug-in imports nothing private, and check_policy catches a policy that forgets its state."""

from __future__ import annotations

import ast
import runpy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import snooze
from snooze.core import policies
from snooze.core.options import POLICIES
from snooze.core.policies import Changes, Options, Policy, as_int, register_policy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "custom_policy.py"


@pytest.fixture
def example() -> Iterator[dict[str, Any]]:
    """The example's module namespace, its ``rest`` policy registered for the test."""
    ns = runpy.run_path(str(EXAMPLE))
    try:
        yield ns
    finally:
        POLICIES.unregister("rest")


def test_changes_are_built_by_keyword_and_checked_against_the_report() -> None:
    """``Changes(new=...)`` as the docs and the conformance error show it: it needed a positional ``ds`` that only
    fed a shape check, and a ``blocked`` that nobody read. The flags are checked against the report's prompts: one
    bool each, so an array of another length, or the old positional ``ds`` (an int array), is refused by name."""
    assert Changes._fields == ("new", "regressed", "retired")
    assert Changes() == (None, None, None)
    assert Changes(retired=np.ones(2, dtype=bool)).retired.tolist() == [True, True]

    class Old(Policy):
        def report(self, memory: Any, report: Any) -> Changes:
            return Changes(report.group_ds)  # the old Changes(ds, ...): an int array where new= goes

    register_policy("test_old_changes")(Old)
    try:
        sched = snooze.Scheduler(
            {"a": [{"id": i} for i in range(3)]}, snooze.SchedulerConfig(batch_size=3, policy="test_old_changes")
        )
        cands = sched.propose()
        with pytest.raises(snooze.PolicyConformanceError, match=r"Changes.new is ndarray int\d+ \(3,\), not a bool"):
            sched.report(cands, np.ones((len(cands), 8)))
        assert len(sched.pending_candidates()) == 3  # nothing recorded
    finally:
        POLICIES.unregister("test_old_changes")


def test_the_types_a_hook_is_handed_are_public() -> None:
    """A typed plug-in imports what its hooks receive from snooze.core.policies (they were private)."""
    for name in ("PromptMemory", "PromptTable", "DatasetStream", "Report", "Prompts", "Context", "SkipMask"):
        assert name in policies.__all__ and hasattr(policies, name), name
    sched = snooze.Scheduler({"a": [{"id": i} for i in range(3)]})
    assert isinstance(sched._parts.memory.tables[0], policies.PromptTable) and isinstance(
        sched._parts.streams[0], policies.DatasetStream
    )


def test_an_options_class_stores_its_checked_values_through_a_public_method() -> None:
    """``Options.set_checked`` (was the private ``_set``, which the example called): a checked value replaces the
    given one; a name that is no field is refused."""

    @dataclass(frozen=True)
    class EveryOptions(Options):
        every: int = 2

        def check(self) -> None:
            self.set_checked("every", as_int(self.every, "every", 1))

    assert type(EveryOptions(every=np.int64(3)).every) is int
    with pytest.raises(snooze.ConfigError, match="every=0: must be an integer >= 1"):
        EveryOptions(every=0)
    with pytest.raises(snooze.ConfigError, match=r"set_checked\('often', ...\): not one of its fields"):
        EveryOptions().set_checked("often", 1)


def test_the_example_is_written_on_the_public_face() -> None:
    """examples/custom_policy.py imports nothing private and reaches for no private name (it called
    ``Options._set``)."""
    tree = ast.parse(EXAMPLE.read_text())
    private = [
        ast.unparse(node)
        for node in ast.walk(tree)
        if (
            isinstance(node, ast.ImportFrom)
            and any(p.startswith("_") and p != "__future__" for p in (node.module or "").split("."))
        )
        or (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"))
    ]
    assert not private, private


def test_check_policy_refuses_a_policy_that_forgets_its_state_at_its_defaults(example: dict[str, Any]) -> None:
    """The issue's scenario: a policy resting a prompt for some optimizer steps after a streak of too-easy groups,
    with run-level state (the example's ``rest``), and a variant whose ``state_dict()`` returns ``{}``. check_policy
    passed the variant at its defaults (8 steps over 65 prompts never reached a streak); its run now reaches the
    state within a few steps, and names the round-trip rule and the attribute lost. The variant needs an options
    class of its own: a subclass that reuses its parent's is refused (the registry names the options' owner)."""
    Rest, RestOptions = example["Rest"], example["RestOptions"]
    snooze.check_policy(Rest)
    snooze.check_policy(Rest, options={"streak": 1, "steps": 5}, steps=6)

    with pytest.raises(snooze.ConfigError, match="RestOptions is the options class of policy 'rest' already"):
        register_policy("test_rest_reused")(type("Reused", (Rest,), {}))

    @dataclass(frozen=True)
    class ForgetfulOptions(RestOptions):  # type: ignore[misc, valid-type]
        pass

    class Forgetful(Rest):  # type: ignore[misc, valid-type]
        Options = ForgetfulOptions

        def state_dict(self) -> dict[str, Any]:
            return {}

        def load_state_dict(self, state: Any) -> None:
            pass

    register_policy("test_rest_forgetful")(Forgetful)
    try:
        with pytest.raises(
            snooze.PolicyConformanceError,
            match=r"state round-trip broken at step 8: policy attribute 'steps_done' is 8 in the run that saved and "
            r"0 after loading its state",
        ):
            snooze.check_policy(Forgetful)
    finally:
        POLICIES.unregister("test_rest_forgetful")


def test_check_policy_takes_the_options_of_the_run_and_refuses_a_config_for_them(example: dict[str, Any]) -> None:
    with pytest.raises(snooze.ConfigError, match="options are the policy's; pass a whole config as config="):
        snooze.check_policy(example["Rest"], snooze.SchedulerConfig(policy="rest"))
    with pytest.raises(snooze.ConfigError, match=r"steps=2\): must be an integer >= 4"):
        snooze.check_policy(example["Rest"], steps=2)
    with pytest.raises(snooze.ConfigError, match="unknown RestOptions field"):
        snooze.check_policy(example["Rest"], options={"streaks": 2})


def test_the_policy_written_in_concepts_md_runs_as_documented() -> None:
    """The block of docs/concepts.md "Writing a policy", executed as a user would paste it: it registers, runs, rests
    the prompts it says, and keeps the contract (check_policy at its defaults and at other options)."""
    text = (ROOT / "docs" / "concepts.md").read_text()
    section = text[text.index("### Writing a policy") :]
    block = section[section.index("```python\n") + len("```python\n") : section.index("```\n", 10)]
    ns: dict[str, Any] = {}
    exec(compile(block, "concepts.md", "exec"), ns)
    try:
        Rest, RestOptions = ns["Rest"], ns["RestOptions"]
        snooze.check_policy(Rest)
        snooze.check_policy(Rest, options=RestOptions(streak=1, steps=4))
        cfg = snooze.SchedulerConfig(batch_size=1, group_size=2, audit=0.0, policy="rest", options={"streak": 1})
        sched = snooze.Scheduler({"a": [{"id": 0}, {"id": 1}]}, cfg, seed=0)
        sched.step(lambda c: [[1.0, 1.0]] * len(c))  # both too easy: each rests until step 2
        assert sched._parts.memory.tables[0].columns["until"].tolist() == [2, 2]
        assert sched.step(lambda c: [[1.0, 1.0]] * len(c)).metrics["snooze/skipped"] == 2  # step 2: both skipped
        assert len(sched.step(lambda c: [[1.0, 1.0]] * len(c)).record.tickets("dropped")) == 2  # step 3: back
    finally:
        POLICIES.unregister("rest")
