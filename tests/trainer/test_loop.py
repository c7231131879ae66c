"""The training loop: files it writes, exact resume, and that GRPO learns."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch

import snooze
from snooze.trainer._resume import config_differences
from snooze.trainer.grpo import GRPOConfig
from snooze.trainer.loop import REWARDS_FILE, TrainConfig, read_result, train
from snooze.trainer.model import ModelConfig
from snooze.trainer.tasks import TaskSpec, make_split
from snooze.trainer.tokenizer import CharTokenizer
from snooze.trainer.warmup import WarmupConfig, warmup

SPEC = TaskSpec.parse("rev:3-6")
MODEL = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=2, d_model=64, n_head=4)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    torch.set_num_threads(2)
    test = make_split(SPEC, "test", 200)
    pool = make_split(SPEC, "pool", 300, exclude=[r["prompt"] for r in test])
    banned = {r["prompt"] for r in test + pool}
    base = warmup(
        [SPEC],
        banned,
        WarmupConfig(target_accuracy=0.5, eval_every=50),
        MODEL,
        cache_dir=tmp_path_factory.mktemp("cache"),
    )
    return {"pool": {SPEC.name: pool}, "test": {SPEC.name: test}, "base": base}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_interrupted_and_resumed_run_equals_uninterrupted(setup: dict[str, Any], tmp_path: Path) -> None:
    sc = snooze.SchedulerConfig(batch_size=4, group_size=4, options=snooze.SnoozeOptions(factor=2))
    cfg = TrainConfig(steps=6, eval_every=3, checkpoint_every=1, grpo=GRPOConfig(lr=1e-3))
    args = (setup["pool"], setup["test"], sc, cfg, MODEL, setup["base"].state_dict)
    train(tmp_path / "a", *args)
    train(tmp_path / "b", *args, stop_after=4)
    train(tmp_path / "b", *args)  # resumes at step 4
    drop = ("time/step_s", "time/elapsed_s")
    a, b = (
        [{k: v for k, v in x.items() if k not in drop} for x in _lines(tmp_path / r / "metrics.jsonl")] for r in "ab"
    )
    assert [x["step"] for x in a] == list(range(6)) and a == b
    assert (tmp_path / "a" / REWARDS_FILE).read_text() == (tmp_path / "b" / REWARDS_FILE).read_text()
    first = a[0]
    for key in (
        "gen/rounds",
        "efficiency",
        "snooze/skipped",
        "total/gen_groups",
        f"dataset/{SPEC.name}/batch_frac",
        "train/loss",
        "eval/accuracy",
    ):
        assert key in first, key
    header, *groups = _lines(tmp_path / "a" / REWARDS_FILE)  # the header names the run's loop and policy
    assert header["format"] == "snooze-reward-log" and header["source"] == "snooze.trainer"
    assert (header["batch_size"], header["group_size"], header["policy"], header["options"]["factor"]) == (
        4,
        4,
        "snooze",
        2,
    )
    assert len(groups) == a[-1]["total/gen_groups"] and set(groups[0]) == {"step", "dataset", "id", "rewards", "tokens"}
    assert sum(g["tokens"] for g in groups) == a[-1]["total/gen_tokens"]  # each group's tokens, as reported


def test_a_compact_metrics_log_holds_the_five_the_totals_and_the_trainers_own(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    from snooze.logs import DASHBOARD

    sc = snooze.SchedulerConfig(batch_size=4, group_size=4)
    cfg = TrainConfig(steps=3, eval_every=2, checkpoint_every=1, metrics="compact")
    args = (setup["pool"], setup["test"], sc, cfg, MODEL, setup["base"].state_dict)
    train(tmp_path / "c", *args, stop_after=2)
    result = train(tmp_path / "c", *args[:3], replace(cfg, metrics="full"), *args[4:])  # resumed with the full set
    lines = _lines(tmp_path / "c" / "metrics.jsonl")
    own = {"train/loss", "train/clip_frac", "train/kl", "train/ratio", "train/ratio_max", "train/staleness", "step"}
    for line in lines[:2]:  # written in compact mode
        rest = {k for k in line if k not in own and not k.startswith(("time/", "eval/", "total/"))}
        assert rest == {k for k in DASHBOARD if not k.startswith("total/")}
        assert set(DASHBOARD) | own | {"total/gen_groups", "time/step_s"} <= set(line)
    assert len(lines[2]) > len(lines[0]) + 40 and f"dataset/{SPEC.name}/batch_frac" in lines[2]
    assert result.totals["total/gen_groups"] == lines[-1]["total/gen_groups"] > 0  # the result reads the totals


def test_resuming_with_another_config_is_refused(setup: dict[str, Any], tmp_path: Path) -> None:
    sc = snooze.SchedulerConfig(batch_size=2, group_size=4, policy="filter")
    cfg = TrainConfig(steps=4, eval_every=2, checkpoint_every=1)
    train(tmp_path, setup["pool"], setup["test"], sc, cfg, MODEL, setup["base"].state_dict, stop_after=1)
    with pytest.raises(
        snooze.StateMismatchError, match=r"another configuration \(train\.grpo\.lr: saved 0\.0001, now 0\.01; see "
    ) as refused:
        train(
            tmp_path,
            setup["pool"],
            setup["test"],
            sc,
            replace(cfg, grpo=GRPOConfig(lr=1e-2)),
            MODEL,
            setup["base"].state_dict,
        )
    assert "snooze compare: a new --out" in str(refused.value)  # the CLI's way out: it has no resume=False
    train(
        tmp_path, setup["pool"], setup["test"], sc, replace(cfg, checkpoint_every=2), MODEL, setup["base"].state_dict
    )  # not compared


def test_config_differences_name_each_field_and_take_new_fields_at_their_default() -> None:
    defaults = {
        "scheduler": {"policy": "snooze", "audit": 0.05},
        "train": {"steps": 10, "checkpoint_every": 50},
    }
    saved = {
        "scheduler": {"policy": "snooze"},
        "train": {"steps": 10, "checkpoint_every": 5},
    }  # older snooze: no audit
    now = {"scheduler": {"policy": "snooze", "audit": 0.05}, "train": {"steps": 10, "checkpoint_every": 50}}
    assert config_differences(saved, now, defaults) == []
    now["scheduler"]["audit"] = 0.25  # a new field away from its default does change the run
    now["train"]["steps"] = 12
    assert config_differences(saved, now, defaults) == [
        "scheduler.audit: saved 0.05, now 0.25",
        "train.steps: saved 10, now 12",
    ]
    assert config_differences({"model": {"gone": 1}}, {"model": {}}, {}) == ["model.gone: saved 1, now (none)"]


@pytest.mark.slow
def test_a_short_dapo_run_raises_accuracy_at_the_rollout_temperature(setup: dict[str, Any], tmp_path: Path) -> None:
    """avg@8 at the rollout temperature (what GRPO optimises) and greedy accuracy rise under DAPO in 30 steps.

    The sampled evaluation draws from a generator seeded afresh each time, so an unchanged model scores exactly
    the same at every evaluation (and greedy decoding is deterministic): any difference is the training's.
    +5 points on 200 prompts x 8 samples is 80 more correct samples; +3 greedy points is 6 more prompts solved.
    """
    sc = snooze.SchedulerConfig(batch_size=16, group_size=8, policy="dynamic_sampling")
    cfg = TrainConfig(
        steps=30, eval_every=30, checkpoint_every=0, temperature=0.7, eval_samples=8, grpo=GRPOConfig(lr=3e-4)
    )
    train(tmp_path, setup["pool"], setup["test"], sc, cfg, MODEL, setup["base"].state_dict)
    result = read_result(tmp_path)
    assert result.sampled_final >= result.sampled_base + 0.05, (result.sampled_base, result.sampled_final)
    assert result.final_accuracy >= result.base_accuracy + 0.03, (result.base_accuracy, result.final_accuracy)
    lines = _lines(tmp_path / "metrics.jsonl")
    assert lines[0]["eval/sampled_accuracy"] == result.sampled_base == lines[0][f"eval/sampled_accuracy/{SPEC.name}"]


def test_a_result_holds_the_mean_of_the_last_evaluations_after_the_base(tmp_path: Path) -> None:
    from snooze.trainer.loop import LATE_EVALS

    accs = [0.2, 0.5, 0.6, 0.8, 0.4]  # the base at step 0, then four evaluations; the last is a dip
    lines = [{"step": 0, "eval/accuracy": accs[0], "eval/sampled_accuracy": accs[0] / 2, "time/elapsed_s": 0.0}]
    lines += [
        {"step": 10 * k, "eval/accuracy": a, "eval/sampled_accuracy": a / 2, "time/elapsed_s": 1.0}
        for k, a in enumerate(accs[1:], 1)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = read_result(tmp_path)
    assert LATE_EVALS == 3 and result.final_accuracy == 0.4 and result.base_accuracy == 0.2
    assert result.late_accuracy == pytest.approx((0.6 + 0.8 + 0.4) / 3) and result.sampled_late == pytest.approx(0.3)
    (tmp_path / "metrics.jsonl").write_text(
        "".join(json.dumps(x) + "\n" for x in lines[:2])
    )  # one evaluation after the base
    assert read_result(tmp_path).late_accuracy == 0.5


def test_the_sampled_evaluation_is_repeatable_and_leaves_the_training_generator_alone(setup: dict[str, Any]) -> None:
    from snooze.trainer.evaluate import sampled_accuracy_by_task
    from snooze.trainer.model import TinyGPT

    model = TinyGPT(MODEL)
    model.load_state_dict(setup["base"].state_dict)
    state = torch.get_rng_state()
    a = sampled_accuracy_by_task(model, setup["test"], 4, 1.0)
    b = sampled_accuracy_by_task(model, setup["test"], 4, 1.0)
    c = sampled_accuracy_by_task(model, setup["test"], 4, 1.0, seed=7)
    assert a == b and a != c and torch.equal(state, torch.get_rng_state())
    assert 0.0 < a[SPEC.name] < 1.0
    together = sampled_accuracy_by_task(model, {"other": setup["test"][SPEC.name][:50], **setup["test"]}, 4, 1.0)
    assert together[SPEC.name] == a[SPEC.name]  # a set's score does not depend on the sets evaluated before it


def test_tensorboard_shows_each_step_once_after_a_crash_between_checkpoints(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    sc = snooze.SchedulerConfig(batch_size=2, group_size=4, policy="dynamic_sampling")
    cfg = TrainConfig(steps=6, eval_every=3, checkpoint_every=2, grpo=GRPOConfig(lr=1e-3))
    args = (setup["pool"], setup["test"], sc, cfg, MODEL, setup["base"].state_dict)

    def crash(line: dict[str, Any]) -> None:
        if line["step"] == 3:  # steps 2 and 3 are logged; the last checkpoint is at step 2
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(tmp_path, *args, on_step=crash)
    # TensorBoard reads event files in name order, and a name holds the second it was made, then a counter
    # of writers in the process: a resume within the same second as the crash, in the same process (only
    # in a test), could sort "...9" after "...10". A real resume is a later process in a later second.
    time.sleep(1.1)
    train(tmp_path, *args)  # resumes at step 2 and logs steps 2-5 again
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    steps = [e.step for e in acc.Scalars("train/loss")]
    assert steps == list(range(6))
