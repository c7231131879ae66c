"""The CLI's config-backed options come from the dataclass fields: flag, help, default and choices."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pytest

import snooze
from snooze.analysis.replay import StepShape
from snooze.analysis.stratify import StratifyConfig
from snooze.cli import baseline, compare, replay, stratify
from snooze.cli._options import (
    add_options,
    add_policy_options,
    build,
    checked_policy_options,
    field_help,
    flag,
    off_help,
    override,
    policy_option_keys,
    policy_options,
    values,
)
from snooze.cli.main import _build_parser, main
from snooze.core.config import SchedulerConfig, field_choices
from snooze.core.policies import POLICIES, Policy, register_policy
from snooze.experiments.baseline import BaselineConfig
from snooze.experiments.compare import Profile
from snooze.experiments.profiles import PROFILES
from snooze.trainer.loop import TrainConfig

# (subcommand, config class, fields, the text that says where the default comes from when the option is left out)
BACKED = [
    ("compare", Profile, compare.PROFILE_OPTIONS, "the profile's"),
    ("compare", SchedulerConfig, compare.ARM_OPTIONS, None),
    ("compare", TrainConfig, ("device",), None),
    ("replay", SchedulerConfig, replay.SCHEDULER_OPTIONS[:1], "the log's header, else its first line"),
    ("replay", SchedulerConfig, replay.SCHEDULER_OPTIONS[1:2], "the log's header, else 0,1"),
    ("replay", SchedulerConfig, replay.SCHEDULER_OPTIONS[2:], None),
    ("replay", StepShape, replay.SHAPE_OPTIONS, "the log's header, else inferred from the log"),
    ("stratify", StratifyConfig, tuple(f.name for f in dataclasses.fields(StratifyConfig)), None),
    ("baseline", BaselineConfig, baseline.OPTIONS, None),
    ("baseline", BaselineConfig, baseline.PROFILE_OPTIONS, "the profile's"),
]


def _actions(command: str) -> dict[str, argparse.Action]:
    parser = _build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {a.dest: a for a in sub._actions}


@pytest.mark.parametrize(("command", "cls", "names", "unset"), BACKED, ids=[f"{b[0]}-{b[1].__name__}" for b in BACKED])
def test_every_config_backed_option_is_its_field(command, cls, names, unset) -> None:
    actions = _actions(command)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in names:
        action = actions[name]
        default = fields[name].default
        turned_off = isinstance(default, bool) and default and unset is None  # --no-<name>: its "False:" paragraph
        assert (off_help(cls, name) if turned_off else field_help(cls, name)) in action.help  # the docstring's text
        if unset is not None:
            assert action.default is None and f"(default: {unset}" in action.help
        else:
            assert action.default == default
            assert "(default: " in action.help, f"--{name}: the help does not say its default"
        if isinstance(default, bool):
            assert action.option_strings[0] == (f"--no-{name.replace('_', '-')}" if default else flag(name))
        else:
            assert action.option_strings[0] == flag(name)
            assert tuple(action.choices or ()) == tuple(field_choices(cls, name) or ())


def test_every_policy_option_is_a_compare_option_of_its_options_class() -> None:
    """The flags of the policy arms come from the registry of options classes: flag = ``--<name>-<field>``,
    help = the option's docstring, left out = the arm's (None), choices = the option's (``skip``: the skip rules)."""
    actions = _actions("compare")
    seen = set()
    for policy in POLICIES:
        for key, owner, field, _ in policy_option_keys(policy):
            action = actions[key]
            seen.add(key)
            assert action.option_strings[0] == flag(key) and action.default is None
            assert field_help(owner, field).lower() in action.help.lower() and "(default: the arm's" in action.help
            if field_choices(owner, field):
                assert tuple(action.choices) == tuple(field_choices(owner, field))
    assert {
        "snooze_factor",
        "snooze_hard",
        "snooze_backoff",
        "snooze_skip",
        "history_weight",
        "predictive_margin",
        "predictive_recheck",
    } <= seen
    assert tuple(actions["snooze_skip"].choices) == ("counter", "history")


def test_a_registered_policy_with_options_gets_its_flags() -> None:
    @dataclass(frozen=True)
    class ProbeOptions(snooze.Options):
        level: int = 3
        """How much to probe."""

    @register_policy("cli_probe")
    class _Probe(Policy):
        Options = ProbeOptions

    try:
        actions = _actions("compare")
        assert (
            actions["cli_probe_level"].option_strings == ["--cli-probe-level"]
            and "How much to probe." in actions["cli_probe_level"].help
        )
        args = argparse.Namespace(**{k: None for k in actions} | {"cli_probe_level": 4})
        assert SchedulerConfig(policy="cli_probe", options=policy_options(args, "cli_probe")).options == ProbeOptions(
            level=4
        )
    finally:
        POLICIES.unregister("cli_probe")


def test_choices_are_read_from_the_registry_when_used() -> None:
    @register_policy("cli_test_policy")
    class _Probe(Policy):
        """A policy registered by a test."""

    try:
        assert "cli_test_policy" in field_choices(SchedulerConfig, "policy")
        parser = argparse.ArgumentParser()
        add_options(parser, SchedulerConfig, ["policy"])
        assert values(parser.parse_args(["--policy", "cli_test_policy"]), ["policy"]) == {"policy": "cli_test_policy"}
        assert SchedulerConfig(policy="cli_test_policy").policy == "cli_test_policy"
    finally:
        POLICIES._classes.pop("cli_test_policy")
    with pytest.raises(snooze.ConfigError, match="must be one of 'grpo', 'dynamic_sampling', 'filter', 'snooze'"):
        SchedulerConfig(policy="cli_test_policy")


def test_a_bad_value_names_the_option_it_came_from() -> None:
    with pytest.raises(snooze.ConfigError, match=r"batch_size=0: must be an integer >= 1 \(option --batch-size\)"):
        build(SchedulerConfig, {"batch_size": 0})
    parser = argparse.ArgumentParser()
    add_policy_options(parser, "snooze", unset="the arm's")
    with pytest.raises(snooze.ConfigError, match=r"factor=-1: must be an integer >= 0 \(option --snooze-factor\)"):
        checked_policy_options(parser.parse_args(["--snooze-factor", "-1"]), "snooze")


@dataclass(frozen=True)
class _Undocumented:
    mode: Literal["a", "b"] = "a"
    """Which one."""

    count: int = 1


def test_a_field_without_a_docstring_cannot_become_an_option() -> None:
    parser = argparse.ArgumentParser()
    add_options(parser, _Undocumented, ["mode"])
    assert parser.parse_args([]).mode == "a" and "Which one." in parser.format_help()
    with pytest.raises(snooze.ConfigError, match="_Undocumented.count has no docstring"):
        add_options(parser, _Undocumented, ["count"])


def test_one_spelling_and_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _actions("compare")["snooze_factor"].option_strings == ["--snooze-factor"]
    assert main(["compare", "--out", str(tmp_path / "c"), "--snooze-factor", "-2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["snooze compare: error: factor=-2: must be an integer >= 0 (option --snooze-factor)"]
    assert not (tmp_path / "c").exists()  # refused before anything was written
    log = tmp_path / "log.jsonl"
    log.write_text('{"step": 0, "dataset": "d", "id": 1, "rewards": [1, 0]}\n')
    assert main(["replay", str(log), "--out", str(tmp_path / "r"), "--easy-threshold", "2"]) == 2
    assert "(option --easy-threshold)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["compare", "--out", str(tmp_path), "--snooze-skip", "sometimes"])
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


def test_stratify_options_reach_the_config(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    stratify.add_arguments(parser)
    (tmp_path / "x.jsonl").write_text("")  # INPUT must be an existing file
    args = parser.parse_args(
        [str(tmp_path / "x.jsonl"), "--out", "o", "--too-hard", "0.1", "--no-drop-too-easy", "--reward-range=-1,1"]
    )
    cfg = build(StratifyConfig, values(args, [f.name for f in dataclasses.fields(StratifyConfig)]))
    assert (cfg.too_hard, cfg.drop_too_easy, cfg.reward_range, cfg.postpone_too_hard) == (0.1, False, (-1.0, 1.0), True)
    assert np.isclose(cfg.easy, StratifyConfig().easy)


def test_compare_lr_and_rounds_are_the_profiles_and_checked_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    compare.add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path / "a"), "--lr", "1e-5", "--max-gen-rounds", "64"])
    profile = override(PROFILES["default"], values(args, compare.PROFILE_OPTIONS))
    assert (profile.lr, profile.max_gen_rounds) == (1e-5, 64)
    assert main(["compare", "--out", str(tmp_path / "c"), "--lr", "0"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "snooze compare: error: Profile.lr=0.0: must be a finite number > 0 (option --lr)"
    )
    assert not (tmp_path / "c").exists()


def test_a_range_option_says_how_to_write_a_negative_low_end(tmp_path: Path) -> None:
    assert "--reward-range=-1,1" in _actions("replay")["reward_range"].help
    log = tmp_path / "rewards.jsonl"
    log.write_text('{"step": 0, "dataset": "d", "id": "a", "rewards": [-1, 1]}\n')
    assert (
        main(["replay", str(log), "--out", str(tmp_path / "out"), "--reward-range=-1,1"]) == 0
    )  # the form it names works


def test_compare_staleness_is_the_profiles_and_reaches_the_train_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from snooze.experiments.profiles import train_config

    parser = argparse.ArgumentParser()
    compare.add_arguments(parser)
    args = parser.parse_args(["--out", str(tmp_path / "a"), "--staleness", "2"])
    profile = override(PROFILES["default"], values(args, compare.PROFILE_OPTIONS))
    assert profile.staleness == 2 and train_config(profile, seed=0).staleness == 2
    unset = override(PROFILES["default"], values(parser.parse_args(["--out", "o"]), compare.PROFILE_OPTIONS))
    assert unset.staleness == 0
    assert main(["compare", "--out", str(tmp_path / "c"), "--staleness", "-1"]) == 2
    assert "Profile.staleness=-1: must be an integer >= 0 (option --staleness)" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
