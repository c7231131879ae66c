"""TrainConfig refuses a seed, a completion length or an update config the loop cannot use (issue 21)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from snooze.core.errors import ConfigError
from snooze.experiments.profiles import PROFILES, train_config
from snooze.trainer.config import MAX_NEW_TOKENS, MAX_NEW_TOKENS_LIMIT, GRPOConfig, TrainConfig


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("max_new_tokens", -1, r"TrainConfig.max_new_tokens=-1: must be an integer in \[1, 40\]"),
        ("max_new_tokens", 0, r"TrainConfig.max_new_tokens=0: must be an integer in \[1, 40\]"),
        ("max_new_tokens", "x", r"TrainConfig.max_new_tokens='x': must be an integer"),
        ("max_new_tokens", 1.5, r"TrainConfig.max_new_tokens=1.5: must be an integer"),
        ("max_new_tokens", True, r"TrainConfig.max_new_tokens=True: must be an integer"),
        ("max_new_tokens", 10**9, r"TrainConfig.max_new_tokens=1000000000: must be an integer in \[1, 40\]"),
        ("seed", -1, r"TrainConfig.seed=-1: must be an integer in \[0, 9223372036854775807\]"),
        ("seed", "x", r"TrainConfig.seed='x': must be an integer"),
        ("seed", 1.5, r"TrainConfig.seed=1.5: must be an integer"),
        ("seed", None, r"TrainConfig.seed=None: must be an integer"),
        ("seed", math.nan, r"TrainConfig.seed=nan: must be an integer"),
        ("seed", 2**64, r"TrainConfig.seed=18446744073709551616: must be an integer in \[0, 9223372036854775807\]"),
        pytest.param("seed", 10**5000, r"TrainConfig.seed=<an integer of 16610 bits>: must", id="seed-huge"),
        ("grpo", None, r"TrainConfig.grpo=None: must be a GRPOConfig"),
        ("grpo", {}, r"TrainConfig.grpo=\{\}: must be a GRPOConfig"),
        ("grpo", "x", r"TrainConfig.grpo='x': must be a GRPOConfig"),
    ],
)
def test_a_field_the_loop_cannot_use_is_a_config_error(field: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        TrainConfig(**{field: value})


@pytest.mark.parametrize("seed", [-1, "x", 1.5, None])
def test_train_config_of_a_profile_checks_the_seed(seed: Any) -> None:
    with pytest.raises(ConfigError, match="TrainConfig.seed="):
        train_config(PROFILES["quick"], seed)


def test_valid_values_are_kept_as_they_were() -> None:
    cfg = TrainConfig()
    assert (cfg.max_new_tokens, cfg.seed, cfg.grpo) == (MAX_NEW_TOKENS, 0, GRPOConfig())
    edge = TrainConfig(max_new_tokens=MAX_NEW_TOKENS_LIMIT, seed=2**63 - 1, grpo=GRPOConfig(kl_coef=0.1))
    assert (edge.max_new_tokens, edge.seed, edge.grpo.kl_coef) == (40, 2**63 - 1, 0.1)
    numpy = TrainConfig(max_new_tokens=np.int64(1), seed=np.int32(7))
    assert (type(numpy.max_new_tokens), type(numpy.seed), numpy.seed) == (int, int, 7)
    assert train_config(PROFILES["default"], 2).seed == 2


def test_the_limit_is_the_policy_position_table() -> None:
    from snooze.trainer.model import ModelConfig

    assert MAX_NEW_TOKENS_LIMIT == ModelConfig().max_len
