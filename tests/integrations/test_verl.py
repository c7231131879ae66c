"""The snooze trainer on verl 0.9.1's real classes, on CPU.

Real: verl's config (``ppo_trainer.yaml`` composed by Hydra with the snooze keys), its trainer
registry, ``PPOTrainerSync`` and ``ReplayBuffer`` (the snooze subclasses of both), ``RLHFDataset``
over parquet, the tokenizer/model-config loading, the dataloader path (``_fetch_one_gen_batch``,
``_add_prompts_to_generate``, ``_submit_batch_to_rollout``), TransferQueue (controller and storage
actors on a one-node Ray started once for this module), verl's DAPO ``ReplayBuffer`` for the control,
``MetricsAggregator`` and the file logger, and ``_save_checkpoint`` / ``_load_checkpoint``.
Not run (they need GPUs): the FSDP/Megatron worker groups (their checkpoint calls are no-ops here),
vLLM/SGLang rollout servers and the agent loop workers (``_verl_env.Rollout`` writes what they write
into TransferQueue), and the steps after sampling (log-probs, advantages, the actor update).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("verl", reason="needs the [verl] extra")
pytest.importorskip("transfer_queue", reason="needs the [verl] extra")

import snooze  # noqa: E402
from integrations._verl_env import (  # noqa: E402
    EASY,
    ROWS,
    B,
    G,
    Rollout,
    build_trainer,
    clear_transfer_queue,
    compose,
    documented_command,
    end_step,
    make_parquet,
    ray_transfer_queue,
)
from integrations._verl_env import train_step as step  # noqa: E402
from snooze.logs import read_reward_log  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.timeout(300)]


@pytest.fixture(scope="module", autouse=True)
def transfer_queue_on_ray(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with ray_transfer_queue(tmp_path_factory.mktemp("tq")):
        yield


@pytest.fixture(autouse=True)
def empty_queue() -> Any:
    yield
    clear_transfer_queue()


def _keys(meta: Any) -> list[tuple[str, int]]:
    import transfer_queue as tq

    data = tq.kv_batch_get(keys=meta.keys, partition_id="train", select_fields=["data_source", "extra_info"])
    return sorted({(str(s), int(e["index"])) for s, e in zip(data["data_source"], data["extra_info"])})


def test_verl_builds_the_snooze_trainer_and_replay_buffer_from_its_own_config(tmp_path: Path) -> None:
    from verl.trainer.ppo.v1 import PPOTrainerSync
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    from snooze.integrations.verl import SnoozePromptLoader, SnoozeReplayBuffer, SnoozeTrainer

    trainer = build_trainer(compose(tmp_path))
    assert type(trainer) is SnoozeTrainer and isinstance(trainer, PPOTrainerSync)
    assert isinstance(trainer.replay_buffer, SnoozeReplayBuffer) and isinstance(trainer.replay_buffer, ReplayBuffer)
    assert trainer.trainer_mode == "sync" and trainer.registered_mode == "snooze"  # verl's sync branches apply
    assert trainer.config.data.gen_batch_size is None  # not forced to 1 as verl's exact-refill modes do
    cfg = trainer.snooze.config
    assert (cfg.batch_size, cfg.group_size, cfg.gen_size, cfg.policy, cfg.options.factor) == (B, G, B, "snooze", 5)
    assert cfg.weights == {"gsm": 4.0, "math": 2.0}  # row counts: verl's own uniform sampling over rows
    assert isinstance(trainer.train_dataloader, SnoozePromptLoader) and trainer.snooze.scheduler.names == [
        "gsm",
        "math",
    ]
    assert trainer.snooze.options.reward_log == tmp_path / "ckpt" / "snooze_rewards.jsonl"


def test_the_dataloader_path_submits_only_the_schedulers_prompts_and_easy_ones_sleep(tmp_path: Path) -> None:
    rollout = Rollout()
    trainer = build_trainer(compose(tmp_path), rollout)
    trained = []
    for _ in range(6):  # two passes' worth of steps over the six prompts
        batch, _ = step(trainer)
        trained.append(_keys(batch))
        end_step(trainer, batch)
    submitted = [k for sub in rollout.submitted for k in sub]
    header, *log = [json.loads(x) for x in (tmp_path / "ckpt" / "snooze_rewards.jsonl").read_text().splitlines()]
    assert header["source"] == "snooze.verl" and header["dynamic_sampling"] is True
    assert submitted == [(r["dataset"], r["id"]) for r in log]  # every submitted prompt was issued and reported
    for key in EASY:  # drawn once, found too easy, then asleep for SnoozeOptions.factor=5 encounters
        assert submitted.count(key) == 1
    assert all(len(t) == B and not EASY & set(t) for t in trained)  # only signal groups are trained on
    sched = trainer.snooze.scheduler
    assert sched.metrics()["total/gen_groups"] == len(submitted) and sched.metrics()["snooze/asleep"] == 2


def test_every_group_is_reported_before_the_zero_spread_filter(tmp_path: Path) -> None:
    import transfer_queue as tq

    rollout = Rollout(delay=0.1)  # groups finish while the buffer polls
    trainer = build_trainer(compose(tmp_path), rollout)
    batch, metrics = step(trainer)
    rollout.join()
    first = [k for sub in rollout.submitted for k in sub]
    easy_drawn = [k for k in first if k in EASY]
    assert easy_drawn and metrics["snooze/gen/groups"] == len(first) == B * metrics["snooze/gen/rounds"]
    assert metrics["snooze/groups/too_easy"] == len(easy_drawn) and metrics["snooze/train/groups"] == B
    assert len(batch) == B * G and len({k.split("_")[0] for k in batch.keys}) == B  # G trajectories per group
    left = {k.split("_")[0] for k in tq.kv_list("train").get("train", {})}
    assert left == {k.split("_")[0] for k in batch.keys}  # dropped groups are cleared from TransferQueue


def test_control_verls_own_dapo_filter_hides_easy_groups_so_they_are_never_snoozed(tmp_path: Path) -> None:
    """The same prompts through verl's in-core DAPO ReplayBuffer (``algorithm.filter_groups.enable``),
    with the scheduler seeing what comes out of it: the easy groups are evicted before anyone sees them."""
    import transfer_queue as tq
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    rollout = Rollout()
    trainer = build_trainer(compose(tmp_path, "data.gen_batch_size=1"), rollout)
    dapo_config = compose(tmp_path, "trainer.v1.trainer_mode=sync", "algorithm.filter_groups.enable=True")
    dapo = get_trainer_cls("sync")(config=dapo_config).replay_buffer  # verl builds its DAPO buffer from the config
    assert type(dapo) is ReplayBuffer and dapo.filter_groups_metric == "reward"
    dapo.refill_fn, dapo.poll_interval = trainer._add_prompts_to_generate, 0.02
    run, evicted = trainer.snooze, 0
    for _ in range(6):
        trainer._add_prompts_to_generate(B)
        batch, metrics = dapo.sample(global_steps=trainer.global_steps, partition_id="train", batch_size=B)
        evicted += metrics.get("training/filter_groups/evicted_samples", 0)
        seen = [u for u in run.open if any(k.startswith(u) for k in batch.keys)]  # what passed the filter
        data = tq.kv_batch_get(
            keys=[f"{u}_{s}_0" for u in seen for s in range(G)],
            partition_id="train",
            select_fields=["rm_scores", "data_source", "extra_info"],
        )
        rewards = np.array([float(t.sum()) for t in data["rm_scores"]]).reshape(len(seen), G)
        keys = [(str(data["data_source"][i * G]), data["extra_info"][i * G]["index"]) for i in range(len(seen))]
        run.report(seen, keys, rewards)
        run.cancel([u for u in list(run.open)])  # evicted by DAPO: never seen
        run.finish_step()
        end_step(trainer, batch)
    submitted = [k for sub in rollout.submitted for k in sub]
    assert evicted == sum(submitted.count(k) for k in EASY) > 0  # DAPO dropped every easy group it got
    assert all(submitted.count(k) >= 2 for k in EASY)  # drawn again and again
    assert run.scheduler.metrics()["snooze/asleep"] == 0 and run.scheduler.metrics()["total/gen_groups"] < len(
        submitted
    )


def test_generation_is_bounded_by_max_gen_rounds(tmp_path: Path) -> None:
    rows = [("gsm", 0), ("gsm", 2), ("gsm", 1), ("gsm", 5)]  # two easy prompts, two with signal
    rollout = Rollout(rule=lambda key, s: 1.0 if key in EASY or key == ("gsm", 5) else float(s % 2))
    data = make_parquet(tmp_path, rows)
    trainer = build_trainer(
        compose(tmp_path, data=data, snooze={"max_gen_rounds": 2, "policy": "dynamic_sampling"}), rollout
    )
    batch, metrics = step(trainer)
    assert metrics["snooze/gen/rounds"] <= 2 and len(rollout.submitted) == metrics["snooze/gen/rounds"]
    assert metrics["snooze/train/groups"] == len({k.split("_")[0] for k in batch.keys}) <= B


def _logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> tuple[dict[str, Any], dict[str, float]]:
    """One step's metrics as verl's file logger writes them, and the scheduler's own metrics of that step."""
    from verl.utils.tracking import Tracking

    (tmp_path / mode).mkdir()
    trainer = build_trainer(compose(tmp_path / mode, snooze={"metrics": mode}))
    _, metrics = step(trainer)
    path = tmp_path / mode / "verl.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    tracking = Tracking(project_name="p", experiment_name="e", default_backend="file")
    tracking.log(data=metrics, step=trainer.global_steps)
    tracking.finish()
    return json.loads(path.read_text().splitlines()[0])["data"], trainer.snooze.scheduler.metrics()


def test_metrics_reach_verls_logger_under_snooze_each_key_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from snooze.logs import DASHBOARD, logged_name

    logged, own = _logged(tmp_path, monkeypatch, "full")
    assert {"snooze/gen/rounds", "snooze/efficiency", "snooze/asleep", "snooze/total/gen_groups"} <= set(logged)
    assert logged["snooze/train/groups"] == B
    ours = {k for k in logged if k.startswith("snooze/")}
    assert ours == {logged_name(k) for k in own} and len(ours) == len(own) > 70  # every scheduler key, once
    assert not [k for k in logged if k.startswith("snooze/snooze/")]  # (was snooze/snooze/skipped, ...)
    compact, _ = _logged(tmp_path, monkeypatch, "compact")
    assert {k for k in compact if k.startswith("snooze/")} == {logged_name(k) for k in DASHBOARD}
    assert {k for k in compact if not k.startswith("snooze/")} == {k for k in logged if not k.startswith("snooze/")}


def test_the_tokens_reported_are_the_response_lengths_transfer_queue_holds(tmp_path: Path) -> None:
    """Every trajectory the stand-in agent loop writes has a 3-token response (``response_len`` 3, as verl's
    ``AgentLoopWorkerTQ`` tags it): each step's ``gen/tokens`` is 3 per rollout, none missing."""
    trainer = build_trainer(compose(tmp_path), Rollout(delay=0.05))
    for _ in range(3):
        batch, metrics = step(trainer)
        assert (
            metrics["snooze/gen/tokens"] == 3 * metrics["snooze/gen/rollouts"] == 3 * G * metrics["snooze/gen/groups"]
        )
        assert metrics["snooze/gen/tokens_missing"] == 0
        end_step(trainer, batch)
    m = trainer.snooze.scheduler.metrics()
    assert m["total/gen_tokens"] == 3 * m["total/rollouts"] > 0 and m["total/tokens_missing"] == 0
    log = read_reward_log(tmp_path / "ckpt" / "snooze_rewards.jsonl")  # each logged group with its tokens
    assert log.tokens_known and log.tokens.tolist() == [3 * G] * len(log) and len(log) == m["total/gen_groups"]


def test_missing_extra_info_index_is_a_clear_error(tmp_path: Path) -> None:
    config = compose(tmp_path, data=make_parquet(tmp_path, index=False))
    with pytest.raises(snooze.IntegrationError, match=r"row 0 \('gsm'\): extra_info has no 'index'"):
        build_trainer(config)


def test_wrong_group_size_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(snooze.IntegrationError, match="group_size is read from verl's actor_rollout_ref.rollout.n"):
        build_trainer(compose(tmp_path, snooze={"group_size": 3}))


def test_a_group_of_the_wrong_size_is_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    rollout = Rollout()
    trainer = build_trainer(compose(tmp_path), rollout)
    rollout.sessions = {key: G - 1 for key in ROWS}  # an agent loop that ran n-1 rollouts
    trainer.prepare_step()  # the round is issued and generated
    before = trainer.snooze.scheduler.state_dict()
    with pytest.raises(
        snooze.IntegrationError, match=f"finished with {G - 1} rollouts but the scheduler's group_size is {G}"
    ):
        trainer.replay_buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    after = trainer.snooze.scheduler.state_dict()
    assert after["meta"] == before["meta"] and after["arrays"].keys() == before["arrays"].keys()
    assert all(np.array_equal(after["arrays"][k], v) for k, v in before["arrays"].items())
    assert len(trainer.snooze.open) == B  # still waiting to be reported
    assert not (tmp_path / "ckpt" / "snooze_rewards.jsonl").exists()  # nothing logged


def test_reward_metric_reads_the_reward_functions_extra_info(tmp_path: Path) -> None:
    rollout = Rollout(rule=lambda key, s: 0.0, acc_rule=lambda key, s: 1.0 if key in EASY else float(s % 2))
    trainer = build_trainer(compose(tmp_path, snooze={"reward_metric": "acc"}), rollout)
    batch, metrics = step(trainer)  # rm_scores are all 0 (no signal); acc has it
    assert metrics["snooze/train/groups"] == B and metrics["snooze/groups/too_hard"] == 0


def test_prompt_keys_of_a_custom_dataset_class_and_duplicate_ids(tmp_path: Path) -> None:
    from snooze.integrations.verl import prompt_keys
    from snooze.integrations.verl._prompts import PromptIndex

    rows = [{"data_source": "a", "extra_info": {"index": "x"}}, {"data_source": "b", "extra_info": {"index": 3}}]
    assert prompt_keys(rows) == [("a", "x"), ("b", 3)]  # no Arrow table: read row by row
    with pytest.raises(snooze.IntegrationError, match="row 1"):
        prompt_keys([rows[0], {"data_source": "a", "extra_info": None}])
    with pytest.raises(snooze.DataError, match="unique"):
        PromptIndex([("a", 1), ("a", 1)])


def test_failed_groups_are_withdrawn_and_replaced(tmp_path: Path) -> None:
    rollout = Rollout()
    trainer = build_trainer(compose(tmp_path), rollout)
    rollout.fail = {("gsm", 1), ("gsm", 3)}
    batch, metrics = step(trainer)
    assert (
        metrics["snooze/gen/cancelled"] >= 1
        and len({k.split("_")[0] for k in batch.keys}) == metrics["snooze/train/groups"]
    )
    assert not rollout.fail & set(_keys(batch))


def test_state_round_trips_through_verls_checkpoint_folder(tmp_path: Path) -> None:
    import torch

    config = compose(tmp_path, "trainer.resume_mode=auto")
    rollout = Rollout()
    trainer = build_trainer(config, rollout)
    for _ in range(2):
        batch, _ = step(trainer)
        if trainer.global_steps == 2:
            trainer._save_checkpoint()  # where fit() saves: after the step, before global_steps moves on
        end_step(trainer, batch)
    folder = tmp_path / "ckpt" / "global_step_2"
    assert (folder / "data.pt").exists() and (folder / "snooze" / "LATEST").exists()
    assert (tmp_path / "ckpt" / "latest_checkpointed_iteration.txt").read_text() == "2"
    assert torch.load(folder / "data.pt", weights_only=True) == {
        "format": "snooze.verl.prompts",
        "version": 1,
        "step": 2,
        "state_dir": "snooze",
    }
    snapshot = trainer.snooze.scheduler.state_dict()
    step(trainer)  # step 3 of the first run
    expected = rollout.submitted[-1]
    log = tmp_path / "ckpt" / "snooze_rewards.jsonl"
    assert max(json.loads(line)["step"] for line in log.read_text().splitlines()[1:]) == 2

    clear_transfer_queue()
    resumed_rollout = Rollout()
    resumed = build_trainer(config, resumed_rollout)
    resumed._load_checkpoint()  # verl's: finds global_step_2, loads data.pt; then the scheduler beside it
    assert resumed.global_steps == 2 and resumed.snooze.scheduler.step_index == 2
    restored = resumed.snooze.scheduler.state_dict()
    assert all(np.array_equal(restored["arrays"][k], v) for k, v in snapshot["arrays"].items())
    assert int(snapshot["arrays"]["ds0.counter"].max()) > 0  # sleeping prompts are in the state
    assert max(json.loads(line)["step"] for line in log.read_text().splitlines()[1:]) == 1  # step 2 cut off
    resumed.global_steps += 1  # fit() moves to step 3
    step(resumed)
    assert resumed_rollout.submitted[0] == expected


def test_resuming_a_checkpoint_without_snooze_state_says_what_to_do(tmp_path: Path) -> None:
    """Refused when the trainer is built (before verl starts a worker), and again where verl loads it."""
    import shutil

    from verl.trainer.ppo.v1 import get_trainer_cls

    trainer = build_trainer(compose(tmp_path, "trainer.resume_mode=auto"))
    batch, _ = step(trainer)
    trainer._save_checkpoint()
    shutil.rmtree(tmp_path / "ckpt" / "global_step_1" / "snooze")
    with pytest.raises(snooze.StateError, match="not written by the snooze trainer"):  # was: at _load_checkpoint
        get_trainer_cls("snooze")(config=compose(tmp_path, "trainer.resume_mode=auto"))
    with pytest.raises(snooze.StateError, match="not written by the snooze trainer"):
        trainer._load_checkpoint()
    missing = f"trainer.resume_from_path={tmp_path / 'nope' / 'global_step_5'}"
    with pytest.raises(snooze.StateError, match="does not exist: there is no verl checkpoint"):
        get_trainer_cls("snooze")(config=compose(tmp_path, "trainer.resume_mode=resume_path", missing))
    fresh = get_trainer_cls("snooze")(config=compose(tmp_path, "trainer.resume_mode=disable"))  # nothing to resume
    assert fresh.snooze_options.scheduler.batch_size == B


def test_the_separate_async_mode_refuses_verls_default_parameter_sync_step(tmp_path: Path) -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls

    config = compose(tmp_path, "trainer.v1.trainer_mode=snooze_separate_async")  # verl's default there: 4
    with pytest.raises(snooze.IntegrationError, match="separate_async.parameter_sync_step=4.*Set it to 1"):
        get_trainer_cls("snooze_separate_async")(config=config)


def test_the_documented_command_composes_validates_and_builds(tmp_path: Path) -> None:
    import os

    import verl.trainer.config as verl_config
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.utils.config import validate_config

    from integrations._verl_env import make_model_dir

    make_model_dir(tmp_path)
    with initialize_config_dir(config_dir=os.path.dirname(verl_config.__file__), version_base=None):
        config = hydra_compose("ppo_trainer", overrides=documented_command(tmp_path))
    validate_config(
        config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
    )  # as main()
    trainer = get_trainer_cls(config.trainer.v1.trainer_mode)(config=config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    cfg = trainer.snooze.config
    assert (cfg.batch_size, cfg.gen_size, cfg.group_size, cfg.policy, cfg.options.factor, cfg.max_gen_rounds) == (
        256,
        256,
        8,
        "snooze",
        1,
        8,
    )
    assert trainer.snooze.options.reward_log == tmp_path / "run" / "ckpt" / "snooze_rewards.jsonl"


def test_carry_surplus_trains_the_surplus_next_step_and_a_resume_generates_in_its_place(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A round of 4 prompts with signal fills the batch of 2 and leaves 2 over: the next step trains on those
    two from TransferQueue without a round of its own. A restart loses them (TransferQueue is not in the
    checkpoint): the resumed trainer gives them up with a warning and generates in their place."""
    rows = [("gsm", i) for i in range(8)]
    rollout = Rollout(rule=lambda key, s: float(s % 2))  # every group has signal
    config = compose(
        tmp_path,
        "data.gen_batch_size=4",
        "trainer.resume_mode=auto",
        data=make_parquet(tmp_path, rows),
        snooze={"carry_surplus": True, "policy": "dynamic_sampling"},
    )
    trainer = build_trainer(config, rollout)
    first, metrics = step(trainer)
    assert len(rollout.submitted) == 1 and metrics["snooze/train/groups"] == B
    over = {key for key in rollout.submitted[0]} - set(_keys(first))
    assert len(over) == 2  # the round's surplus
    trainer._save_checkpoint()  # with the surplus carried into step 2
    end_step(trainer, first)
    second, metrics = step(trainer)
    assert len(rollout.submitted) == 1  # no round at step 2: the carried groups filled it
    assert set(_keys(second)) == over and metrics["snooze/train/groups"] == B
    end_step(trainer, second)

    clear_transfer_queue()  # a restart: a new TransferQueue, empty
    again = Rollout(rule=lambda key, s: float(s % 2))
    resumed = build_trainer(config, again)
    with caplog.at_level("WARNING", logger="snooze.integrations.verl._run"):
        resumed._load_checkpoint()
    assert "2 group(s) carried into step 2 (carry_surplus) were lost with the restart" in caplog.text
    resumed.global_steps += 1
    batch, metrics = step(resumed)
    assert len(again.submitted) == 1 and metrics["snooze/train/groups"] == B  # a round in their place
    assert not set(_keys(batch)) & over


def test_the_surplus_carried_past_the_end_of_the_data_is_trained_then_the_end_is_named(tmp_path: Path) -> None:
    """issue 49 build 6: with ``epochs=1`` the first round draws every prompt and carries 2 signal groups out of
    step 1; step 2 draws nothing and trains those 2 from TransferQueue; step 3 has nothing left, and verl cannot
    train an empty batch, so it stops with an error that says the data is used up (not that a round was short)."""
    rows = [("gsm", i) for i in range(4)]
    rollout = Rollout(rule=lambda key, s: float(s % 2))  # every group has signal
    config = compose(
        tmp_path,
        "data.gen_batch_size=4",
        data=make_parquet(tmp_path, rows),
        snooze={"carry_surplus": True, "policy": "dynamic_sampling", "epochs": 1},
    )
    trainer = build_trainer(config, rollout)
    first, metrics = step(trainer)
    assert trainer.snooze.scheduler.exhausted and not trainer.snooze.scheduler.finished
    over = {key for key in rollout.submitted[0]} - set(_keys(first))
    assert len(over) == 2 and metrics["snooze/surplus/carried_out"] == 2
    end_step(trainer, first)
    second, metrics = step(trainer)
    assert len(rollout.submitted) == 1 and set(_keys(second)) == over  # no round: the carried groups, trained
    assert metrics["snooze/surplus/carried_in"] == 2 and trainer.snooze.scheduler.finished
    end_step(trainer, second)
    with pytest.raises(snooze.IntegrationError, match=r"no group to train on because the data is used up"):
        step(trainer)
