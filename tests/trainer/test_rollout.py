"""The reference trainer's Roller: a RolloutFn over what propose() returns, told its step by the trainer."""

from __future__ import annotations

from types import SimpleNamespace

import torch

import snooze
from snooze.trainer.model import ModelConfig, TinyGPT
from snooze.trainer.rollout import Roller
from snooze.trainer.tasks import TaskSpec, make_split
from snooze.trainer.tokenizer import CharTokenizer


def _roller() -> Roller:
    torch.manual_seed(0)
    model = TinyGPT(ModelConfig(vocab_size=CharTokenizer().vocab_size, n_layer=1, d_model=16, n_head=2))
    return Roller(model, 2, 1.0, 4, torch.Generator().manual_seed(0))


def test_the_roller_takes_what_propose_returns_and_stamps_the_step_the_trainer_begins() -> None:
    sched = snooze.Scheduler(
        {"add": make_split(TaskSpec.parse("add"), "train", 8)}, snooze.SchedulerConfig(batch_size=2, group_size=2)
    )
    roller, logged = _roller(), []
    roller.log_to(SimpleNamespace(write=lambda step, ds, ids, rewards: logged.append((step, list(ids)))))
    roller.begin_step(3)
    cands = sched.propose(3)
    assert isinstance(cands, snooze.Candidates)
    rewards = roller(cands)
    assert rewards.shape == (3, 2) and logged == [(3, [c.id for c in cands])]
    sched.report(cands, rewards)

    restored = _roller()
    restored.load_state_dict(roller.state_dict(), sampled_in=3)
    assert restored.step == 3
    restored.prune(keep_carried=True)  # sampled in the step just finished: may be carried into the next
    assert sorted(restored.store) == sorted(c.ticket for c in cands)
    restored.begin_step(4)
    restored.prune(keep_carried=True)  # surplus is carried one step at most
    assert restored.store == {}


def test_log_to_none_stops_the_reward_log_and_keeps_sampling() -> None:
    roller, calls = _roller(), []
    sched = snooze.Scheduler(
        {"add": make_split(TaskSpec.parse("add"), "train", 4)}, snooze.SchedulerConfig(group_size=2)
    )
    roller.log_to(SimpleNamespace(write=lambda *a: calls.append(a)))
    roller.log_to(None)
    roller(sched.propose(2))
    assert calls == [] and len(roller.store) == 2
