"""Generation k steps ahead of training (``TrainConfig.staleness``): staleness 0 is the synchronous loop
exactly, the trained batch is as old as it says, the ratio is taken against the generating weights, and a
killed run resumes with its queued batches, neither losing nor redoing one."""

from __future__ import annotations

import glob
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import snooze
from snooze.core.errors import ConfigError, StateError, StateMismatchError
from snooze.trainer import loop
from snooze.trainer.grpo import GRPOConfig, grpo_loss
from snooze.trainer.loop import METRICS_FILE, REWARDS_FILE, TrainConfig, train
from snooze.trainer.model import ModelConfig, completion_logprobs
from snooze.trainer.pipeline import META, TENSORS, Pending, Pipeline
from snooze.trainer.rollout import Group, collate
from snooze.trainer.tasks import TaskSpec, make_split
from snooze.trainer.tokenizer import CharTokenizer
from snooze.trainer.warmup import WarmupConfig, warmup

pytestmark = pytest.mark.usefixtures("one_thread")

SPEC = TaskSpec.parse("rev:3-4")
MODEL = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=32, n_head=2)
SCHED = snooze.SchedulerConfig(batch_size=3, group_size=4, policy="snooze", max_gen_rounds=2, carry_surplus=True)
CFG = TrainConfig(steps=6, eval_every=2, checkpoint_every=2, max_new_tokens=6, seed=1, grpo=GRPOConfig(lr=1e-2))
TIME_KEYS = ("time/step_s", "time/elapsed_s")


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A base model that solves some prompts (groups with signal), its pool and test split."""
    torch.set_num_threads(1)
    test = make_split(SPEC, "test", 16)
    pool = make_split(SPEC, "pool", 60, exclude=[r["prompt"] for r in test])
    banned = {r["prompt"] for r in test + pool}
    wcfg = WarmupConfig(target_accuracy=0.4, eval_every=25, val_per_task=32)
    base = warmup([SPEC], banned, wcfg, MODEL, cache_dir=tmp_path_factory.mktemp("cache"))
    return {"pools": {SPEC.name: pool}, "tests": {SPEC.name: test}, "base": base.state_dict}


def _train(setup: dict[str, Any], run_dir: Path, cfg: TrainConfig = CFG, **kw: Any) -> None:
    train(run_dir, setup["pools"], setup["tests"], SCHED, cfg, MODEL, setup["base"], **kw)


def _logs(run_dir: Path) -> tuple[list[dict[str, Any]], str]:
    lines = [json.loads(x) for x in (run_dir / METRICS_FILE).read_text().splitlines()]
    return [{k: v for k, v in x.items() if k not in TIME_KEYS} for x in lines], (run_dir / REWARDS_FILE).read_text()


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    (path,) = glob.glob(str(run_dir / "checkpoint" / "step-*" / "model.pt"))
    return torch.load(path, weights_only=True)


def _synchronous_step(run: Any, test_sets: Any, sched_cfg: Any, cfg: TrainConfig) -> dict[str, Any]:
    """The loop's step without the pipeline: build the batch, train on it at once (the loop before staleness)."""
    t0 = time.perf_counter()
    line: dict[str, Any] = {}
    if run.step % cfg.eval_every == 0:
        line.update(loop._eval(run, test_sets, run.step, cfg.eval_samples))
    run.roller.begin_step(run.step)
    batch = run.sched.step(run.roller)
    groups = run.roller.take(batch.candidates)
    if len(batch):
        pid, pmask, tokens, old_logp, mask = collate(groups, cfg.device)
        adv = torch.as_tensor(batch.advantages.reshape(-1), dtype=torch.float32)
        for _ in range(cfg.grpo.updates_per_batch):
            logp = completion_logprobs(run.model, pid, pmask, tokens, mask, cfg.temperature, run.roller.group_size)
            loss, _ = grpo_loss(logp, old_logp, adv, mask, cfg.grpo)
            run.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(run.model.parameters(), cfg.grpo.max_grad_norm)
            run.opt.step()
        line["train/loss"] = loss.item()
    run.roller.prune(keep_carried=sched_cfg.carry_surplus)
    run.step += 1
    if run.step == cfg.steps or run.sched.finished:
        line.update(loop._eval(run, test_sets, run.step, cfg.eval_samples))
    run.elapsed += time.perf_counter() - t0
    return {**batch.metrics, **line, "step": run.step - 1, "time/step_s": 0.0, "time/elapsed_s": run.elapsed}


def test_staleness_0_is_the_synchronous_loop_bit_for_bit(
    setup: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = replace(CFG, eval_samples=2, grpo=GRPOConfig(lr=1e-2, updates_per_batch=2))
    _train(setup, tmp_path / "now", cfg)
    with monkeypatch.context() as m:
        m.setattr(loop, "_one_step", _synchronous_step)
        _train(setup, tmp_path / "before", cfg)
    now, before = _logs(tmp_path / "now"), _logs(tmp_path / "before")
    assert now[1] == before[1]  # the same groups generated, with the same rewards
    assert any(x["train/size"] > 0 for x in now[0])  # batches with signal were trained on
    for a, b in zip(now[0], before[0], strict=True):
        assert {k: a[k] for k in b} == b
        assert a["train/staleness"] == 0.0
    w_now, w_before = _weights(tmp_path / "now"), _weights(tmp_path / "before")
    assert all(torch.equal(w_now[k], w_before[k]) for k in w_before)
    assert not all(torch.equal(w_now[k], setup["base"][k]) for k in w_now)


def test_the_trained_batch_is_k_steps_old_and_its_ratio_is_against_the_generating_weights(
    setup: dict[str, Any], tmp_path: Path
) -> None:
    for k in (0, 2):
        _train(setup, tmp_path / f"k{k}", replace(CFG, staleness=k))
    lines = {k: _logs(tmp_path / f"k{k}")[0] for k in (0, 2)}
    assert [x["train/staleness"] for x in lines[2]] == [0.0, 1.0, 2.0, 2.0, 2.0, 2.0]
    trained = {k: [x for x in lines[k] if x["train/size"] > 0] for k in lines}
    assert trained[0] and trained[2]
    # one update per batch: on-policy the ratio is 1 up to float error; from weights 2 updates old it is not
    assert all(abs(x["train/ratio_max"] - 1) < 1e-3 for x in trained[0])
    assert max(x["train/ratio_max"] for x in trained[2] if x["train/staleness"] == 2) > 1.01
    # the reward logs: a header line, then one line per generated group
    assert lines[0][-1]["total/gen_groups"] == len(_logs(tmp_path / "k0")[1].splitlines()[1:])
    assert lines[2][-1]["total/gen_groups"] == len(_logs(tmp_path / "k2")[1].splitlines()[1:])
    # the reward log's step is the step the group is trained in: 6 batches, none generated past the last step
    steps = {json.loads(x)["step"] for x in _logs(tmp_path / "k2")[1].splitlines()[1:]}
    assert steps == set(range(6))


class Crash(Exception):
    """Stands for a SIGKILL after the step's metrics line is written."""


def test_a_killed_staleness_2_run_resumes_exactly(setup: dict[str, Any], tmp_path: Path) -> None:
    cfg = replace(CFG, staleness=2, checkpoint_every=2)
    _train(setup, tmp_path / "a", cfg)

    def kill(line: dict[str, Any]) -> None:
        if line["step"] == 4:  # the checkpoint of step 4 holds the batches of steps 4 and 5, generated already
            raise Crash

    with pytest.raises(Crash):
        _train(setup, tmp_path / "b", cfg, on_step=kill)
    (folder,) = glob.glob(str(tmp_path / "b" / "checkpoint" / "step-*"))
    queued = json.loads((Path(folder) / META).read_text())["batches"]
    assert [b["version"] for b in queued] == [2, 3]  # batch 4 built by the weights of step 2, batch 5 of step 3
    _train(setup, tmp_path / "b", cfg)
    assert _logs(tmp_path / "a") == _logs(tmp_path / "b")
    w_a, w_b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.equal(w_a[k], w_b[k]) for k in w_a)
    assert not (Path(glob.glob(str(tmp_path / "a" / "checkpoint" / "step-*"))[0]) / META).exists()  # drained


def test_resuming_with_another_staleness_is_refused(setup: dict[str, Any], tmp_path: Path) -> None:
    _train(setup, tmp_path / "r", replace(CFG, staleness=1), stop_after=1)
    with pytest.raises(StateMismatchError, match=r"train\.staleness: saved 1, now 0"):
        _train(setup, tmp_path / "r", CFG)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_a_bad_staleness_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ConfigError, match="TrainConfig.staleness"):
        TrainConfig(staleness=bad)


def _group(n: int) -> Group:
    g = torch.Generator().manual_seed(n)
    return Group(
        torch.randint(0, 9, (4,), generator=g),
        torch.randint(0, 9, (2, 3), generator=g),
        torch.randn(2, 3, generator=g),
        torch.tensor([[True, True, False], [True, False, False]]),
    )


def test_a_pipeline_round_trips_through_weights_only_tensors_and_json(tmp_path: Path) -> None:
    pipe = Pipeline()
    pipe.push(Pending(3, [_group(0), _group(1)], np.array([[0.5, -0.5], [1.0, -1.0]]), {"a": 1, "b": math.nan}))
    pipe.push(Pending(4, [], np.zeros((0, 2)), {"c": float("inf")}))
    pipe.save(tmp_path)
    torch.load(tmp_path / TENSORS, weights_only=True)  # no pickled objects
    back = Pipeline()
    back.load(tmp_path)
    items = list(back)
    assert [(x.version, len(x)) for x in items] == [(3, 2), (4, 0)]
    assert np.array_equal(items[0].advantages, [[0.5, -0.5], [1.0, -1.0]])
    assert items[0].metrics["a"] == 1 and math.isnan(items[0].metrics["b"]) and items[1].metrics["c"] == math.inf
    for got, want in zip(items[0].groups, (_group(0), _group(1))):
        assert all(torch.equal(getattr(got, f), getattr(want, f)) for f in ("prompt", "tokens", "logprobs", "mask"))
    assert back.pop().version == 3 and back.pop().version == 4
    with pytest.raises(StateError, match="no generated batch"):
        back.pop()


def test_a_damaged_pipeline_is_refused_naming_the_folder(tmp_path: Path) -> None:
    pipe = Pipeline()
    pipe.push(Pending(0, [_group(0)], np.zeros((1, 2)), {}))
    pipe.save(tmp_path)
    (tmp_path / META).write_text(json.dumps({"batches": [{"version": 0, "groups": 2, "metrics": {}}]}))
    with pytest.raises(StateError, match="queued batches cannot be restored"):
        Pipeline().load(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    Pipeline().save(empty)
    assert not list(empty.iterdir())  # an empty pipeline writes nothing: staleness 0 checkpoints as before
