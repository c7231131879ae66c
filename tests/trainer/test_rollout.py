"""The reference trainer's Roller: a RolloutFn over what propose() returns, told its step by the trainer."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import snooze
from snooze.logs import read_reward_log
from snooze.trainer import loop
from snooze.trainer.loop import TrainConfig, train
from snooze.trainer.model import ModelConfig, TinyGPT
from snooze.trainer.rollout import Roller
from snooze.trainer.tasks import TaskSpec, make_split
from snooze.trainer.tokenizer import EOS, CharTokenizer


def _roller() -> Roller:
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2))
    return Roller(model, 2, 1.0, 4, torch.Generator().manual_seed(0))


def test_the_roller_takes_what_propose_returns_and_stamps_the_step_the_trainer_begins() -> None:
    sched = snooze.Scheduler(
        {"add": make_split(TaskSpec.parse("add"), "train", 8)}, snooze.SchedulerConfig(batch_size=2, group_size=2)
    )
    roller, logged = _roller(), []
    roller.log_to(
        SimpleNamespace(write=lambda step, ds, ids, rewards, tokens: logged.append((step, list(ids), tokens)))
    )
    roller.begin_step(3)
    cands = sched.propose(3)
    assert isinstance(cands, snooze.Candidates)
    out = roller(cands)
    assert isinstance(out, snooze.Generated) and out.rewards.shape == (3, 2)
    assert logged == [(3, [c.id for c in cands], out.tokens.tolist())]  # each group's tokens go to the reward log
    assert out.tokens.tolist() == [sum(_lengths(roller.store[c.ticket].tokens)) for c in cands]
    sched.report(cands, out.rewards, out.tokens)

    restored = _roller()
    restored.load_state_dict(roller.state_dict(), sampled_in=3)
    assert restored.step == 3
    restored.prune(keep_carried=True)  # sampled in the step just finished: may be carried into the next
    assert sorted(restored.store) == sorted(c.ticket for c in cands)
    restored.begin_step(4)
    restored.prune(keep_carried=True)  # surplus is carried one step at most
    assert restored.store == {}


def _lengths(tokens: torch.Tensor) -> list[int]:
    """Each completion's length, read from its tokens alone: up to and including its first EOS, else all of them
    (``max_new_tokens`` sampled, none of them EOS)."""
    out = []
    for row in tokens.tolist():
        out.append(row.index(EOS) + 1 if EOS in row else len(row))
    return out


def test_the_reference_trainers_tokens_are_the_sum_of_its_completion_lengths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short real run (an untrained model: completions of every length up to ``max_new_tokens``): every step's
    ``gen/tokens`` is the sum of the lengths of the completions sampled for it, and ``total/gen_tokens`` their
    sum over the run; no group is reported without them."""
    sampled: list[int] = []

    class Counting(Roller):
        def __call__(self, candidates: snooze.Candidates) -> snooze.Generated:
            out = super().__call__(candidates)
            sampled.append(sum(sum(_lengths(self.store[c.ticket].tokens)) for c in candidates))
            return out

    monkeypatch.setattr(loop, "Roller", Counting)
    torch.manual_seed(0)
    model_cfg = ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2)
    pool = make_split(TaskSpec.parse("add"), "train", 12)
    sc = snooze.SchedulerConfig(batch_size=2, group_size=2, max_gen_rounds=2)
    cfg = TrainConfig(steps=3, eval_every=3, max_new_tokens=6, eval_samples=0)
    train(tmp_path, {"add": pool}, {"add": pool[:2]}, sc, cfg, model_cfg, TinyGPT(model_cfg).state_dict())
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    per_step = [line["gen/tokens"] for line in lines]
    rounds = [line["gen/rounds"] for line in lines]
    by_step, at = [], 0
    for r in rounds:  # the rollout function is called once per round
        by_step.append(sum(sampled[at : at + r]))
        at += r
    assert at == len(sampled) and per_step == by_step and len(set(sampled)) > 1
    assert lines[-1]["total/gen_tokens"] == sum(sampled) and lines[-1]["total/tokens_missing"] == 0
    assert all(line["gen/tokens_missing"] == 0 for line in lines)
    log = read_reward_log(tmp_path / "rewards.jsonl")  # every group generated is logged, with its tokens
    assert log.tokens_known and int(log.tokens.sum()) == sum(sampled) and len(log) == lines[-1]["total/gen_groups"]


def test_a_screened_group_is_logged_whole_with_its_screens_tokens_and_its_rests() -> None:
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2))
    roller = Roller(model, 4, 1.0, 4, torch.Generator().manual_seed(0))  # G = 4, screens of k = 2
    a, b = SimpleNamespace(ticket=1), SimpleNamespace(ticket=2)
    screens = roller._whole([a, b], [2, 2], [np.array([1.0, 0.0]), np.array([0.0, 0.0])], np.array([5, 7]))
    assert screens == ([], [], [])  # nothing whole yet: the screens wait for their rests
    whole, rows, tokens = roller._whole([a], [2], [np.array([1.0, 1.0])], np.array([3]))
    assert whole == [0] and rows[0].tolist() == [1.0, 0.0, 1.0, 1.0] and tokens == [5 + 3]


def test_log_to_none_stops_the_reward_log_and_keeps_sampling() -> None:
    roller, calls = _roller(), []
    sched = snooze.Scheduler(
        {"add": make_split(TaskSpec.parse("add"), "train", 4)}, snooze.SchedulerConfig(group_size=2)
    )
    roller.log_to(SimpleNamespace(write=lambda *a: calls.append(a)))
    roller.log_to(None)
    roller(sched.propose(2))
    assert calls == [] and len(roller.store) == 2
