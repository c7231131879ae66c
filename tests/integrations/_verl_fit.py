"""One run of verl 0.9.1's own ``PPOTrainer.fit()`` on CPU, in a process of its own.

``python -m integrations._verl_fit MODE FOLDER`` (``tests/`` on ``PYTHONPATH``) starts a
one-node Ray with TransferQueue, builds verl's trainer for ``trainer.v1.trainer_mode=MODE`` with the
stand-ins of ``_verl_cpu`` at its two GPU-only interfaces, runs ``fit()`` for ``STEPS`` steps and writes
``FOLDER/summary.json``. verl's file logger writes ``FOLDER/log/fit/MODE.jsonl``, its checkpoints go to
``FOLDER/ckpt``; verl's default ``trainer.resume_mode=auto`` resumes the latest checkpoint found there.

Each run has a process of its own: verl names some Ray actors (``reward_loop_worker_0``) and
TransferQueue keeps one client per process, so two trainers cannot share a Ray session.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

STEPS, SAVE_FREQ = 4, 2
# (data_source, extra_info.index, ground truth): "easy" rows always score 1 (no signal), "odd" rows score 1
# when the first generated word is an odd number (verl_cpu_reward.py)
ROWS = [("gsm", 0, "easy"), ("gsm", 1, "odd"), ("gsm", 2, "easy"), ("gsm", 3, "odd"), ("math", 10, "odd")]
ROWS += [("math", 11, "odd")]
LONG = ("math", 99, "odd", "q math 1 2 3 4 5 6 7 8 9")  # 12 tokens > data.max_prompt_length: verl filters it out
REWARD = Path(__file__).with_name("verl_cpu_reward.py")


def write_data(folder: Path) -> Path:
    """The training (and validation) parquet: ``ROWS`` and, in the middle, the over-long prompt verl drops."""
    import datasets

    def record(ds: str, i: int, truth: str, text: str | None = None) -> dict[str, Any]:
        content = text or f"q {ds} {i}"
        return {
            "data_source": ds,
            "prompt": [{"role": "user", "content": content}],
            "reward_model": {"ground_truth": truth},
            "extra_info": {"index": i},
        }

    records = [record(*row) for row in ROWS]
    records.insert(3, record(*LONG))  # before other rows: verl's positions shift past it
    path = folder / "train.parquet"
    datasets.Dataset.from_list(records).to_parquet(str(path))
    return path


def overrides(mode: str) -> list[str]:
    """verl's command-line overrides of the run (on top of ``_verl_env.compose``'s)."""
    out = [
        "actor_rollout_ref.rollout.name=tiny_cpu",
        "actor_rollout_ref.rollout.response_length=4",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        "actor_rollout_ref.actor.use_kl_loss=False",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
        "data.max_prompt_length=8",
        "data.filter_overlong_prompts=True",
        "data.val_batch_size=8",
        "reward.num_workers=1",
        f"reward.custom_reward_function.path={REWARD}",
        "trainer.logger=[console,file]",
        f"trainer.total_training_steps={STEPS}",
        f"trainer.save_freq={SAVE_FREQ}",
        f"trainer.test_freq={SAVE_FREQ}",
        "trainer.device=cpu",
        "trainer.n_gpus_per_node=1",
        "trainer.project_name=fit",
        f"trainer.experiment_name={mode}",
        f"trainer.v1.trainer_mode={mode}",
    ]
    if mode == "snooze_separate_async":  # rollout on a standalone replica, weights through _verl_sep's engine
        out += [
            "actor_rollout_ref.hybrid_engine=False",
            "actor_rollout_ref.rollout.nnodes=1",
            "actor_rollout_ref.rollout.n_gpus_per_node=1",
            "actor_rollout_ref.rollout.checkpoint_engine.backend=tiny_cpu",
            "actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=integrations._verl_sep",
            "trainer.v1.separate_async.parameter_sync_step=1",
        ]
    if mode == "sync":
        out.append("algorithm.filter_groups.enable=True")  # DAPO: groups with zero reward spread are evicted
    return out


def config(folder: Path, mode: str) -> Any:
    from omegaconf import OmegaConf

    from integrations._verl_cpu import tiny_gpt2_dir
    from integrations._verl_env import compose

    data = folder / "train.parquet"
    if not data.exists():
        write_data(folder)
    if not (folder / "model").exists():
        tiny_gpt2_dir(folder)
    conf = compose(folder, *overrides(mode), data=data)
    conf.transfer_queue.enable = True
    conf.transfer_queue.backend.SimpleStorage.num_data_storage_units = 1
    OmegaConf.resolve(conf)
    return conf


def start_ray(conf: Any) -> None:
    import ray
    import transfer_queue as tq

    for attempt in (1, 2):  # Ray gives its raylet 30 s to start, which a loaded 2-core machine can exceed
        try:
            ray.init(num_cpus=4, object_store_memory=100 * 2**20, include_dashboard=False, log_to_driver=False)
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    tq.init(conf.transfer_queue)


def run(mode: str, folder: Path) -> dict[str, Any]:
    """Build verl's trainer with the CPU stand-ins, run ``fit()``, return what the test reads beside verl's files."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    from integrations import _verl_cpu as cpu

    t0 = time.monotonic()
    phases: dict[str, float] = {}

    def mark(name: str) -> None:
        phases[name] = round(time.monotonic() - t0, 1)

    os.environ["VERL_FILE_LOGGER_ROOT"] = str(folder / "log")  # verl opens it "wb": one file per run
    conf = config(folder, mode)
    mark("config")
    start_ray(conf)
    mark("ray")
    cpu.register_rollout()
    trainer = get_trainer_cls(mode)(config=conf)
    if mode == "snooze_separate_async":
        from integrations._verl_sep import TinySepWorkerGroup

        wg = TinySepWorkerGroup(conf)
    else:
        wg = cpu.TinyWorkerGroup(conf)
    cpu.setup(trainer, wg)  # loads the checkpoint verl resumes, if any
    resumed_at, start = trainer.global_steps, cpu.weights_digest(wg.weights())
    mark("setup")
    manager = cpu.agent_loop_manager(trainer)
    mark("agents")
    trainer.fit(manager)
    mark("fit")
    return {
        "mode": mode,
        "train_rows": len(trainer.train_dataset),
        "resumed_at": resumed_at,
        "global_steps": trainer.global_steps,
        "actor_updates": wg.updates,
        "weights_start": start,
        "weights_end": cpu.weights_digest(wg.weights()),
        "weight_syncs": getattr(wg, "syncs", None),  # separate async: sends through the checkpoint engine
        "seconds": phases,  # since the run began (after its imports), at the end of each phase
    }


def main(argv: list[str]) -> None:
    mode, folder = argv[0], Path(argv[1])
    folder.mkdir(parents=True, exist_ok=True)
    code = 1
    try:
        summary = run(mode, folder)
        (folder / "summary.json").write_text(json.dumps(summary, indent=1))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        stop_ray()
        os._exit(code)  # threads of verl's clients would keep the process alive: the run is over and written


def stop_ray() -> None:
    """TransferQueue's client, then the Ray node this process started (its agents would outlive ``os._exit``)."""
    import ray
    import transfer_queue as tq

    if ray.is_initialized():
        tq.close()
        ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
