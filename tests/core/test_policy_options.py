"""Each policy declares its options; SchedulerConfig holds them; the flat names of earlier pre-releases are refused,
naming the options class that holds each."""

from __future__ import annotations

import dataclasses
import runpy
from dataclasses import dataclass
from pathlib import Path

import pytest

import snooze
from snooze import HistoryOptions, NoOptions, PredictiveOptions, SchedulerConfig, SnoozeOptions
from snooze.core.options import POLICIES
from snooze.core.policies import Policy, register_policy

ROOT = Path(__file__).resolve().parents[2]
FLAT_NAMES = {  # the flat name of a pre-release -> what holds that option now
    "snooze_factor": "SnoozeOptions(factor=",
    "hard_snooze_factor": "SnoozeOptions(hard_factor=",
    "snooze_hard": "SnoozeOptions(hard=",
    "backoff": "SnoozeOptions(backoff=",
    "max_snooze": "SnoozeOptions(max=",
    "skip": "SnoozeOptions(skip=",
    "history_weight": "SnoozeOptions(skip='history', rule=HistoryOptions(weight=",
    "predict_margin": "PredictiveOptions(margin=",
    "predict_hard_margin": "PredictiveOptions(hard_margin=",
    "predict_recheck": "PredictiveOptions(recheck=",
    "predict_backoff": "PredictiveOptions(backoff=",
}
POLICY_FIELDS = set(FLAT_NAMES)


def test_the_config_has_no_policy_specific_field() -> None:
    fields = {f.name for f in dataclasses.fields(SchedulerConfig)}
    assert not fields & POLICY_FIELDS and "options" in fields
    assert [POLICIES[p].Options for p in POLICIES] == [
        NoOptions,
        NoOptions,
        NoOptions,
        SnoozeOptions,
        PredictiveOptions,
    ]


def test_options_given_as_an_object_or_a_mapping_are_the_same_config() -> None:
    want = SchedulerConfig(
        policy="snooze", options=SnoozeOptions(factor=3, skip="history", rule=HistoryOptions(weight=0.25))
    )
    assert SchedulerConfig(options=SnoozeOptions(factor=3, skip="history", rule=HistoryOptions(weight=0.25))) == want
    assert SchedulerConfig(policy="snooze", options={"factor": 3, "skip": "history", "rule": {"weight": 0.25}}) == want
    assert SchedulerConfig.from_dict(want.to_dict()) == want
    assert SchedulerConfig(options=PredictiveOptions(margin=1.0)).policy == "predictive"
    assert SchedulerConfig(policy="predictive", options={"margin": 1.0}).options == PredictiveOptions(margin=1.0)
    assert SchedulerConfig(policy="grpo").options == NoOptions()


def test_replace_changes_one_option_and_a_new_policy_starts_from_its_defaults() -> None:
    cfg = SchedulerConfig(options=SnoozeOptions(factor=2, hard=True))
    assert cfg.replace(options=cfg.options.replace(factor=4)).options == SnoozeOptions(factor=4, hard=True)
    assert cfg.replace(policy="predictive").options == PredictiveOptions()
    assert cfg.replace(batch_size=3).options == cfg.options


def test_wrong_options_are_config_errors_that_name_what_was_written() -> None:
    with pytest.raises(snooze.ConfigError, match="policy 'snooze' takes SnoozeOptions"):
        SchedulerConfig(policy="snooze", options=PredictiveOptions())
    with pytest.raises(
        snooze.ConfigError, match="policies 'grpo', 'dynamic_sampling', 'filter' take NoOptions; give policy="
    ):
        SchedulerConfig(options=NoOptions())
    with pytest.raises(snooze.ConfigError, match=r"^margin=0.0: must be a finite number > 0"):
        SchedulerConfig(policy="predictive", options={"margin": 0.0})
    with pytest.raises(snooze.ConfigError, match=r"^margin=0.0: must be"):
        PredictiveOptions(margin=0.0)
    with pytest.raises(snooze.ConfigError, match=r"^weight=2.0: must be in \(0, 1\]"):  # the skip rule's own option
        SchedulerConfig(policy="snooze", options={"skip": "history", "rule": {"weight": 2.0}})
    with pytest.raises(snooze.ConfigError, match=r"'snooze_facto'.*SnoozeOptions\(factor="):  # a misspelt flat name
        SchedulerConfig(snooze_facto=2)
    with pytest.raises(snooze.ConfigError, match="unknown SnoozeOptions field"):
        SchedulerConfig(policy="snooze", options={"factr": 2})
    with pytest.raises(snooze.ConfigError, match="skip rule 'history' takes HistoryOptions"):
        SnoozeOptions(skip="history", rule=NoOptions())


@pytest.mark.parametrize("flat", sorted(FLAT_NAMES))
def test_a_flat_name_of_a_pre_release_is_refused_naming_the_options_that_hold_it(flat: str) -> None:
    with pytest.raises(snooze.ConfigError, match=rf"unknown SchedulerConfig field\(s\) {flat!r}") as err:
        SchedulerConfig(**{flat: 1})
    assert FLAT_NAMES[flat] in str(err.value)  # the options class and field that hold it now


def test_a_saved_config_with_the_flat_names_of_a_pre_release_is_refused() -> None:
    old = {
        "batch_size": 4,
        "policy": "filter",
        "snooze_factor": 2,
        "snooze_hard": False,
        "hard_snooze_factor": None,
        "backoff": 1.0,
        "max_snooze": 1000000,
        "skip": "counter",
        "history_weight": 0.5,
        "predict_margin": 0.5,
        "predict_hard_margin": None,
        "predict_recheck": 2.0,
        "predict_backoff": 2.0,
        "group_size": 4,
    }
    with pytest.raises(snooze.ConfigError, match=r"unknown SchedulerConfig field\(s\) .*'snooze_factor'") as err:
        SchedulerConfig.from_dict(old)
    assert "options=SnoozeOptions(" in str(err.value) or "options=PredictiveOptions(" in str(err.value)
    cfg = SchedulerConfig(batch_size=4, policy="filter", group_size=4)
    assert SchedulerConfig.from_dict(cfg.to_dict()) == cfg
    assert "snooze_factor" not in cfg.to_dict() and cfg.to_dict()["options"] == {}


def test_the_example_policy_with_a_knob_of_its_own_runs_from_one_file() -> None:
    """examples/custom_policy.py registers a policy with its own options class, columns, mask and run-level state;
    nothing in snooze is edited for it. Worked out by hand: 4 prompts, always solved, 2 a round. Step 1's rounds
    1-4 roll out each prompt twice (16 rollouts: 8 groups), each rests then until step 3; round 5 meets 4 resting
    prompts (skipped) and gives up. Steps 2 and 3 skip the 4 once each. Step 4 is step 1 again (resting until 6),
    steps 5 and 6 are steps 2 and 3: 16 groups, 24 skips."""
    try:
        got = runpy.run_path(str(ROOT / "examples" / "custom_policy.py"))["main"]()
        assert got == {"skipped": 24, "generated": 16}
        assert SchedulerConfig(policy="rest", options={"steps": 1}).options.steps == 1
        with pytest.raises(snooze.ConfigError, match=r"^streak=0: must be an integer in \[1, 255\]"):
            SchedulerConfig(policy="rest", options={"streak": 0})
    finally:
        POLICIES.unregister("rest")


def test_an_option_given_without_the_setting_that_uses_it_is_refused() -> None:
    """``history``'s weight given while the skip rule is ``counter`` was dropped silently; now refused, naming the
    setting to add."""
    with pytest.raises(snooze.ConfigError, match=r"options of skip rule 'history', but skip='counter'; add skip="):
        snooze.SchedulerConfig(policy="snooze", options={"rule": {"weight": 0.25}})
    assert snooze.SnoozeOptions(skip="history", rule={"weight": 0.25}).rule.weight == 0.25


@dataclass(frozen=True)
class _NoDefault(snooze.Options):
    level: int


@dataclass(frozen=True)
class _Rounds(snooze.Options):
    gen_rounds: int = 2
    """Becomes the key max_gen_rounds under a policy named "max"."""


@dataclass(frozen=True)
class _Factor(snooze.Options):
    factor: int = 1
    """Its key under a policy named "snooze_x" is snooze_x_factor: no clash with snooze_factor."""


@pytest.mark.parametrize(
    ("name", "opts", "match"),
    [
        ("no_default", _NoDefault, r"options \['level'\] of _NoDefault have no default"),
        ("max", _Rounds, r"option key\(s\) \['max_gen_rounds'\] .* name something else already"),
        ("borrowed", snooze.SnoozeOptions, r"SnoozeOptions is the options class of policy 'snooze' already"),
        ("plain_int", int, "must be a dataclass subclassing"),
    ],
)
def test_the_registry_refuses_options_it_could_not_tell_apart(name: str, opts: type, match: str) -> None:
    """An options class whose field has no default (its policy could not be built with defaults), whose key clashes
    with a SchedulerConfig field (one flag for two things), or that another policy owns already (the policy of
    an options object could not be read from it): refused at registration, nothing registered."""

    class Probe(Policy):
        Options = opts

    with pytest.raises(snooze.ConfigError, match=match):
        register_policy(name)(Probe)
    assert name not in POLICIES


def test_a_policy_with_its_own_options_class_registers() -> None:
    class Probe(Policy):
        Options = _Factor

    register_policy("snooze_x")(Probe)
    try:
        assert snooze.SchedulerConfig(policy="snooze_x", options={"factor": 3}).options == _Factor(factor=3)
    finally:
        POLICIES.unregister("snooze_x")
