"""What the verl tests run on: verl 0.9.1's own config, a tiny local model folder, parquet data, a real
TransferQueue on a one-node Ray, and a stand-in for the GPU rollout workers.

The stand-in does what ``AgentLoopWorkerTQ`` does after vLLM returns (``_run_prompt`` and
``_agent_loop_postprocess``): it marks each prompt running, writes ``rollout.n`` trajectories per
prompt into TransferQueue under ``{uid}_{session}_0`` with the prompt's dataset fields and an
``rm_scores`` row, tags them, then marks the prompt finished (or failed). Only the generated tokens
and the reward function are invented here: the reward is a fixed rule per prompt.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

G, B = 4, 2  # rollouts per prompt (actor_rollout_ref.rollout.n), prompts per training batch
EASY = {("gsm", 0), ("gsm", 2)}  # every rollout passes: zero spread, mean 1 -> too easy
ROWS = [("gsm", 0), ("gsm", 1), ("gsm", 2), ("gsm", 3), ("math", 10), ("math", 11)]


def reward_rule(key: tuple[str, Any], session: int) -> float:
    """Easy prompts always pass; the others pass on odd sessions (half of the group: signal)."""
    return 1.0 if key in EASY else float(session % 2)


def make_model_dir(tmp: Path) -> Path:
    """A tokenizer and a one-layer model config (no weights): what verl's HFModelConfig reads on the driver."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    words = ["<pad>", "<eos>", "<unk>", "user", ":", "q", "gsm", "math"] + [str(i) for i in range(20)]
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.chat_template = "{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} {% endfor %}"
    folder = tmp / "model"
    fast.save_pretrained(folder)
    Qwen2Config(
        vocab_size=len(words),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(folder)
    return folder


def make_parquet(tmp: Path, rows: list[tuple[str, Any]] = ROWS, index: bool = True, name: str = "train") -> Path:
    import datasets

    records = [
        {
            "data_source": ds,
            "prompt": [{"role": "user", "content": f"q {ds} {i}"}],
            "reward_model": {"ground_truth": "1"},
            "extra_info": {"index": i} if index else {"split": "train"},
        }
        for ds, i in rows
    ]
    path = tmp / f"{name}.parquet"
    datasets.Dataset.from_list(records).to_parquet(str(path))
    return path


def compose(tmp: Path, *overrides: str, snooze: dict[str, Any] | None = None, data: Path | None = None) -> Any:
    """verl's ``ppo_trainer.yaml`` composed with Hydra's compose API, as ``main_ppo`` composes it."""
    import os

    import verl.trainer.config as verl_config
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    data = data or make_parquet(tmp)
    model = tmp / "model" if (tmp / "model").exists() else make_model_dir(tmp)
    base = [
        f"data.train_files={data}",
        f"data.val_files={data}",
        f"data.train_batch_size={B}",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={model}",
        f"actor_rollout_ref.rollout.n={G}",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2",
        "algorithm.adv_estimator=grpo",
        f"trainer.default_local_dir={tmp / 'ckpt'}",
        "trainer.v1.trainer_mode=snooze",
        "+trainer.v1.snooze.poll_interval=0.02",
    ]
    opts = {"policy": "snooze", **(snooze or {})}
    if opts["policy"] == "snooze":  # snoozing at factor 5 unless the test says otherwise
        opts = {"options": {"factor": 5}, **opts}
    flat = {f"{k}.{o}" if isinstance(v, dict) else k: w for k, v in opts.items() for o, w in _items(v)}
    base += [f"+trainer.v1.snooze.{k}={'null' if v is None else v}" for k, v in flat.items()]
    with initialize_config_dir(config_dir=os.path.dirname(verl_config.__file__), version_base=None):
        return hydra_compose("ppo_trainer", overrides=base + list(overrides))


def _items(value: Any) -> list[tuple[str, Any]]:
    """A mapping's items (the policy's options: one override each), or ``[("", value)]``."""
    return list(value.items()) if isinstance(value, dict) else [("", value)]


def documented_command(tmp_path: Path) -> list[str]:
    """The ``main_ppo`` overrides of docs/integrations/verl.md, with local files for $DATA, $MODEL and $RUN."""
    import shlex

    doc = (Path(__file__).parents[2] / "docs" / "integrations" / "verl.md").read_text()
    block = next(b for b in doc.split("```bash")[1:] if "verl.trainer.main_ppo" in b).split("```")[0]
    words = shlex.split(block.replace("\\\n", " "))
    assert words[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    data = make_parquet(tmp_path)
    subs = {
        "$DATA/gsm8k/train.parquet": str(data),
        "$DATA/gsm8k/test.parquet": str(data),
        "$MODEL": str(tmp_path / "model"),
        "$RUN": str(tmp_path / "run"),
    }
    out = []
    for word in words[3:]:
        for old, new in subs.items():
            word = word.replace(old, new)
        assert "$" not in word, word
        out.append(word)
    return out


class Rollout:
    """Stands in for verl's ``AgentLoopManagerTQ`` (which needs GPU rollout servers): same TransferQueue writes.

    ``delay`` finishes each submission on a thread after that many seconds (the replay buffer polls
    meanwhile); ``sessions`` overrides the rollouts of one prompt key; ``fail`` marks a key's group failed;
    ``rule`` gives the ``rm_scores`` reward of a session, ``acc_rule`` its ``reward_extra_info["acc"]``.
    """

    def __init__(
        self,
        n: int = G,
        rule: Callable[[tuple[str, Any], int], float] = reward_rule,
        delay: float = 0.0,
        acc_rule: Callable[[tuple[str, Any], int], float] | None = None,
    ) -> None:
        self.n, self.rule, self.delay = n, rule, delay
        self.acc_rule = acc_rule or rule  # reward_extra_info["acc"], what a reward function may return beside the score
        self.sessions: dict[tuple[str, Any], int] = {}
        self.fail: set[tuple[str, Any]] = set()
        self.submitted: list[list[tuple[str, Any]]] = []  # prompt keys of each submission, in order
        self.threads: list[threading.Thread] = []

    def generate_sequences(self, batch: Any) -> None:
        import transfer_queue as tq

        rows = [
            (str(_val(batch["uid"], i)), str(_val(batch["data_source"], i)), dict(_val(batch["extra_info"], i)))
            for i in range(len(batch))
        ]
        self.submitted.append([(ds, extra["index"]) for _, ds, extra in rows])
        for uid, _, _ in rows:
            tq.kv_put(key=uid, partition_id="train", tag={"status": "running"})
        step = int(batch["global_steps"])
        if self.delay:
            thread = threading.Thread(target=self._finish, args=(rows, step, self.delay))
            self.threads.append(thread)
            thread.start()
        else:
            self._finish(rows, step, 0.0)

    def _finish(self, rows: list[tuple[str, str, dict]], step: int, delay: float) -> None:
        import transfer_queue as tq
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        time.sleep(delay)
        for uid, ds, extra in rows:
            key = (ds, extra["index"])
            n = self.sessions.get(key, self.n)
            keys, fields, tags = [], [], []
            for s in range(n):
                if key in self.fail and s == 0:
                    continue  # this session raised: no trajectory, the group ends as "failure"
                resp = torch.tensor([5, 6, 1])
                scores = torch.zeros(3)
                scores[-1] = self.rule(key, s)  # verl puts the sequence reward on the last response token
                keys.append(f"{uid}_{s}_0")
                fields.append(
                    {
                        "prompts": torch.tensor([3, 4, 5]),
                        "responses": resp,
                        "response_mask": torch.ones(3, dtype=torch.int64),
                        "rm_scores": scores,
                        "data_source": ds,
                        "extra_info": extra,
                        "index": extra["index"],
                        "uid": uid,
                        "global_steps": step,
                        "extra_fields": {"reward_extra_info": {"acc": self.acc_rule(key, s)}},
                    }
                )
                tags.append(
                    {
                        "status": "success",
                        "prompt_len": 3,
                        "response_len": 3,
                        "seq_len": 6,
                        "global_steps": step,
                        "min_global_steps": step,
                        "max_global_steps": step,
                    }
                )
            if keys:
                tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
            status = "failure" if key in self.fail else "finished"
            tq.kv_put(key=uid, partition_id="train", tag={"status": status})

    def join(self) -> None:
        for t in self.threads:
            t.join()


def _val(stack: Any, i: int) -> Any:
    item = stack[i]
    return getattr(item, "data", item)


def worker_group() -> Any:
    """The actor worker group's checkpoint calls (FSDP on GPUs): nothing to write for a model here."""
    return SimpleNamespace(save_checkpoint=lambda *a, **k: None, load_checkpoint=lambda *a, **k: None)


def build_trainer(config: Any, rollout: Rollout | None = None) -> Any:
    """What ``TaskRunnerV1.run`` and ``PPOTrainer._setup`` do on the driver, less the GPU worker groups."""
    from verl.trainer.ppo.v1 import get_trainer_cls

    trainer = get_trainer_cls(config.trainer.v1.trainer_mode)(config=config)
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer.actor_rollout_wg = worker_group()
    trainer.agent_loop_manager = rollout or Rollout()
    trainer.global_steps = 1
    return trainer


def train_step(trainer: Any) -> tuple[Any, dict[str, Any]]:
    """One training step up to the trainer's sample (``PPOTrainer.step`` / ``_step_once``, verl's order)."""
    from verl.trainer.ppo.v1.utils import MetricsAggregator

    trainer.prepare_step()
    batch, metrics = trainer.replay_buffer.sample(
        global_steps=trainer.global_steps, partition_id="train", batch_size=trainer.config.data.train_batch_size
    )
    aggregator = MetricsAggregator()
    aggregator.add_step_metrics(metrics, sample_count=len(batch))
    return batch, aggregator.get_aggregated_metrics()


def end_step(trainer: Any, batch: Any) -> None:
    """What ``fit`` does after training on a batch: clear it from TransferQueue, advance the step."""
    import transfer_queue as tq

    tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
    trainer.global_steps += 1


@contextmanager
def ray_transfer_queue(tmp: Path) -> Iterator[None]:
    """One Ray node and one TransferQueue (2 logical CPUs: the controller and one storage unit), for a module."""
    import ray
    import transfer_queue as tq

    for attempt in (1, 2):  # Ray gives its raylet 30 s to start, which a loaded 2-core machine can exceed
        try:
            ray.init(num_cpus=2, object_store_memory=100 * 2**20, include_dashboard=False, log_to_driver=False)
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    conf = compose(tmp).transfer_queue
    conf.backend.SimpleStorage.num_data_storage_units = 1
    tq.init(conf)
    try:
        yield
    finally:
        tq.close()
        ray.shutdown()


def clear_transfer_queue() -> None:
    import transfer_queue as tq

    for partition, items in (tq.kv_list() or {}).items():
        if items:
            tq.kv_clear(keys=list(items), partition_id=partition)
