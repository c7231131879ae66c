"""The reference trainer's configuration: :class:`TrainConfig` (the loop) and :class:`GRPOConfig` (the
update). Plain dataclasses without torch, so that building the CLI's options (``snooze compare --help``)
and checking a configuration load nothing heavy; :mod:`snooze.trainer.loop` and :mod:`snooze.trainer.grpo`
use them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from snooze.core.errors import ConfigError

__all__ = ["TrainConfig", "GRPOConfig", "MAX_NEW_TOKENS"]

MAX_NEW_TOKENS = 10
"""Longest completion the built-in tasks need (answers are at most a few characters, plus end of sequence)."""


@dataclass(frozen=True)
class GRPOConfig:
    """The policy update's knobs."""

    lr: float = 1e-4
    """AdamW learning rate."""

    weight_decay: float = 0.0
    """AdamW weight decay."""

    clip_low: float = 0.2
    """Lower clip of the ratio: ``1 - clip_low``."""

    clip_high: float = 0.28
    """Upper clip of the ratio: ``1 + clip_high`` (DAPO's clip-higher keeps exploration alive)."""

    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the frozen base model; 0 turns it off (and skips the base forward)."""

    max_grad_norm: float = 1.0
    """Global gradient-norm clip."""

    updates_per_batch: int = 1
    """Optimizer steps on each training batch; above 1 the ratio leaves 1 and the clip matters."""

    def __post_init__(self) -> None:
        for name in ("lr", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"GRPOConfig.{name}={getattr(self, name)!r}: must be > 0")
        for name in ("weight_decay", "clip_low", "clip_high", "kl_coef"):
            if not getattr(self, name) >= 0:
                raise ConfigError(f"GRPOConfig.{name}={getattr(self, name)!r}: must be >= 0")
        if self.clip_low >= 1:
            raise ConfigError(f"GRPOConfig.clip_low={self.clip_low}: must be below 1 (the ratio is positive)")
        if not (isinstance(self.updates_per_batch, int) and self.updates_per_batch >= 1):
            raise ConfigError(f"GRPOConfig.updates_per_batch={self.updates_per_batch!r}: must be an integer >= 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)



@dataclass(frozen=True)
class TrainConfig:
    """The reference loop's knobs (the scheduler's are in :class:`snooze.SchedulerConfig`)."""

    steps: int = 200
    """Training steps (scheduler steps, one optimizer update each)."""

    eval_every: int = 25
    """Steps between held-out evaluations (greedy, exact match; and sampled with ``eval_samples``)."""

    eval_samples: int = 0
    """Completions per held-out prompt for the sampled accuracy (avg@k at the rollout ``temperature``,
    logged as ``eval/sampled_accuracy``); 0 evaluates greedily only."""

    checkpoint_every: int = 50
    """Steps between checkpoints; 0: only at the start and at the end. A killed run resumes from its
    last checkpoint (rerun the same command); a run may be resumed with another value."""

    temperature: float = 1.0
    """Sampling temperature of the rollouts."""

    max_new_tokens: int = MAX_NEW_TOKENS
    """Longest completion sampled."""

    seed: int = 0
    """Seeds the scheduler's streams and the sampling generator."""

    device: str = "cpu"
    """``cpu`` or ``cuda``."""

    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """The policy update."""

    def __post_init__(self) -> None:
        if not (isinstance(self.eval_samples, int) and self.eval_samples >= 0):
            raise ConfigError(f"TrainConfig.eval_samples={self.eval_samples!r}: must be an integer >= 0 (0: greedy evaluation only)")
        for name in ("steps", "eval_every"):
            if not (isinstance(getattr(self, name), int) and getattr(self, name) >= 1):
                raise ConfigError(f"TrainConfig.{name}={getattr(self, name)!r}: must be an integer >= 1")
        if not (isinstance(self.checkpoint_every, int) and self.checkpoint_every >= 0):
            raise ConfigError(f"TrainConfig.checkpoint_every={self.checkpoint_every!r}: must be an integer >= 0")
        if self.temperature <= 0:
            raise ConfigError(f"TrainConfig.temperature={self.temperature!r}: must be > 0 (rollouts are sampled)")
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ConfigError(f"TrainConfig.device={self.device!r}: must be 'cpu' or 'cuda'")
