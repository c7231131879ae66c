"""The default is the guarded recommended setting, everywhere (issue 49, build item 4).

``snooze.RECOMMENDED`` (``snooze`` at factor 1, the surplus carried) with the audit at its default 0.05 and the guard
on is what ``SchedulerConfig()`` holds, and what every adapter builds from a user's config that says nothing about
the policy or the carry: the TRL trainer, verl's sync trainer, and, without the carry (they have no surplus: a step
there takes each group as it is reported and closes the moment its batch is full, or leaves a finished group waiting
in TransferQueue), TRL's asynchronous trainer and verl's two async modes. ``policy="dynamic_sampling"`` is the one
word that brings DAPO back, exactly as before (``tests/core/test_digest.py`` pins its runs bit for bit).

The configs checked are the ones the adapters build (their own builders, before any model loads), and the async
TRL trainer's step loop runs the default it builds (``_async_run``, its rollout worker played by hand)."""

from __future__ import annotations

import queue
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import snooze

GUARDED_AUDIT = 0.05


def _setting(cfg: snooze.SchedulerConfig) -> dict[str, Any]:
    """The fields that make the setting: the policy, its options, the carry, the audit, the guard."""
    return {
        "policy": cfg.policy,
        "options": cfg.options.to_dict(),
        "carry_surplus": cfg.carry_surplus,
        "audit": cfg.audit,
        "guard": cfg.guard,
    }


def _recommended(carry: bool = True) -> dict[str, Any]:
    """``snooze.RECOMMENDED`` read as the setting it names (its options in full), the audit at 0.05, the guard on;
    ``carry=False``: the same setting without the carry (the modes with no surplus)."""
    rec = dict(snooze.RECOMMENDED)
    options = snooze.SnoozeOptions(**rec["options"]).to_dict()
    return {"policy": rec["policy"], "options": options, "carry_surplus": rec["carry_surplus"] and carry} | {
        "audit": GUARDED_AUDIT,
        "guard": True,
    }


# -- the library ---------------------------------------------------------------------------------------------------


def test_a_config_that_names_no_policy_is_the_guarded_recommended_setting() -> None:
    cfg = snooze.SchedulerConfig()
    assert _setting(cfg) == _recommended()
    assert (cfg.policy, cfg.options.factor, cfg.carry_surplus) == ("snooze", 1, True)
    assert cfg == snooze.SchedulerConfig(**snooze.RECOMMENDED)
    assert snooze.Scheduler({"d": [{"id": 0}]}).config == cfg  # a scheduler built without a config
    for sizes in ({"batch_size": 4}, {"group_size": 4, "max_gen_rounds": 2}, {"options": {"factor": 1}}):
        assert _setting(snooze.SchedulerConfig(**sizes)) == _recommended(), sizes
    assert snooze.SchedulerConfig.from_dict({"batch_size": 4}).carry_surplus is True  # a config file without them


@pytest.mark.parametrize("word", ["dynamic_sampling", "dapo"])
def test_one_word_brings_dapo_back_exactly(word: str) -> None:
    """DAPO discards the surplus: a named policy leaves ``carry_surplus`` off, as before the default changed."""
    dapo = snooze.SchedulerConfig(policy=word)
    assert (dapo.policy, dapo.carry_surplus) == ("dynamic_sampling", False)
    assert dapo == snooze.SchedulerConfig(policy="dynamic_sampling", carry_surplus=False)
    assert snooze.SchedulerConfig().replace(policy=word) == dapo  # switching from the default: DAPO too
    assert snooze.SchedulerConfig.from_dict(dapo.to_dict()) == dapo


def test_a_named_policy_keeps_its_old_defaults_and_an_explicit_carry_wins() -> None:
    for named in ({"policy": "snooze"}, {"policy": "filter"}, {"options": snooze.SnoozeOptions(factor=1)}):
        assert snooze.SchedulerConfig(**named).carry_surplus is False, named
    assert snooze.SchedulerConfig(carry_surplus=False).carry_surplus is False  # the default, carry turned off
    assert snooze.SchedulerConfig(policy="dynamic_sampling", carry_surplus=True).carry_surplus is True
    assert snooze.SchedulerConfig(policy="snooze", carry_surplus=None).carry_surplus is False  # None: unset
    assert snooze.SchedulerConfig().replace(batch_size=4).carry_surplus is True  # the policy unchanged: kept


# -- TRL -----------------------------------------------------------------------------------------------------------


def _trl_bound(init: Any, args: Any) -> Any:
    from datasets import Dataset
    from integrations import _trl_tiny as tiny

    from snooze.integrations.trl import _build as build

    kwargs = {
        "model": "no_such_model",
        "reward_funcs": tiny.reward_len,
        "args": args,
        "train_dataset": Dataset.from_list([{"prompt": p} for p in tiny.LINES]),
    }
    bound = build.bind(init, (), kwargs)
    assert bound is not None
    return bound


SAYS_NOTHING = [None, {}, {"max_gen_rounds": 4}]
"""User configs that say nothing about the policy or the carry."""


@pytest.mark.trl
@pytest.mark.parametrize("given", SAYS_NOTHING)
def test_the_trl_trainer_builds_the_recommended_setting(given: Any, tmp_path: Path) -> None:
    pytest.importorskip("trl", reason="needs the [trl] extra")
    from trl import GRPOConfig, GRPOTrainer

    from snooze.integrations.trl import _trainer

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, use_cpu=True)
    sched = _trainer._scheduler_before_loading(_trl_bound(GRPOTrainer.__init__, args), None, given)
    assert _setting(sched.config) == _recommended()  # GRPOTrainer's step loop carries the surplus
    dapo = _trainer._scheduler_before_loading(_trl_bound(GRPOTrainer.__init__, args), None, {"policy": "dapo"})
    assert (dapo.config.policy, dapo.config.carry_surplus) == ("dynamic_sampling", False)


def _async_args(tmp: Path) -> Any:
    from trl.experimental.async_grpo import AsyncGRPOConfig

    return AsyncGRPOConfig(output_dir=str(tmp), per_device_train_batch_size=8, num_generations=4, use_cpu=True)


@pytest.mark.trl
@pytest.mark.parametrize("given", SAYS_NOTHING)
def test_the_async_trl_trainer_builds_it_without_the_carry(given: Any, tmp_path: Path) -> None:
    """No surplus there: each group is reported on its own and the step closes the moment its batch is full."""
    pytest.importorskip("trl.experimental.async_grpo", reason="needs TRL's AsyncGRPOTrainer")
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    from snooze.integrations.trl import _async_trainer

    bound = _trl_bound(AsyncGRPOTrainer.__init__, _async_args(tmp_path))
    sched, rows = _async_trainer._scheduler_before_loading(bound, None, given)
    assert _setting(sched.config) == _recommended(carry=False) and rows == 8


@dataclass
class _Row:  # the fields of TRL's RolloutSample the step loop touches
    group_id: int
    advantage: float


class _Worker:
    """TRL's rollout worker played by hand: the first half of the prompts always solved (too easy), the others
    split (signal); each scored group is handed back as the worker pushes it, in issue order."""

    def __init__(self, G: int, easy: set[str]) -> None:
        self.G, self.easy, self.sent = G, easy, deque()

    def send(self, ticket: int, record: dict[str, Any]) -> None:
        self.sent.append((ticket, record["prompt"]))

    def get(self, timeout: float | None = None) -> Any:
        if not self.sent:
            raise queue.Empty
        ticket, prompt = self.sent.popleft()
        rewards = [1.0] * self.G if prompt in self.easy else [0.0, 1.0] * (self.G // 2)
        mean = sum(rewards) / self.G
        return SimpleNamespace(ticket=ticket, rewards=rewards, samples=[_Row(ticket, r - mean) for r in rewards])


@pytest.mark.trl
def test_the_async_trl_step_loop_runs_the_default_it_builds_without_being_told_about_carry(tmp_path: Path) -> None:
    """The scheduler ``SnoozeAsyncGRPOTrainer`` builds from ``snooze_config=None`` drives its step loop: too-easy
    prompts are snoozed and skipped before rollout, every step trains a full batch, and no step has a surplus."""
    pytest.importorskip("trl.experimental.async_grpo", reason="needs TRL's AsyncGRPOTrainer")
    from integrations import _trl_tiny as tiny
    from trl.experimental.async_grpo import AsyncGRPOTrainer

    from snooze.integrations.trl import _async_trainer
    from snooze.integrations.trl._async_run import AsyncRun, ScheduledQueue

    sched, rows = _async_trainer._scheduler_before_loading(
        _trl_bound(AsyncGRPOTrainer.__init__, _async_args(tmp_path)), None, None
    )
    G = sched.config.group_size
    worker = _Worker(G, set(tiny.LINES[: len(tiny.LINES) // 2]))
    run = AsyncRun(sched, worker.send, rows, window=2 * sched.config.gen_size)
    feed = ScheduledQueue(run, worker)
    for _ in range(8 * rows):  # 8 optimizer steps' rows
        feed.get(timeout=5.0)
    steps = [run.metrics[s] for s in sorted(run.metrics)]
    assert len(steps) >= 8 and all(m["snooze/fill_rows"] == 0 for m in steps)  # every step a full batch of signal
    assert sum(m["snooze/snooze/skipped"] for m in steps) > 0  # the default skips too-easy prompts
    for name in ("discarded", "carried_in", "carried_out"):
        assert all(m[f"snooze/surplus/{name}"] == 0 for m in steps), name  # never a surplus to carry


# -- verl ----------------------------------------------------------------------------------------------------------

VERL_MODES = {"sync": True, "colocate_async": False, "separate_async": False}
"""verl's modes and whether they carry: the async modes leave a finished group the batch has no room for waiting in
TransferQueue for a later step, so there is no surplus (and ``carry_surplus`` is refused there)."""


@pytest.fixture(scope="module")
def verl_config(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """verl's composed config with ``trainer.v1.snooze`` saying nothing about the policy or the carry."""
    pytest.importorskip("verl", reason="needs the [verl] extra")
    from integrations._verl_env import compose
    from omegaconf import OmegaConf, open_dict

    config = compose(tmp_path_factory.mktemp("cfg"), "trainer.v1.separate_async.parameter_sync_step=1")
    with open_dict(config):
        for key in ("policy", "options"):
            config.trainer.v1.snooze.pop(key, None)
    assert set(OmegaConf.to_container(config.trainer.v1.snooze)) == {"poll_interval"}
    return config


@pytest.mark.verl
@pytest.mark.parametrize("mode", sorted(VERL_MODES))
def test_every_verl_mode_builds_the_setting_and_the_async_ones_without_the_carry(verl_config: Any, mode: str) -> None:
    from snooze.integrations.verl._check import SNOOZE_MODES
    from snooze.integrations.verl._options import read_options

    assert set(SNOOZE_MODES.values()) == set(VERL_MODES)  # every mode of the adapter is here
    scheduler = read_options(verl_config, mode).scheduler  # an async mode does not refuse its own default
    assert _setting(scheduler) == _recommended(carry=VERL_MODES[mode])
