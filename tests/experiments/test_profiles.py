"""Profile and with_overrides refuse a field a comparison cannot use, at construction (issue 24)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from snooze.core.errors import ConfigError
from snooze.experiments.family import FAMILY
from snooze.experiments.profiles import PROFILES, Profile, with_overrides
from snooze.trainer.warmup import WarmupConfig

QUICK = PROFILES["quick"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"tasks": ""}, r"Profile.tasks='': no tasks given"),
        ({"tasks": "zzz"}, r"Profile.tasks='zzz': task family 'zzz': must be one of"),
        ({"tasks": 5}, r"Profile.tasks=5: must be a string"),
        ({"fig3_task": "zzz"}, r"Profile.fig3_task='zzz'"),
        ({"fig3_task": None}, r"Profile.fig3_task=None: must be a string"),
        ({"fig3_task": "rev:3"}, r"Profile.fig3_task='rev:3'.*a single level cannot be split"),
        ({"fig3_split": "x"}, r"Profile.fig3_split='x': must be an integer >= 1 or None"),
        ({"fig3_split": 1.5}, r"Profile.fig3_split=1.5: must be an integer"),
        ({"fig3_split": True}, r"Profile.fig3_split=True: must be an integer"),
        ({"fig3_split": 99}, r"Profile.fig3_task='rev:3-5', fig3_split=99: .*must be in 3..4"),
        ({"n_head": 5}, r"Profile.n_head=5: must divide d_model=48"),
        ({"warmup_target": True}, r"Profile.warmup_target=True: must be a number in \(0, 1\]"),
        ({"warmup_target": "x"}, r"Profile.warmup_target='x': must be a number in \(0, 1\]"),
        ({"warmup_target": float("nan")}, r"Profile.warmup_target=nan"),
        ({"warmup_per_task": "no"}, r"Profile.warmup_per_task='no': must be True or False"),
        ({"fig3_seeds": 5}, r"Profile.fig3_seeds=5: must be at most seeds=1"),
    ],
    ids=repr,
)
def test_a_field_a_comparison_cannot_use_is_refused_when_the_profile_is_made(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        replace(QUICK, **changes)
    if None not in changes.values():  # (with_overrides ignores a None: the option was not given)
        with pytest.raises(ConfigError, match=message):
            with_overrides(QUICK, **changes)


@pytest.mark.parametrize(
    ("profile", "changes", "message"),
    [
        (QUICK, {"nope": 1}, r"with_overrides: Profile has no field\(s\) \['nope'\]"),
        (None, {"steps": 2}, r"with_overrides\(profile=None\): must be a Profile"),
        ("quick", {"steps": 2}, r"with_overrides\(profile='quick'\): must be a Profile"),
    ],
)
def test_with_overrides_refuses_what_is_not_a_profile_field(
    profile: Any, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        with_overrides(profile, **changes)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("target_accuracy", True, r"WarmupConfig.target_accuracy=True: must be a number in \(0, 1\]"),
        ("target_accuracy", "x", r"WarmupConfig.target_accuracy='x'"),
        ("per_task", "no", r"WarmupConfig.per_task='no': must be True or False"),
    ],
)
def test_warmup_config_refuses_a_target_or_per_task_of_the_wrong_type(field: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WarmupConfig(**{field: value})


def test_every_named_profile_still_constructs_as_it_was() -> None:
    from snooze.experiments import regime  # noqa: F401  (imports its profiles, if any)

    for profile in [*PROFILES.values(), *FAMILY.values()]:
        assert replace(profile) == profile
    assert with_overrides(QUICK, steps=None) == QUICK
    assert with_overrides(QUICK, tasks="add,rev:3-5").tasks == "add,rev:3-5"
    assert replace(PROFILES["default"], fig3_split=None).fig3_split is None
    assert with_overrides(QUICK, warmup_target=1, warmup_per_task=True).warmup_per_task is True
    assert Profile("add", "add", 8, 8, 1, 1, 1, 2, 1, 1e-4, 1, 8, 0.5, n_head=2).fig3_task == "add"
