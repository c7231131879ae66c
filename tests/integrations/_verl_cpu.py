"""CPU stand-ins at verl 0.9.1's two GPU-only interfaces, so that verl's own ``fit()`` runs on a CPU.

- :class:`TinyWorkerGroup` stands in for the actor worker group (FSDP/Megatron ``ActorRolloutRefWorker``
  behind a ``RayWorkerGroup``): the same methods the trainer calls (``compute_log_prob``, ``update_actor``,
  ``save_checkpoint``, ``load_checkpoint``, ``update_weights``), each taking verl's ``KVBatchMeta`` through
  verl's own TransferQueue bridge (``tqbridge``) as the real worker's dispatch does. It trains a
  :class:`~snooze.trainer.model.TinyGPT` with verl's policy loss (``get_policy_loss_fn``, ``agg_loss``).
- :class:`TinyReplica` is a rollout replica registered in verl's ``RolloutReplicaRegistry`` as
  ``rollout.name=tiny_cpu``: its server actor generates with the same model (weights pushed by the
  ``naive`` checkpoint engine's ``update_weights``), answering ``generate`` as verl's vLLM server does.

Sampling is seeded from (prompt tokens, weight version, how often that prompt was asked at that version),
so an uninterrupted run and a resumed one draw the same completions.
"""

from __future__ import annotations

import copy
import hashlib
import os
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import torch

NAME = "tiny_cpu"
SLOW_ENV = "SNOOZE_TINY_CPU_DELAY"  # seconds the rollout server takes per token (default 0)
VOCAB = 28  # _verl_env.make_model_dir's word-level tokenizer
EOS = 1


def tiny_model(seed: int = 0) -> Any:
    from snooze.trainer.model import ModelConfig, TinyGPT

    torch.manual_seed(seed)
    return TinyGPT(ModelConfig(vocab_size=VOCAB, n_layer=1, n_head=2, d_model=16, max_len=64))


def tiny_gpt2_dir(folder: Path) -> Path:
    """``_verl_env.make_model_dir``'s tokenizer with a GPT-2 ``config.json`` of the stand-in's size (no weights):
    what verl's ``HFModelConfig`` reads on the driver and in the agent-loop workers."""
    from transformers import GPT2Config

    from integrations._verl_env import make_model_dir

    model = make_model_dir(folder)
    GPT2Config(
        vocab_size=VOCAB,
        n_embd=16,
        n_layer=1,
        n_head=2,
        n_positions=64,
        bos_token_id=EOS,
        eos_token_id=EOS,
        architectures=["GPT2LMHeadModel"],
    ).save_pretrained(model)
    return model


def weights_digest(state: dict[str, torch.Tensor]) -> str:
    """A short digest of a model's weights: equal digests, equal weights."""
    digest = hashlib.sha256()
    for name in sorted(state):
        digest.update(name.encode())
        digest.update(state[name].detach().contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def _logits(model: Any, ids: torch.Tensor) -> torch.Tensor:
    n = ids.shape[0]
    return model(ids[None], torch.ones(1, n, dtype=torch.bool), torch.arange(n)[None])[0][0]


def _rows(value: Any) -> list[torch.Tensor]:
    return list(value.unbind()) if getattr(value, "is_nested", False) else list(value)


def _jagged(rows: list[torch.Tensor]) -> torch.Tensor:
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


class TinyServer:
    """The rollout server (an async Ray actor): verl's ``generate`` contract, a TinyGPT sampling on CPU.

    ``abort_all_requests`` pauses generation until ``resume_generation`` (what the colocated async trainer
    calls around each step's training): a request stops before its next token and goes on afterwards with
    the new weights, as verl's partial rollout resumes an aborted request. Requests interleave token by
    token; each one's samples depend only on its own seed."""

    def __init__(self, response_length: int, delay: float = 0.0) -> None:
        import asyncio

        torch.set_num_threads(1)
        self.model, self.version, self.asked = tiny_model(), None, Counter()
        self.response_length = response_length
        self.running = asyncio.Event()
        self.running.set()
        self.delay = delay  # seconds per token, as a slower server would take (SLOW_ENV)

    async def abort_all_requests(self, *_: Any, **__: Any) -> None:
        self.running.clear()

    async def resume_generation(self, *_: Any, **__: Any) -> None:
        self.running.set()

    def load_weights(self, state: dict[str, torch.Tensor], global_steps: int | None) -> None:
        self.model.load_state_dict(state)
        self.version = global_steps

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict, **_: Any) -> Any:
        import asyncio

        from verl.workers.rollout.replica import TokenOutput

        await self.running.wait()  # returns at once unless generation is paused
        key = (tuple(prompt_ids), self.version)
        seed = zlib.crc32(repr((key, self.asked[key])).encode())
        self.asked[key] += 1
        gen = torch.Generator().manual_seed(seed)
        temperature = float(sampling_params.get("temperature") or 0.0)
        ids, out, logprobs = torch.tensor(prompt_ids), [], []
        for _ in range(self.response_length):
            await asyncio.sleep(self.delay)  # lets an abort in between tokens
            await self.running.wait()
            with torch.no_grad():
                logits = _logits(self.model, ids)[-1]
            if temperature > 0:
                tok = int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen))
            else:
                tok = int(logits.argmax())
            out.append(tok)
            logprobs.append(float(torch.log_softmax(logits, -1)[tok]))
            ids = torch.cat([ids, torch.tensor([tok])])
            if tok == EOS:
                break
        return TokenOutput(
            token_ids=out,
            log_probs=logprobs if sampling_params.get("logprobs") else None,
            stop_reason="completed",
            extra_fields={"global_steps": self.version},
        )

    def _noop(self, *_: Any, **__: Any) -> None:
        return None

    wake_up = sleep = clear_kv_cache = release_kv_cache = resume_kv_cache = start_profile = stop_profile = _noop


def _replica_class() -> type:
    import ray
    from verl.workers.rollout.replica import RolloutReplica

    class TinyReplica(RolloutReplica):
        """One server per replica, launched on the worker group it is colocated with (hybrid mode)."""

        def rollout_worker_use_gpu(self) -> bool:
            return False

        async def init_standalone(self) -> None:  # separate async: on CPU, see _verl_sep
            from integrations._verl_sep import init_standalone

            await init_standalone(self)

        async def launch_servers(self) -> None:
            delay = float(os.environ.get(SLOW_ENV, 0))
            server = ray.remote(num_cpus=0)(TinyServer).remote(self.config.response_length, delay)
            self.servers, self._server_handle = [server], server
            self._server_address = f"{NAME}-{self.replica_rank}"
            for worker in self.workers:
                worker.server = server

    return TinyReplica


def register_rollout() -> None:
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    RolloutReplicaRegistry.register(NAME, _replica_class)


class TinyWorkerGroup:
    """The actor worker group on the driver: one rank, verl's data in and out of TransferQueue."""

    world_size = 1

    def __init__(self, config: Any, seed: int = 0, lr: float = 0.05) -> None:
        from verl.utils.config import omega_conf_to_dataclass
        from verl.utils.transferqueue_utils import tqbridge

        self.actor_config = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
        self.model = tiny_model(seed)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.server: Any = None
        self.workers = [self]
        self._dispatch_info = {"actor": [0]}
        self.updates = 0
        self.compute_log_prob = tqbridge()(self._log_prob)
        self.update_actor = tqbridge()(self._update)

    def _query_dispatch_info(self, role: str) -> list[int]:
        return self._dispatch_info[role]

    def init_model(self) -> None:
        return None

    def _token_logprobs(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per position t: log p(ids[t+1] | ids[:t+1]) and the entropy there (0 at the last position)."""
        logp = torch.log_softmax(_logits(self.model, ids), -1)
        token = torch.zeros(len(ids))
        token[:-1] = logp[:-1].gather(1, ids[1:, None])[:, 0]
        entropy = torch.zeros(len(ids))
        entropy[:-1] = -(logp.exp() * logp).sum(-1)[:-1]
        return token, entropy

    def _log_prob(self, data: Any) -> Any:
        from tensordict import TensorDict

        with torch.no_grad():
            pairs = [self._token_logprobs(ids) for ids in _rows(data["input_ids"])]
        fields = {"log_probs": _jagged([p[0] for p in pairs]), "entropy": _jagged([p[1] for p in pairs])}
        return TensorDict(fields, batch_size=[len(pairs)])

    def _update(self, data: Any) -> Any:
        """One gradient step of verl's policy loss over the whole batch (one mini-batch, one epoch)."""
        from tensordict import TensorDict
        from verl.trainer.ppo.core_algos import get_policy_loss_fn
        from verl.utils import tensordict_utils as tu

        masks = [m.float() for m in _rows(data["response_mask"])]
        log_probs = []
        for ids, mask in zip(_rows(data["input_ids"]), masks):
            token, _ = self._token_logprobs(ids)
            log_probs.append(token[len(ids) - len(mask) - 1 : len(ids) - 1])
        pad = torch.nn.utils.rnn.pad_sequence
        mask = pad(masks, batch_first=True)
        old = pad([r.float() for r in _rows(data["old_log_probs"])], batch_first=True)
        adv = pad([r.float() for r in _rows(data["advantages"])], batch_first=True)
        cfg = self.actor_config
        cfg.global_batch_info.update(
            dp_size=1,
            batch_num_tokens=int(mask.sum()),
            global_batch_size=len(masks),
            loss_scale_factor=cfg.loss_scale_factor,
        )
        loss_fn = get_policy_loss_fn(self.actor_config.policy_loss.get("loss_mode", "vanilla"))
        loss, pg_metrics = loss_fn(
            old_log_prob=old,
            log_prob=pad(log_probs, batch_first=True),
            advantages=adv,
            response_mask=mask,
            loss_agg_mode=cfg.loss_agg_mode,
            config=cfg,
        )
        self.optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.updates += 1
        metrics = {k: float(v) for k, v in pg_metrics.items()}
        metrics.update({"pg_loss": float(loss), "grad_norm": float(grad_norm), "mfu": 0.0})
        out = TensorDict({}, batch_size=[])
        tu.assign_non_tensor(out, metrics=metrics)
        return out

    def update_weights(self, global_steps: int | None = None, mode: str = "naive") -> list[Any]:
        state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        return [self.server.load_weights.remote(state, global_steps)]

    def save_checkpoint(self, local_path: str, hdfs_path: Any = None, global_step: int = 0, **_: Any) -> None:
        os.makedirs(local_path, exist_ok=True)
        state = {"model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(), "step": global_step}
        torch.save(state, Path(local_path) / "tiny.pt")

    def load_checkpoint(self, local_path: str, hdfs_path: Any = None, del_local_after_load: bool = False) -> None:
        state = torch.load(Path(local_path) / "tiny.pt", weights_only=True)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])

    def weights(self) -> dict[str, torch.Tensor]:
        return copy.deepcopy(self.model.state_dict())


def setup(trainer: Any, wg: TinyWorkerGroup) -> None:
    """``PPOTrainer._setup`` with the stand-in worker group (no resource pools): everything else verl's."""
    from types import SimpleNamespace

    from verl.checkpoint_engine.base import CheckpointEngineManager
    from verl.experimental.reward_loop import RewardLoopManager
    from verl.trainer.ppo.v1.trainer_separate_async import PPOTrainerSeparateAsync
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.rollout.llm_server import LLMServerManager

    config = trainer.config
    trainer._init_tokenizer()
    trainer._init_dataloader()
    trainer._init_dump_executor()
    trainer.resource_pool_manager = SimpleNamespace(get_n_gpus=lambda: 1)
    trainer.ref_in_actor = False
    trainer.actor_rollout_wg = wg
    trainer.reward_loop_manager = RewardLoopManager(config=config, rm_resource_pool=None)
    trainer.teacher_model_manager = trainer.distillation_config = None
    if getattr(trainer, "_enable_hybrid_replicas", True):
        trainer.llm_server_manager = LLMServerManager.create(config=config, worker_group=wg)
    else:  # separate async with actor_rollout_ref.hybrid_engine=False: rollout on standalone replicas only
        trainer.llm_server_manager = LLMServerManager.create_empty(config=config)
    engine = omega_conf_to_dataclass(config.actor_rollout_ref.rollout.checkpoint_engine)
    engine.backend = "naive"
    replicas = trainer.llm_server_manager.get_replicas()
    trainer.checkpoint_manager = CheckpointEngineManager(config=engine, actor_wg=wg, replicas=replicas)
    trainer.checkpoint_manager.sleep_replicas()
    trainer._load_checkpoint()
    if isinstance(trainer, PPOTrainerSeparateAsync):  # its standalone replicas, after PPOTrainer._setup's part
        from integrations._verl_sep import setup_standalone

        setup_standalone(trainer)
    trainer.on_init_end()


def agent_loop_manager(trainer: Any) -> Any:
    """What ``TaskRunnerV1.init_agent_loop_manager`` builds: verl's ``AgentLoopManagerTQ`` and its workers."""
    from verl.trainer.ppo.v1 import AgentLoopManagerTQ

    return AgentLoopManagerTQ.create(
        config=trainer.config,
        llm_client=trainer.get_llm_client(),
        teacher_client=trainer.get_teacher_client(),
        reward_loop_worker_handles=trainer.get_reward_handles(),
    )
