"""CPU stand-ins at verl 0.9.1's separate-async interfaces, beside ``_verl_cpu``'s, so ``PPOTrainerSeparateAsync``
runs its own ``fit()`` on a CPU with ``actor_rollout_ref.hybrid_engine=False`` (rollout only on standalone replicas).

- :class:`RayStoreCheckpointEngine` is a checkpoint-engine backend registered in verl's
  ``CheckpointEngineRegistry`` as ``checkpoint_engine.backend=tiny_cpu`` (verl imports this module by
  ``checkpoint_engine.custom_backend_module``, in the driver and in each rollout worker): the actor's weights
  go to the rollout workers through a named Ray actor (:class:`Mailbox`), where NCCL/NIXL would move them.
- :func:`init_standalone` is ``TinyReplica.init_standalone``: the replica's server and one verl
  ``CheckpointEngineWorker`` on CPU (verl's own would take a GPU resource pool), its server adapter
  :class:`TinyAdapter` loading the received weights into the server.
- :class:`TinySepWorkerGroup` is the actor worker group with ``DetachActorWorker``'s extra methods
  (``save_model_to_cpu`` / ``restore_model_from_cpu`` / ``clear_cpu_model``) and the checkpoint-engine
  sender side (``execute_checkpoint_engine``, ``update_weights`` with a non-naive backend).
"""

from __future__ import annotations

import asyncio
import copy
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ray
import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry

from integrations._verl_cpu import TinyWorkerGroup

BACKEND = "tiny_cpu"
MODULE = __name__  # checkpoint_engine.custom_backend_module
MAILBOX = "tiny_cpu_weights"


class Mailbox:
    """A named async Ray actor holding the latest weights sent, by version; ``get`` waits for the one asked."""

    def __init__(self) -> None:
        self.state: Any = None
        self.version: Any = None
        self.posted = asyncio.Event()

    def put(self, state: dict[str, torch.Tensor], version: int | None) -> None:
        self.state, self.version = state, version
        self.posted.set()

    async def get(self, version: int | None) -> dict[str, torch.Tensor]:
        while self.version != version or self.state is None:
            self.posted.clear()
            await self.posted.wait()
        return self.state


_BOX: list[Any] = []  # this process's handle: Ray ends a named actor once no process holds one


def _mailbox() -> Any:
    if not _BOX:
        _BOX.append(ray.remote(num_cpus=0)(Mailbox).options(name=MAILBOX, get_if_exists=True).remote())
    return _BOX[0]


@CheckpointEngineRegistry.register(BACKEND)
class RayStoreCheckpointEngine(CheckpointEngine):
    """Rank 0 (the actor) posts the full state dict; the other ranks (rollout workers) read it."""

    def __init__(self, bucket_size: int, **_: Any) -> None:
        self.bucket_size, self.rank, self.box = bucket_size, None, None

    def prepare(self) -> dict[str, Any]:
        return {"mailbox": MAILBOX}

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]) -> tuple:
        world = actor_wg_world_size + rollout_world_size
        mailbox = metadata[0]["mailbox"]
        actor = {"rank": list(range(actor_wg_world_size)), "mailbox": [mailbox] * actor_wg_world_size}
        rollout = {"rank": list(range(actor_wg_world_size, world)), "mailbox": [mailbox] * rollout_world_size}
        return actor, rollout

    def init_process_group(self, rank: int, mailbox: str) -> None:
        self.rank, self.box = rank, _mailbox()

    def finalize(self) -> None:
        self.rank, self.box = None, None

    async def send_weights(self, weights: Any, global_steps: int | None = None) -> None:
        state = {name: tensor.detach().clone() for name, tensor in weights}
        await self.box.put.remote(state, global_steps)

    async def receive_weights(self, global_steps: int | None = None) -> Any:
        state = await self.box.get.remote(global_steps)
        for name, tensor in state.items():
            yield name, tensor


class TinyAdapter:
    """The rollout worker's server adapter: the received weights, loaded into the replica's server."""

    def __init__(self, server: Any) -> None:
        self.server, self.replica_rank, self.is_leader_rank = server, 0, True

    async def update_weights(self, weights: Any, global_steps: int | None = None, **_: Any) -> None:
        state = {name: tensor.clone() async for name, tensor in weights}
        await self.server.load_weights.remote(state, global_steps)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def init_standalone(replica: Any) -> None:
    """``RolloutReplica.init_standalone`` on CPU: the server, then a ``CheckpointEngineWorker`` feeding it."""
    from verl.checkpoint_engine.base import CheckpointEngineWorker
    from verl.workers.rollout.replica import RolloutMode

    replica.rollout_mode = RolloutMode.STANDALONE
    await replica.launch_servers()
    env = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port())}
    env["LOCAL_RANK"] = "0"
    worker = (
        ray.remote(CheckpointEngineWorker)
        .options(num_cpus=0, runtime_env={"env_vars": env})
        .remote(
            rollout_config=replica.config,
            model_config=replica.model_config,
            server_adapter=TinyAdapter(replica.server_handle),
        )
    )
    replica.workers = [worker]


class TinySepWorkerGroup(TinyWorkerGroup):
    """:class:`TinyWorkerGroup` with what verl's separate-async trainer asks of ``DetachActorWorker``."""

    def __init__(self, config: Any, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.engine = RayStoreCheckpointEngine(bucket_size=0)
        self.saved: dict[int, Any] = {}
        self.syncs = 0

    def execute_checkpoint_engine(self, method: list[str], **kwargs: list[Any]) -> list[Any]:
        result = getattr(self.engine, method[0])(**{k: v[0] for k, v in kwargs.items()})
        return [ray.put(result)]

    def update_weights(self, global_steps: int | None = None, mode: str = "naive") -> list[Any]:
        if mode == "naive":
            return super().update_weights(global_steps, mode)
        weights = ((k, v) for k, v in self.model.state_dict().items())
        with ThreadPoolExecutor(1) as pool:  # verl calls this inside its own event loop
            pool.submit(asyncio.run, self.engine.send_weights(weights, global_steps)).result()
        self.syncs += 1
        return [ray.put({})]

    def save_model_to_cpu(self, n: int) -> None:
        self.saved[n] = copy.deepcopy(self.model.state_dict())

    def restore_model_from_cpu(self, n: int) -> None:
        if n in self.saved:
            self.model.load_state_dict(self.saved[n])

    def clear_cpu_model(self, n: int) -> None:
        self.saved.pop(n, None)


def setup_standalone(trainer: Any) -> None:
    """What ``PPOTrainerSeparateAsync._setup`` adds to ``PPOTrainer._setup``: the standalone replicas and their
    checkpoint engine manager (verl's own code, copied; the replicas are ``TinyReplica`` on CPU)."""
    from verl.checkpoint_engine import CheckpointEngineManager
    from verl.trainer.ppo.v1.trainer_separate_async import HybridEngineMode
    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.rollout.llm_server import LLMServerManager

    hybrid = len(trainer.llm_server_manager.rollout_replicas)
    trainer.standalone_server_manager = LLMServerManager.create(config=trainer.config, start_rank=hybrid)
    engine = omega_conf_to_dataclass(trainer.config.actor_rollout_ref.rollout.checkpoint_engine)
    trainer.standalone_checkpoint_manager = CheckpointEngineManager(
        config=engine, actor_wg=trainer.actor_rollout_wg, replicas=trainer.standalone_server_manager.get_replicas()
    )
    trainer.current_mode = HybridEngineMode.TRAINER
