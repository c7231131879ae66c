"""``snooze compare --profile quick``: the CI run of the reference experiment, end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from snooze.cli.main import main
from snooze.core.config import RECOMMENDED, SchedulerConfig
from snooze.experiments.compare import (
    ARMS,
    DEFAULT_ARMS,
    DESIGN_NOTE_SNOOZE,
    FACTOR_ARMS,
    FIG3_ARMS,
    MAIN_ARMS,
    PROFILES,
    RECOMMENDED_ARM,
    SCREEN_ARMS,
    Arm,
    _data,
    _strata,
)

SUMMARY_KEYS = {
    "total_gen_groups",
    "total_rollouts",
    "final_test_accuracy",
    "test_accuracy_by_seed",
    "base_test_accuracy",
    "steps",
    "wall_seconds",
    "seeds",
    "gen_groups",
    "encounters_per_prompt",
    "generated_per_prompt",
    "accuracy",
}
TIME_KEYS = ("time/step_s", "time/elapsed_s")


@pytest.mark.slow
def test_quick_profile_writes_every_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert (
        main(
            [
                "compare",
                "--out",
                str(out),
                "--profile",
                "quick",
                "--jobs",
                "2",
                "--cache",
                str(tmp_path / "cache"),
                "--arms",
                "all",
            ]
        )
        == 0
    )
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == set(MAIN_ARMS + FIG3_ARMS)
    # all but the factor sweep and the screening arms
    assert set(DEFAULT_ARMS) == set(summary) - set(FACTOR_ARMS) - set(SCREEN_ARMS) | {RECOMMENDED_ARM}
    assert ARMS[RECOMMENDED_ARM].config(PROFILES["quick"], []) == SchedulerConfig(
        batch_size=PROFILES["quick"].batch_size,
        group_size=PROFILES["quick"].group_size,
        max_gen_rounds=PROFILES["quick"].max_gen_rounds,
        **RECOMMENDED,
    )  # the recommended setting as a user gets it, the audit at its default
    steps = PROFILES["quick"].steps
    for arm, s in summary.items():
        assert SUMMARY_KEYS <= set(s) and s["steps"] == steps, arm
        lines = [json.loads(x) for x in (out / arm / "seed0" / "metrics.jsonl").read_text().splitlines()]
        assert [x["step"] for x in lines] == list(range(steps))
        assert lines[0]["eval/accuracy"] is not None and lines[-1]["eval/accuracy"] is not None
        assert lines[-1]["total/gen_groups"] == s["total_gen_groups"]
        header, *groups = (out / arm / "seed0" / "rewards.jsonl").read_text().splitlines()
        whole = s["total_gen_groups"] - lines[-1].get("total/screen_stopped", 0)  # a stopped screen is not logged
        assert len(groups) == whole and json.loads(header)["policy"] == ARMS[arm].policy
    # every arm starts from the same cached base model
    assert len({summary[a]["base_test_accuracy"] for a in MAIN_ARMS}) == 1
    # grpo generates exactly one round per step; the filtering arms at least that
    assert summary["grpo"]["total_gen_groups"] == steps * PROFILES["quick"].batch_size
    skipping = ("dynamic_sampling", "filter", "snooze", "snooze-f1", "snooze-f2", "predictive")
    assert all(summary[a]["total_gen_groups"] >= summary["grpo"]["total_gen_groups"] for a in skipping)
    fig3 = [json.loads(x) for x in (out / "fig3-snooze-quota" / "seed0" / "metrics.jsonl").read_text().splitlines()]
    assert any(k.startswith("dataset/easy:") for k in fig3[0]) and any(k.startswith("dataset/hard:") for k in fig3[0])
    printed = capsys.readouterr().out
    assert "dynamic_sampling" in printed and (out / "summary.md").read_text().startswith("| arm")
    assert sorted(p.name for p in out.glob("*.png")) == [
        "fig1_dapo_waste.png",
        "fig2_efficiency.png",
        "fig3_mix.png",
        "fig4_tradeoff.png",
    ]
    _check_new_summary_keys(out, summary)
    # the same two runs one after another in this process: the same numbers as in worker processes
    again = tmp_path / "again"
    arms = "dynamic_sampling,snooze"
    assert (
        main(
            [
                "compare",
                "--out",
                str(again),
                "--profile",
                "quick",
                "--arms",
                arms,
                "--jobs",
                "1",
                "--cache",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    for arm in arms.split(","):
        a, b = (
            [{k: v for k, v in x.items() if k not in TIME_KEYS} for x in _lines(d / arm / "seed0" / "metrics.jsonl")]
            for d in (out, again)
        )
        assert a == b, arm
    assert (
        json.loads((out / "run_meta.json").read_text())["jobs"] == 2
        and json.loads((again / "run_meta.json").read_text())["jobs"] == 1
    )
    assert json.loads((again / "run_meta.json").read_text())["resumed_runs"] == 0 and isinstance(_wall(again), float)
    # rerun on the finished folder: nothing is trained again, and the regime's wall time is not this invocation's
    assert (
        main(
            [
                "compare",
                "--out",
                str(again),
                "--profile",
                "quick",
                "--arms",
                arms,
                "--jobs",
                "1",
                "--cache",
                str(tmp_path / "cache"),
            ]
        )
        == 0
    )
    assert json.loads((again / "run_meta.json").read_text())["resumed_runs"] == 2
    assert _wall(again) == "not measured: 2 run(s) resumed from an earlier invocation"
    assert [
        {k: v for k, v in x.items() if k not in TIME_KEYS} for x in _lines(again / "snooze" / "seed0" / "metrics.jsonl")
    ] == [
        {k: v for k, v in x.items() if k not in TIME_KEYS} for x in _lines(out / "snooze" / "seed0" / "metrics.jsonl")
    ]


def _wall(out: Path) -> Any:
    return next(
        c["value"]
        for c in json.loads((out / "regime.json").read_text())["checks"]
        if c["criterion"].startswith("6. wall time")
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def _check_new_summary_keys(out: Path, summary: dict[str, Any]) -> None:
    profile = PROFILES["quick"]
    for arm, s in summary.items():
        enc = s["encounters_per_prompt"]
        assert enc["min"] <= enc["mean"] <= enc["max"] and len(enc["by_seed"]) == s["seeds"]
        prompts = profile.pool_size * (1 if arm.startswith("fig3") else len(profile.tasks.split(",")))
        assert s["generated_per_prompt"]["mean"] == pytest.approx(s["total_gen_groups"] / prompts)
        if arm in ("grpo", "dynamic_sampling"):  # nothing skipped: every encounter is rolled out
            assert enc["mean"] == pytest.approx(s["generated_per_prompt"]["mean"])
        for kind in ("greedy", "sampled"):
            acc = s["accuracy"][kind]
            assert set(acc) == {"base", "final", "late", "gain", "by_task"} and acc["by_task"]
            assert 0 <= acc["late"]["min"] <= acc["late"]["max"] <= 1 and len(acc["late"]["by_seed"]) == s["seeds"]
            for task in acc["by_task"].values():
                assert {"mean", "min", "max", "by_seed"} <= set(task["base"]) and 0 <= task["final"]["mean"] <= 1
        assert s["accuracy"]["greedy"]["final"]["mean"] == s["final_test_accuracy"]
    regime = json.loads((out / "regime.json").read_text())
    names = [c["criterion"] for c in regime["checks"]]
    assert any(n.startswith("2. DAPO reaches 90%") for n in names) and any(
        n.startswith("5. figure-3 stratum easy:") for n in names
    )
    assert regime["detail"]["accuracy"] == "sampled"


def test_arm_configs_and_strata() -> None:
    profile = PROFILES["quick"]
    pools, tests, banned = _data(profile, profile.tasks)
    sp, st = _strata(profile, pools, tests)
    easy, hard = sp
    assert max(r["level"] for r in sp[easy]) < min(r["level"] for r in sp[hard])
    assert len(sp[easy]) + len(sp[hard]) == profile.pool_size and set(st) == set(sp)
    assert ARMS["snooze"].config(profile, []).options.factor == 5
    quota = ARMS["fig3-snooze-quota"].config(profile, list(sp))
    assert (quota.policy, quota.mix, quota.weights) == ("snooze", "quota", {easy: 1.0, hard: 1.0})
    assert ARMS["fig3-filter"].config(profile, list(sp)).mix == "stream"
    assert len(banned) == 2 * profile.pool_size


def _cfg(
    arm: str, snooze: dict[str, Any] | None = None, predictive: dict[str, Any] | None = None, **fields: Any
) -> SchedulerConfig:
    """The arm's config with the comparison's settings: SchedulerConfig ``fields`` and each policy's options."""
    options = {"snooze": snooze or {}, "predictive": predictive or {}}
    return ARMS[arm].config(PROFILES["quick"], ["a", "b"], {**fields, "options": options})


def test_policy_options_reach_only_the_arms_of_their_policy() -> None:
    arms = MAIN_ARMS + FIG3_ARMS
    snoozing = {arm for arm in arms if ARMS[arm].policy == "snooze"}
    assert snoozing == {
        "snooze",
        "snooze-f1",
        "snooze-f2",
        "snooze-f1-carry",
        "snooze-f1-carry-screen2",
        "snooze-f1-carry-screen4",
        "one-round",
        "fig3-snooze",
        "fig3-snooze-quota",
    }
    hard = {arm: getattr(_cfg(arm, snooze={"hard": True}).options, "hard", False) for arm in arms}
    assert hard == {arm: arm in snoozing for arm in arms}
    assert not any(getattr(_cfg(arm).options, "hard", False) for arm in arms)
    backoff = {arm: _cfg(arm, snooze={"backoff": 2.0}).options.backoff for arm in snoozing}
    assert backoff == {arm: 2.0 for arm in snoozing}
    skip = {arm: _cfg(arm, snooze={"skip": "history"}).options.skip for arm in snoozing}
    assert skip == {arm: "history" for arm in snoozing}
    assert all(
        _cfg(arm, snooze={"skip": "history"}).options == SchedulerConfig(policy=ARMS[arm].policy).options
        for arm in set(arms) - snoozing
    )
    factors = {arm: _cfg(arm, snooze={"factor": 3}).options.factor for arm in ("snooze", "snooze-f1", "snooze-f2")}
    assert factors == {"snooze": 3, "snooze-f1": 1, "snooze-f2": 2}  # --snooze-factor sets the snooze arm only
    pred = _cfg("predictive", predictive={"margin": 0.3, "recheck": 4.0})
    assert pred.policy == "predictive" and (pred.options.margin, pred.options.recheck) == (0.3, 4.0)
    design_note = SchedulerConfig(policy="snooze", options=DESIGN_NOTE_SNOOZE).options
    assert _cfg("snooze", predictive={"margin": 0.3}).options == design_note  # the snooze arm: factor 5
    assert _cfg("fig3-snooze").options == design_note and _cfg("snooze-f1").options.factor == 1
    carried = {arm: _cfg(arm, carry_surplus=True).carry_surplus for arm in arms}
    assert carried == {arm: True for arm in arms}  # --carry-surplus reaches every arm
    carrying = {arm for arm in arms if _cfg(arm).carry_surplus}
    assert carrying == {"snooze-f1-carry", "snooze-f1-carry-screen2", "snooze-f1-carry-screen4"}  # their own


def test_an_arm_is_a_named_config_and_a_new_one_needs_no_code() -> None:
    mine = Arm("snooze-history", "snooze", {"options": {"skip": "history", "rule": {"weight": 0.25}}})
    cfg = mine.config(PROFILES["quick"], [])
    assert (cfg.options.skip, cfg.options.rule.weight, cfg.batch_size) == (
        "history",
        0.25,
        PROFILES["quick"].batch_size,
    )


def test_unknown_arm_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["compare", "--out", str(tmp_path), "--arms", "dapo"])
    assert "arms must be 'all' or among" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("--pool-size", "Profile.pool_size=0: must be an integer >= 1 (option --pool-size)"),  # Profile's own check
        ("--test-size", "Profile.test_size=0: must be an integer >= 1 (option --test-size)"),
        ("--seeds", "Profile.seeds=0: must be an integer >= 1 (option --seeds)"),
        ("--threads", "--threads 0: must be at least 1"),
        ("--jobs", "--jobs 0: must be at least 1"),
    ],
)
def test_bad_sizes_are_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, message: str) -> None:
    assert main(["compare", "--out", str(tmp_path), flag, "0"]) == 2
    assert capsys.readouterr().err.strip() == f"snooze compare: error: {message}"
    assert not any(tmp_path.iterdir())  # rejected before anything was written
