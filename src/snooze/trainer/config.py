"""The reference trainer's configuration: :class:`TrainConfig` (the loop) and :class:`GRPOConfig` (the
update). Plain dataclasses without torch, so that building the CLI's options (``snooze compare --help``)
and checking a configuration load nothing heavy; :mod:`snooze.trainer.loop` and :mod:`snooze.trainer.grpo`
use them.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from snooze.core._checks import finite_float, is_int, shown
from snooze.core.errors import ConfigError

__all__ = ["TrainConfig", "GRPOConfig", "MAX_NEW_TOKENS", "MIN_TEMPERATURE", "check_temperature", "check_device"]

MAX_NEW_TOKENS = 10
"""Longest completion the built-in tasks need (answers are at most a few characters, plus end of sequence)."""

MIN_TEMPERATURE = 1e-3
"""Lowest sampling temperature accepted. At 0.001 two tokens whose logits differ by 0.1 already have odds
of e^-100 (4e-44, at the end of float32's range): a lower temperature differs from greedy decoding only
on near-ties, and the logits divided by it overflow float32 (infinite, then NaN probabilities) below
about 1e-37 for logits of 10."""


@dataclass(frozen=True)
class GRPOConfig:
    """The policy update's knobs."""

    lr: float = 1e-4
    """AdamW learning rate: a finite number > 0."""

    weight_decay: float = 0.0
    """AdamW weight decay: a finite number >= 0."""

    clip_low: float = 0.2
    """Lower clip of the ratio: ``1 - clip_low``, with ``clip_low`` in [0, 1)."""

    clip_high: float = 0.28
    """Upper clip of the ratio: ``1 + clip_high`` (DAPO's clip-higher keeps exploration alive); finite, >= 0."""

    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the frozen base model; 0 turns it off (and skips the base forward)."""

    max_grad_norm: float = 1.0
    """Global gradient-norm clip: a finite number > 0."""

    updates_per_batch: int = 1
    """Optimizer steps on each training batch; above 1 the ratio leaves 1 and the clip matters."""

    def __post_init__(self) -> None:
        # every knob finite: an infinite one (--lr inf) turns the weights to NaN at the first update
        for name in ("lr", "max_grad_norm"):
            if finite_float(getattr(self, name)) is None or not getattr(self, name) > 0:
                raise ConfigError(f"GRPOConfig.{name}={shown(getattr(self, name))}: must be a finite number > 0")
        for name in ("weight_decay", "clip_low", "clip_high", "kl_coef"):
            if finite_float(getattr(self, name)) is None or not getattr(self, name) >= 0:
                raise ConfigError(f"GRPOConfig.{name}={shown(getattr(self, name))}: must be a finite number >= 0")
        if self.clip_low >= 1:
            raise ConfigError(f"GRPOConfig.clip_low={self.clip_low}: must be below 1 (the ratio is positive)")
        check_int(self, "updates_per_batch", 1)

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
    """Sampling temperature of the rollouts: finite, at least 0.001 (``MIN_TEMPERATURE``: lower samples
    as greedy decoding does, and overflows float32 further down)."""

    max_new_tokens: int = MAX_NEW_TOKENS
    """Longest completion sampled."""

    seed: int = 0
    """Seeds the scheduler's streams and the sampling generator."""

    device: str = "cpu"
    """``cpu``, ``cuda`` or ``cuda:N``; a CUDA device must be there (checked when the config is made)."""

    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """The policy update."""

    def __post_init__(self) -> None:
        check_int(self, "eval_samples", 0, " (0: greedy evaluation only)")
        for name in ("steps", "eval_every"):
            check_int(self, name, 1)
        check_int(self, "checkpoint_every", 0)
        check_temperature(self.temperature, "TrainConfig.temperature")
        check_device(self.device, "TrainConfig.device")


def check_int(config: Any, name: str, minimum: int, note: str = "") -> None:
    """Field ``name`` of the frozen dataclass ``config`` is an integer (any integer type but ``bool``,
    kept as a Python ``int``) of at least ``minimum``, else a :class:`ConfigError` naming it."""
    value = getattr(config, name)
    if not (is_int(value) and value >= minimum):
        raise ConfigError(f"{type(config).__name__}.{name}={value!r}: must be an integer >= {minimum}{note}")
    object.__setattr__(config, name, int(value))


def check_temperature(value: Any, what: str, greedy: bool = False) -> float:
    """A sampling temperature: a finite number >= :data:`MIN_TEMPERATURE` (or 0, greedy, where ``greedy``)."""
    t = finite_float(value)
    if t is None or not (t >= MIN_TEMPERATURE or (greedy and t == 0)):
        zero = "0 (greedy) or " if greedy else ""
        raise ConfigError(
            f"{what}={shown(value)}: must be {zero}a finite number >= {MIN_TEMPERATURE:g} (below it sampling is greedy in "
            "effect and the scaled logits overflow)"
        )
    return t


def check_device(device: Any, what: str) -> None:
    """``cpu``, or a CUDA device this machine has (``cuda`` is ``cuda:0``): checked now, not at the first tensor
    moved to it (after the warm-up). Imports torch only for a CUDA device."""
    if not isinstance(device, str) or not re.fullmatch(r"cpu|cuda(:[0-9]{1,4})?", device):
        raise ConfigError(f"{what}={device!r}: must be 'cpu', 'cuda' or 'cuda:N'")
    if device == "cpu":
        return
    try:
        import torch
    except ImportError:
        raise ConfigError(f"{what}={device!r}: the reference trainer needs torch (pip install torch)") from None
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        have = (
            f"this machine has {count} CUDA device(s), cuda:0..cuda:{count - 1}"
            if count
            else (
                f"no CUDA device is available here (torch {torch.__version__}, built for CUDA {torch.version.cuda or 'none'})"
            )
        )
        raise ConfigError(f"{what}={device!r}: {have}; use --device cpu or a device that is there")
