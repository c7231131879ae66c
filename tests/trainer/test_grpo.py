"""GRPO loss on tiny tensors with hand-computed expectations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from snooze.core.errors import ConfigError
from snooze.trainer.config import TrainConfig
from snooze.trainer.grpo import GRPOConfig, grpo_loss


def _case() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    # ratios [[1.5, 0.5], [1.0, 1.1]]; the last token is masked out
    logp = torch.tensor([[math.log(1.5), math.log(0.5)], [0.0, math.log(1.1)]], requires_grad=True)
    old = torch.zeros(2, 2)
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[True, True], [True, False]])
    return logp, old, adv, mask


def test_clipped_token_level_loss_by_hand() -> None:
    logp, old, adv, mask = _case()
    loss, stats = grpo_loss(logp, old, adv, mask, GRPOConfig(clip_low=0.2, clip_high=0.28))
    # row 0 (A=1): ratio 1.5 clipped to 1.28 -> -1.28; ratio 0.5 (below 0.8, min keeps 0.5) -> -0.5
    # row 1 (A=-2): ratio 1 -> +2; masked token ignored. Token-level mean over 3 tokens.
    assert loss.item() == pytest.approx((-1.28 - 0.5 + 2.0) / 3, abs=1e-6)
    assert stats["clip_frac"] == pytest.approx(1 / 3)
    loss.backward()
    # d/dlogp: clipped token 0; -ratio*A/3 elsewhere; masked token 0
    expected = torch.tensor([[0.0, -0.5 / 3], [2.0 / 3, 0.0]])
    assert torch.allclose(logp.grad, expected, atol=1e-6)


def test_kl_penalty_is_k3_to_the_base() -> None:
    logp, old, adv, mask = _case()
    cfg = GRPOConfig(kl_coef=0.5)
    base, _ = grpo_loss(logp, old, adv, mask, cfg)
    ref = logp.detach() + math.log(2.0)  # ref/new = 2 on every token
    loss, stats = grpo_loss(logp, old, adv, mask, cfg, ref_logp=ref)
    k3 = 2.0 - math.log(2.0) - 1.0
    assert stats["kl"] == pytest.approx(k3, abs=1e-6)
    assert loss.item() == pytest.approx(base.item() + 0.5 * k3, abs=1e-6)


def test_on_policy_ratio_is_one_and_gradient_is_reinforce() -> None:
    logp = torch.tensor([[-1.0, -2.0]], requires_grad=True)
    loss, stats = grpo_loss(logp, logp.detach(), torch.tensor([3.0]), torch.ones(1, 2, dtype=torch.bool), GRPOConfig())
    loss.backward()
    assert stats["ratio"] == pytest.approx(1.0)
    assert torch.allclose(logp.grad, torch.tensor([[-1.5, -1.5]]))


@pytest.mark.parametrize(
    "field,value",
    [("lr", 0.0), ("clip_low", 1.0), ("kl_coef", -1.0), ("updates_per_batch", 0), ("updates_per_batch", True)],
)
def test_bad_config_is_a_config_error(field: str, value: float) -> None:
    with pytest.raises(ConfigError, match=field):
        GRPOConfig(**{field: value})


@pytest.mark.parametrize("field", ["steps", "eval_every", "checkpoint_every", "eval_samples"])
def test_train_config_counts_are_integers_not_bools_and_numpy_ones_are_kept_as_int(field: str) -> None:
    with pytest.raises(ConfigError, match=f"TrainConfig.{field}=True: must be an integer"):
        TrainConfig(**{field: True})
    value = getattr(TrainConfig(**{field: np.int64(2)}), field)
    assert value == 2 and type(value) is int  # written to config.json as it is
