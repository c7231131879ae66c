"""``snooze compare`` with the screening arms (partial groups): the arms run, and the summary counts every rollout."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from snooze.cli.main import main
from snooze.experiments.compare import ARMS, DEFAULT_ARMS, PROFILES, RECOMMENDED_ARM, SCREEN_ARMS
from snooze.experiments.family_table import paired
from snooze.experiments.summary_file import read_summary


def test_screen_arms_are_dapo_and_the_recommended_setting_with_screening_rollouts() -> None:
    assert SCREEN_ARMS == ("dynamic_sampling-screen2", f"{RECOMMENDED_ARM}-screen2", f"{RECOMMENDED_ARM}-screen4")
    assert not set(SCREEN_ARMS) & set(DEFAULT_ARMS)  # run only when named
    quick = PROFILES["quick"]
    for arm in SCREEN_ARMS:
        base, _, k = arm.rpartition("-screen")
        screened, plain = ARMS[arm].config(quick, []), ARMS[base].config(quick, [])
        k = min(int(k), quick.group_size // 2)  # the screen4 arm: at most half the group, 2 of 4 here
        assert screened.screen_size == k and plain.screen_size is None
        assert screened.to_dict() == {**plain.to_dict(), "screen_size": k}  # the base arm, screening aside
        # its rounds hold the base arm's rollouts: batch_size * G / k screens (rounded up) where the base has batch_size
        assert screened.gen_size == -(-plain.gen_size * plain.group_size // k)
    for name, g in (("default", 8), ("g16-like", 16)):  # the candidate screens 4 of 8 and 4 of 16
        profile = PROFILES["default"] if g == 8 else replace(PROFILES["default"], group_size=16, batch_size=8)
        assert ARMS[f"{RECOMMENDED_ARM}-screen4"].config(profile, []).screen_size == 4, name


@pytest.mark.slow
def test_quick_compare_counts_every_screening_rollout(tmp_path: Path) -> None:
    out = tmp_path / "out"
    arms = ["dynamic_sampling", *SCREEN_ARMS]
    argv = ["compare", "--out", str(out), "--profile", "quick", "--jobs", "1", "--cache", str(tmp_path / "cache")]
    assert main([*argv, "--arms", ",".join(arms)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == arms
    table = read_summary(out / "summary.json", "rerun it")  # as the family table reads it
    g = PROFILES["quick"].group_size
    for arm in SCREEN_ARMS:
        k = ARMS[arm].config(PROFILES["quick"], []).screen_size
        lines = [json.loads(x) for x in (out / arm / "seed0" / "metrics.jsonl").read_text().splitlines()]
        rollouts = sum(x["gen/rollouts"] for x in lines)
        assert summary[arm]["rollouts"]["by_seed"] == [rollouts]
        assert summary[arm]["total_rollouts"] == rollouts
        stopped = sum(x["gen/screen_stopped"] for x in lines)
        assert stopped > 0, arm  # some screens stopped, so the count below says how they were counted
        # a stopped screen is one group of k rollouts, every other group G rollouts: none left out, none at G
        groups = sum(x["gen/groups"] for x in lines)
        assert rollouts == g * (groups - stopped) + k * stopped, arm
        assert lines[-1]["total/screen_stopped"] == stopped
        dapo = summary["dynamic_sampling"]["rollouts"]["by_seed"][0]
        assert paired(table, arm)["rollout_ratio"]["by_seed"] == [dapo / rollouts]  # the family table's ratio
    assert summary["dynamic_sampling"]["rollouts"]["by_seed"] == [g * summary["dynamic_sampling"]["total_gen_groups"]]
    printed = (out / "summary.md").read_text()
    assert all(f"| {arm} |" in printed for arm in arms)
