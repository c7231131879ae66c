"""What is settled when verl builds the snooze trainer: the prompts it issues are rows of the
dataset verl trains on, settings that could only fail later are refused, and verl's API is as relied on.

The data:

verl's ``RLHFDataset`` drops overlong prompts (``data.filter_overlong_prompts``) and keeps a sample of
the rows (``data.train_max_samples``, shuffled or not) through HF ``datasets``' ``.filter``/``.select``,
which keep the full Arrow table and an indices mapping. Reading the table gave the scheduler rows verl
no longer had: on 8 rows with 2 filtered, position 6 and 7 did not exist (verl's ``fit()`` stopped with
``IndexError: Invalid key: 6 is out of bounds for size 6``), and a shuffled sample named the wrong rows.
No Ray in this module: the dataset, the scheduler and the loader are built as ``_init_dataloader`` builds them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import snooze

pytest.importorskip("verl", reason="needs the [verl] extra")

from integrations._verl_env import compose, make_parquet  # noqa: E402

pytestmark = [pytest.mark.verl, pytest.mark.timeout(300)]

ROWS8 = [("gsm", i) for i in range(5)] + [("math", 10 + i) for i in range(3)]
LONG = {("gsm", 1), ("math", 11)}  # prompts longer than data.max_prompt_length


def _data(tmp: Path) -> Path:
    path = make_parquet(tmp, ROWS8)
    import datasets

    rows = datasets.Dataset.from_parquet(str(path)).to_list()
    for row in rows:
        if (row["data_source"], row["extra_info"]["index"]) in LONG:
            row["prompt"][0]["content"] += " 1" * 40
    datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


def _trainer(tmp: Path, *overrides: str) -> Any:
    from verl.trainer.ppo.v1 import get_trainer_cls

    config = compose(
        tmp, "data.max_prompt_length=16", "data.filter_overlong_prompts_workers=1", *overrides, data=_data(tmp)
    )
    trainer = get_trainer_cls("snooze")(config=config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    return trainer


def _verl_rows(dataset: Any) -> list[tuple[str, Any]]:
    """What verl hands its workers, row by row (``RLHFDataset.__getitem__``)."""
    return [(r["data_source"], r["extra_info"]["index"]) for r in (dataset[i] for i in range(len(dataset)))]


def _issued(trainer: Any, rounds: int) -> list[tuple[str, Any]]:
    """The rows the loader collates for the scheduler's first rounds, as verl's dataloader path reads them."""
    it = iter(trainer.train_dataloader)
    out = []
    for _ in range(rounds):
        batch = next(it)
        out += [
            (str(s), dict(getattr(e, "data", e))["index"]) for s, e in zip(batch["data_source"], batch["extra_info"])
        ]
    trainer.snooze._unbound.clear()
    return out


def test_filtered_overlong_prompts_are_not_issued(tmp_path: Path) -> None:
    trainer = _trainer(tmp_path, "data.filter_overlong_prompts=True")
    rows = _verl_rows(trainer.train_dataset)
    assert len(rows) == 6 and not LONG & set(rows)  # verl filtered the two long prompts
    assert sorted(trainer.snooze.index.sources["gsm"].ids.tolist()) == [0, 2, 3, 4]
    assert trainer.snooze.config.weights == {"gsm": 4.0, "math": 2.0}  # the rows verl trains on
    issued = _issued(trainer, 3)  # 3 rounds x 2 prompts: every row once (was an IndexError on position 6)
    assert sorted(issued) == sorted(rows)


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_sample_of_the_rows_train_max_samples_is_what_is_issued(tmp_path: Path, shuffle: bool) -> None:
    trainer = _trainer(
        tmp_path,
        "data.filter_overlong_prompts=False",
        "data.train_max_samples=4",
        f"data.shuffle={shuffle}",
        "data.seed=3",
    )
    rows = _verl_rows(trainer.train_dataset)
    assert len(rows) == 4
    if shuffle:
        assert rows != [k for k in ROWS8[:4]]  # seed 3 picks other rows than the first four (the test would be moot)
    keys = [(n, i) for n, src in trainer.snooze.index.sources.items() for i in src.ids.tolist()]
    assert sorted(keys) == sorted(rows)
    issued = _issued(trainer, 2)
    assert sorted(issued) == sorted(rows)  # each issued prompt is the row verl hands its workers


def test_sample_then_filter_together(tmp_path: Path) -> None:
    trainer = _trainer(
        tmp_path, "data.filter_overlong_prompts=True", "data.train_max_samples=6", "data.shuffle=True", "data.seed=1"
    )
    rows = _verl_rows(trainer.train_dataset)
    assert not LONG & set(rows) and 4 <= len(rows) <= 6
    assert set(_issued(trainer, (len(rows) + 1) // 2)) == set(rows)  # every row verl kept, nothing else


def test_the_import_guard_checks_signatures_not_just_names() -> None:
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer, ReplayBufferAsync
    from verl.trainer.ppo.v1.trainer_colocate_async import PPOTrainerColocateAsync
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync

    from snooze.integrations.verl._guard import (
        ASYNC_BUFFER_API,
        ASYNC_TRAINER_API,
        BUFFER_API,
        TRAINER_API,
        api_mismatches,
    )

    installed = {
        PPOTrainerSync: TRAINER_API,
        ReplayBuffer: BUFFER_API,
        PPOTrainerColocateAsync: ASYNC_TRAINER_API,
        ReplayBufferAsync: ASYNC_BUFFER_API,
    }
    assert api_mismatches(installed) == []  # verl 0.9.1 as installed

    class Renamed(ReplayBuffer):  # a verl whose sample() takes other parameters: the names exist, the calls break
        def sample(self, step: int, partition_id: str) -> Any:  # type: ignore[override]
            return None

        def _clear_groups(self, partition_id: str, uids: set[str], force: bool) -> None:  # a new required parameter
            return None

    class Init(ReplayBuffer):
        def __init__(self, trainer_mode: str, trainer_config: Any, sampler_kwargs: Any, extra: int) -> None:
            pass

    found = api_mismatches({Renamed: BUFFER_API, Init: {"__init__": BUFFER_API["__init__"]}})
    assert [m.split("(")[0] for m in found] == ["Renamed.sample", "Renamed._clear_groups", "Init.__init__"]
    assert "calls it as (self, global_steps, partition_id, batch_size)" in found[0]
    missing = type("Old", (), {})
    assert api_mismatches({missing: {"prepare_step": ("self",)}}) == ["Old.prepare_step is missing"]


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("algorithm.filter_groups.enable=True", "turns on verl's own DAPO loop"),
        ("trainer.v1.sampler.custom_sampler.path=pkg://x", "brings its own replay buffer"),
        ("trainer.v1.sampler.sync_refill_failed_groups=True", "has no effect under the snooze trainer"),
        ("skip.rollout_tq.enable=True", "Turn rollout skip off"),
        ("reward.reward_model.enable=True", "colocated reward model"),
        ("+trainer.v1.snooze.reward_metric=", "reward_metric"),
        ("trainer.v1.sampler.custom_sampler=x", "brings its own replay buffer"),  # was an AttributeError
        ("+trainer.v1.snooze.weights=[1,2]", "must map each data_source to its weight"),  # was a TypeError
        ("actor_rollout_ref.rollout.n=2.5", "rollout.n=2.5: must be an integer"),  # was truncated to 2
        ("trainer.v1.snooze.poll_interval=inf", "must be a finite number"),  # was a replay buffer that never polls
        ("+trainer.v1.snooze.reward_log=true", "must be the path of the file"),  # was a TypeError
        ("+trainer.v1.snooze.reward_log=''", "must be the path of the file"),  # was the reward log silently off
        ("+trainer.v1.snooze.reward_log=/", "is a folder"),  # was an IsADirectoryError at the first report
        ("+trainer.v1.sync.parameter_sync_step=2", "parameter_sync_step=2"),  # was an error at the first sample
        ("trainer.resume_mode=latest", "must be auto, disable or resume_path"),  # was verl's UnboundLocalError
        ("trainer.resume_mode=resume_path", "must be the path of a global_step_N folder"),  # was verl's assert
    ],
)
def test_settings_that_cannot_work_are_refused_when_the_trainer_is_built(
    tmp_path: Path, override: str, match: str
) -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls

    with pytest.raises(snooze.IntegrationError, match=match):
        get_trainer_cls("snooze")(config=compose(tmp_path, override))


ASYNC = "snooze_colocate_async"


@pytest.mark.parametrize(
    ("override", "match"),
    [
        ("+trainer.v1.snooze.on_short=pad", "on_short=pad cannot work in verl's async modes"),
        ("+trainer.v1.snooze.carry_surplus=True", "carry_surplus cannot work in verl's async modes"),
        ("+trainer.v1.colocate_async.parameter_sync_step=2", "colocate_async.parameter_sync_step=2"),
        ("algorithm.filter_groups.enable=True", "turns on verl's own DAPO loop"),
        ("reward.reward_model.enable=True", "colocated reward model"),
    ],
)
def test_settings_that_cannot_work_asynchronously_are_refused_when_the_async_trainer_is_built(
    tmp_path: Path, override: str, match: str
) -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls

    with pytest.raises(snooze.IntegrationError, match=match):
        get_trainer_cls(ASYNC)(config=compose(tmp_path, f"trainer.v1.trainer_mode={ASYNC}", override))
    # the same setting's sync meaning is unchanged: on_short=pad builds the sync trainer
    if "on_short" in override:
        assert get_trainer_cls("snooze")(config=compose(tmp_path, override)).snooze_options


@pytest.mark.parametrize("override", ["+trainer.v1.snooze.max_gen_rounds=2", "+trainer.v1.snooze.on_short=partial"])
def test_the_async_trainer_takes_max_gen_rounds_and_partial_steps(tmp_path: Path, override: str) -> None:
    """Its step is bounded as the sync step loop is (tests/integrations/test_verl_async_bound.py)."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    trainer = get_trainer_cls(ASYNC)(config=compose(tmp_path, f"trainer.v1.trainer_mode={ASYNC}", override))
    sync = get_trainer_cls("snooze")(config=compose(tmp_path, override))
    assert trainer.snooze_options.scheduler.max_gen_rounds == sync.snooze_options.scheduler.max_gen_rounds  # as set


def test_the_async_trainer_draws_one_prompt_per_fetch_and_reads_verls_async_settings(tmp_path: Path) -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls

    from snooze.integrations.verl import SnoozeAsyncReplayBuffer
    from snooze.integrations.verl._prompts import OnePromptLoader

    config = compose(
        tmp_path,
        f"trainer.v1.trainer_mode={ASYNC}",
        "data.gen_batch_size=4",  # verl sets 1 in its async modes (exact refills), with a warning
        "trainer.v1.sampler.max_off_policy_strategy=wait",
    )
    trainer = get_trainer_cls(ASYNC)(config=config)
    assert trainer.trainer_mode == "colocate_async" and trainer.registered_mode == ASYNC
    buffer = trainer.replay_buffer
    assert isinstance(buffer, SnoozeAsyncReplayBuffer) and buffer.max_off_policy_strategy == "wait"
    trainer._init_tokenizer()
    trainer._init_dataloader()
    assert trainer.config.data.gen_batch_size == 1 and isinstance(trainer.train_dataloader, OnePromptLoader)
    trainer.snooze.draw(3)  # what _next_train_batch does before verl's three one-prompt fetches
    rounds = trainer.snooze.scheduler.round
    it = iter(trainer.train_dataloader)
    rows = [next(it) for _ in range(4)]  # the fourth was not drawn ahead: a round of one
    assert all(len(r["raw_prompt"]) == 1 for r in rows)
    assert trainer.snooze.scheduler.round == rounds + 1
    assert len(trainer.snooze.scheduler.pending_candidates()) == 4


def test_in_flight_candidates_are_saved_with_their_uids_and_rebound_on_restore(tmp_path: Path) -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls

    def built() -> Any:
        trainer = get_trainer_cls(ASYNC)(config=compose(tmp_path, f"trainer.v1.trainer_mode={ASYNC}"))
        trainer._init_tokenizer()
        trainer._init_dataloader()
        return trainer

    run = built().snooze
    run.draw(3)
    cands = [run.next_queued() for _ in range(3)]
    folder = tmp_path / "global_step_0" / "snooze"
    with pytest.raises(snooze.IntegrationError, match="middle of a step"):
        run.save(folder, in_flight=True)  # drawn, not yet given a uid by verl
    uids = ["u0", "u1", "u2"]
    run.bind(uids, [c.key for c in cands])
    with pytest.raises(snooze.IntegrationError, match="middle of a step"):
        run.save(folder)  # the sync trainer's save: nothing may be in flight
    run.report(uids[:1], [cands[0].key], [[1.0, 0.0, 1.0, 0.0]])
    with pytest.raises(snooze.IntegrationError, match="middle of a step"):
        run.save(folder, in_flight=True)  # a report of the open step: saved only once the step is closed
    train, _, _ = run.finish_step(in_flight=True)  # two groups still out, for later steps
    assert train == ["u0"]
    folder = tmp_path / "global_step_1" / "snooze"
    run.save(folder, in_flight=True)
    restored = built().snooze
    restored.restore(folder, 1)
    assert {u: c.key for u, c in restored.open.items()} == {u: c.key for u, c in zip(uids[1:], cands[1:])}
    restored.report(["u2"], [cands[2].key], [[1.0, 1.0, 1.0, 1.0]])  # reported after the resume, once
    with pytest.raises(snooze.IntegrationError, match="was not issued by the snooze scheduler"):
        restored.report(["u0"], [cands[0].key], [[1.0, 0.0, 1.0, 0.0]])  # reported before the save: not again
    (folder / "inflight.json").unlink()
    fresh = built().snooze
    with pytest.raises(snooze.StateError, match="no inflight.json"):
        fresh.restore(folder, 1)
    assert fresh.scheduler.step_index == 0 and not fresh.open  # left as it was


def test_the_reward_band_reaches_the_scheduler_and_drops_groups_outside_it(tmp_path: Path) -> None:
    """``+trainer.v1.snooze.reward_band=[lo,hi]`` (the core's mean band): a group with spread whose mean lies
    outside is not trained on, as ``classify_groups`` (the reference) says, and the buffer drops it at once."""
    import numpy as np

    trainer = _trainer(tmp_path, "+trainer.v1.snooze.reward_band=[0.3,0.7]", "data.filter_overlong_prompts=False")
    run = trainer.snooze
    assert run.config.reward_band == (0.3, 0.7)
    cands = run.propose_round()
    uids = [f"u{i}" for i in range(len(cands))]
    run.bind(uids, [c.key for c in cands])
    rewards = np.array([[1.0, 1, 1, 0], [1.0, 0, 1, 0]])[: len(cands)]  # means 0.75 (spread, above the band), 0.5
    never, joined = run.report(uids, [c.key for c in cands], rewards)
    expected = snooze.classify_groups(rewards, reward_band=(0.3, 0.7)) != snooze.SIGNAL
    assert expected.tolist() == [True, False] and never == [uids[0]] and joined == {}


def test_the_gpu_recipe_script_composes_validates_and_builds(tmp_path: Path) -> None:
    """examples/verl/run_gsm8k_snooze.sh, run with a ``python3`` on PATH that records its arguments: verl's
    config accepts them (``validate_config`` as ``main_ppo`` calls it) and builds the snooze trainer."""
    import json
    import os
    import subprocess
    import sys

    import verl.trainer.config as verl_config
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.utils.config import validate_config

    from integrations._verl_env import make_model_dir

    script = Path(__file__).parents[2] / "examples" / "verl" / "run_gsm8k_snooze.sh"
    model, data = make_model_dir(tmp_path), tmp_path / "gsm8k"
    data.mkdir()
    for name in ("train", "test"):
        make_parquet(data, name=name)
    bin_dir, argv = tmp_path / "bin", tmp_path / "argv.json"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        f'#!/bin/sh\nexec {sys.executable} -c \'import json, sys; json.dump(sys.argv[1:], open("{argv}", "w"))\' "$@"\n'
    )
    (bin_dir / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    bad = subprocess.run(["bash", str(script), str(model)], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "usage" in bad.stderr and not argv.exists()
    subprocess.run(
        ["bash", str(script), str(model), str(data), str(tmp_path / "run"), "trainer.total_training_steps=3"],
        env=env,
        check=True,
    )
    words = json.loads(argv.read_text())
    assert words[:2] == ["-m", "verl.trainer.main_ppo"] and words[-1] == "trainer.total_training_steps=3"
    with initialize_config_dir(config_dir=os.path.dirname(verl_config.__file__), version_base=None):
        config = hydra_compose("ppo_trainer", overrides=words[2:])
    validate_config(config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config))
    trainer = get_trainer_cls(config.trainer.v1.trainer_mode)(config=config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    cfg = trainer.snooze.config
    assert (cfg.batch_size, cfg.gen_size, cfg.group_size, cfg.policy, cfg.max_gen_rounds) == (64, 128, 8, "snooze", 4)
    assert config.trainer.n_gpus_per_node == 1 and config.actor_rollout_ref.rollout.name == "vllm"


# -- the scheduler's options as verl's config gives them --------------------------------------------------
def test_a_scheduler_field_of_the_wrong_type_is_the_configs_error_not_a_feature_refusal(tmp_path: Path) -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls

    with pytest.raises(
        snooze.ConfigError, match="carry_surplus='abc'.*True or False"
    ):  # was "carry_surplus=True is not supported"
        get_trainer_cls("snooze")(config=compose(tmp_path, "+trainer.v1.snooze.carry_surplus=abc"))


def test_a_null_seed_is_the_default_data_seed(tmp_path: Path) -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls

    trainer = get_trainer_cls("snooze")(config=compose(tmp_path, "+data.seed=7", snooze={"seed": None}))
    assert trainer.snooze_options.seed == 7  # was 0: an explicit null did not fall back to data.seed


def test_unknown_options_name_the_known_fields(tmp_path: Path) -> None:
    from verl.trainer.ppo.v1 import get_trainer_cls

    with pytest.raises(snooze.ConfigError, match="unknown SchedulerConfig field"):
        get_trainer_cls("snooze")(config=compose(tmp_path, snooze={"snoze_factor": 5}))


def test_partial_groups_ask_verl_for_n_rollouts_and_join_a_rest_to_its_screen(tmp_path: Path) -> None:
    """``screen_size=3`` of ``rollout.n=4``: each row the loader hands verl carries ``__rollout_n__`` (3 for a screen,
    1 for a rest); a screen that passed gets its rest in the next round under a uid of its own, which the report
    joins to the screen's uid; a stopped screen is cleared at once. Nothing is saved in the middle of a screening
    step, and a scheduler state holding screens that wait for their rest is refused on resume."""
    trainer = _trainer(tmp_path, "+trainer.v1.snooze.screen_size=3", "data.filter_overlong_prompts=False")
    run = trainer.snooze
    assert run.screening
    batch = trainer._fetch_one_gen_batch()  # verl's fetch: the loader's round, uids given, bound to the scheduler
    uids = list(batch["uid"])
    assert [int(n) for n in batch["__rollout_n__"]] == [3] * len(uids) and len(uids) >= 2
    cands = [run.open[u] for u in uids]
    screens = [[1.0, 0.0, 1.0]] + [[1.0, 1.0, 1.0]] * (len(uids) - 1)  # the first has signal: its rest is asked
    never, joined = run.report(uids, [c.key for c in cands], screens)
    assert never == uids[1:] and joined == {}  # the stopped screens' trajectories can go now
    folder = tmp_path / "global_step_0" / "snooze"
    with pytest.raises(snooze.IntegrationError, match="middle of a step"):
        run.save(folder)  # a screen waits for its rest
    run.scheduler.save(folder)  # what a writer saving in the middle of a step would leave
    fresh = _trainer(tmp_path, "+trainer.v1.snooze.screen_size=3", "data.filter_overlong_prompts=False").snooze
    with pytest.raises(snooze.StateError, match="1 screen.* wait for the rest of their group"):
        fresh.restore(folder, 0)
    assert fresh.scheduler.step_index == 0 and not fresh.open  # left as it was

    assert run.wants_round()
    again = trainer._fetch_one_gen_batch()  # the next round: the rest first, then fresh screens
    more = list(again["uid"])
    widths = [int(n) for n in again["__rollout_n__"]]
    assert widths[0] == 1 and set(widths[1:]) <= {3} and run.open[more[0]].ticket == cands[0].ticket
    rows = [[0.0]] + [[0.0, 0.0, 0.0]] * (len(more) - 1)
    never, joined = run.report(more, [run.open[u].key for u in more], rows)
    assert joined == {more[0]: uids[0]} and never == more[1:]  # the group is whole: its rest takes the screen's uid
