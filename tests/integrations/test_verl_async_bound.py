"""verl's async replay buffer under ``max_gen_rounds``, on a pool without (enough) signal.

verl's async rule replaces each group that cannot train with one new prompt, so a pool without signal
refilled one for one forever: a step never ended. The snooze async buffer counts its refills in rounds of
``gen_batch_size`` prompts, as the sync step loop counts rounds (the step's own batch is the first), and
stops refilling at ``max_gen_rounds``: the step then ends with the groups it has, as the sync step does.

verl's ``PPOTrainerColocateAsync`` (``trainer.v1.trainer_mode=snooze_colocate_async``) on verl 0.9.1's real
classes and a real TransferQueue, with the rollout workers stood in for by ``_verl_env.Rollout`` (as in
``test_verl``): each step is verl's ``prepare_step`` (a batch submitted) then the replay buffer's ``sample``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")
pytest.importorskip("transfer_queue", reason="needs the [verl] extra")

import snooze  # noqa: E402
from integrations._verl_env import (  # noqa: E402
    B,
    Rollout,
    build_trainer,
    clear_transfer_queue,
    compose,
    end_step,
    make_parquet,
    ray_transfer_queue,
)
from integrations._verl_env import train_step as step  # noqa: E402
from snooze.logs import read_reward_log  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.timeout(300)]

ASYNC = "snooze_colocate_async"


@pytest.fixture(scope="module", autouse=True)
def transfer_queue_on_ray(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with ray_transfer_queue(tmp_path_factory.mktemp("tq")):
        yield


@pytest.fixture(autouse=True)
def empty_queue() -> Any:
    yield
    clear_transfer_queue()


def _async_trainer(tmp: Path, rows: list[tuple[str, int]], rollout: Rollout, **snooze_options: Any) -> Any:
    config = compose(tmp, f"trainer.v1.trainer_mode={ASYNC}", data=make_parquet(tmp, rows), snooze=snooze_options)
    return build_trainer(config, rollout)


@pytest.mark.timeout(120)  # before the bound, this step never ended
def test_an_async_step_on_a_pool_without_signal_ends_at_max_gen_rounds(tmp_path: Path) -> None:
    rows = [("gsm", i) for i in range(6)]
    rollout = Rollout(rule=lambda key, s: 1.0)  # every group too easy: no signal anywhere
    trainer = _async_trainer(tmp_path, rows, rollout)  # max_gen_rounds unset: the default, 8
    rounds = trainer.snooze.config.max_gen_rounds
    with pytest.raises(snooze.IntegrationError, match=f"no group to train on after max_gen_rounds={rounds} rounds"):
        step(trainer)
    generated = sum(len(sub) for sub in rollout.submitted)
    assert generated == rounds * B  # the step's batch, then refills of B prompts a round, as the sync loop's rounds
    log = read_reward_log(tmp_path / "ckpt" / "snooze_rewards.jsonl")
    assert len(log) == generated  # every group generated was reported, once (the header line is not a group)
    assert not trainer.snooze.open  # nothing left in flight


def test_a_pool_short_of_signal_trains_partial_batches_and_reports_exhaustion(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """22 prompts, one with signal: a step of 11 rounds of 2 draws one epoch of the pool, so it trains that one
    group (a batch of 1 of 2) and stops at max_gen_rounds; after the core's window of such steps the run's
    metrics and log say the pool is used up, as in the sync mode."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

    rows = [("gsm", i) for i in range(22)]
    rollout = Rollout(rule=lambda key, s: float(s % 2) if key == ("gsm", 7) else 1.0)
    trainer = _async_trainer(tmp_path, rows, rollout, policy="dynamic_sampling", max_gen_rounds=11)
    assert isinstance(trainer.replay_buffer, ReplayBufferAsync)
    caplog.set_level(logging.WARNING, logger="snooze.core.scheduler")
    steps = []
    for _ in range(12):
        before = len(rollout.submitted)
        batch, metrics = step(trainer)
        assert sum(len(sub) for sub in rollout.submitted[before:]) == 11 * B  # one step's 11 rounds, no more
        assert len({k.split("_")[0] for k in batch.keys}) == metrics["snooze/train/groups"] == 1  # the partial batch
        assert metrics["snooze/verl/rounds"] == 11 and metrics["snooze/verl/refills"] == 10 * B
        assert metrics["snooze/gen/rounds"] >= 11  # the core counted a round for each round begun
        steps.append(metrics)
        end_step(trainer, batch)
    exhausted = [int(m["snooze/gen/exhausted"]) for m in steps]
    assert exhausted[:9] == [0] * 9 and exhausted[9:] == [1, 1, 1]  # the window (10 bound steps) is full at step 10
    warned = [r for r in caplog.records if r.name == "snooze.core.scheduler" and r.levelno == logging.WARNING]
    assert len(warned) == 1 and "max_gen_rounds" in warned[0].getMessage()  # the sync path's warning, once


def test_the_default_runs_without_being_told_about_carry(tmp_path: Path) -> None:
    """issue 49: ``trainer.v1.snooze`` naming no policy, options or carry: the async mode runs the project's default,
    the recommended setting without the carry (no surplus here), with nothing to set: too-easy prompts are skipped,
    every step trains a full batch of signal groups, and no step has a surplus."""
    from omegaconf import open_dict

    from integrations._verl_env import ROWS

    config = compose(tmp_path, f"trainer.v1.trainer_mode={ASYNC}", data=make_parquet(tmp_path, ROWS))
    with open_dict(config):
        for key in ("policy", "options"):
            config.trainer.v1.snooze.pop(key)
    trainer = build_trainer(config, Rollout())  # two of the six prompts always solved, the others split
    cfg = trainer.snooze.config
    assert (cfg.policy, cfg.options.factor, cfg.carry_surplus, cfg.audit, cfg.guard) == ("snooze", 1, False, 0.05, True)
    steps = []
    for _ in range(6):
        batch, metrics = step(trainer)
        steps.append(metrics)
        end_step(trainer, batch)
    assert all(m["snooze/train/groups"] == B for m in steps)
    assert sum(m["snooze/skipped"] for m in steps) > 0
    assert not any(m[f"snooze/surplus/{k}"] for m in steps for k in ("carried_in", "carried_out"))
