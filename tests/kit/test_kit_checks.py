"""The kit's one rule per kind of value (issue 50): each check worded once, and the callers that wrote the same
check out again now ask it, with the same error class and a message as clear."""

from __future__ import annotations

import numpy as np
import pytest

import snooze
from snooze._kit.checks import as_bool, as_real


@pytest.mark.parametrize("value", [True, False, np.bool_(True), np.bool_(False)])
def test_a_bool_is_taken_as_a_python_bool(value: object) -> None:
    got = as_bool(value, "flag")
    assert type(got) is bool and got == bool(value)


@pytest.mark.parametrize(
    ("value", "what", "message"),
    [
        ("no", "flag", "flag='no': must be True or False"),
        (0, "flag", "flag=0: must be True or False"),
        (None, "f(flag)", r"f\(flag=None\): must be True or False"),
        (10**400, "flag", "flag=<an integer of 1329 bits>: must be True or False"),
    ],
)
def test_anything_else_is_no_bool(value: object, what: str, message: str) -> None:
    with pytest.raises(snooze.ConfigError, match=f"^{message}$"):
        as_bool(value, what)


def test_a_real_above_its_low_bound() -> None:
    assert as_real(2e-3, "lr", 0.0, above=True) == 2e-3 and as_real(1, "p", 0.0, 1.0, above=True) == 1.0
    for value, high, message in [
        (0.0, np.inf, r"lr=0.0: must be a finite number > 0"),
        (np.inf, np.inf, r"lr=inf: must be a finite number > 0"),
        (0, 1.0, r"lr=0: must be a number in \(0, 1\]"),
        (True, 1.0, r"lr=True: must be a number in \(0, 1\]"),
    ]:
        with pytest.raises(snooze.ConfigError, match=f"^{message}$"):
            as_real(value, "lr", 0.0, high, above=True)
    with pytest.raises(snooze.ConfigError, match=r"^x=-1: must be a finite number >= 0$"):
        as_real(-1, "x", 0.0)  # a closed bound reads as before


def test_the_callers_ask_the_kit() -> None:
    """One caller of each replaced check: the same class, the kit's wording."""
    from snooze.experiments.compare import ARMS, _seed_counts
    from snooze.trainer.config import GRPOConfig
    from snooze.trainer.model import ModelConfig
    from snooze.trainer.warmup import WarmupConfig

    cases = [
        (lambda: GRPOConfig(lr=0), r"GRPOConfig.lr=0: must be a finite number > 0"),
        (lambda: GRPOConfig(kl_coef=-1.0), r"GRPOConfig.kl_coef=-1.0: must be a finite number >= 0"),
        (lambda: WarmupConfig(target_accuracy=0.0), r"WarmupConfig.target_accuracy=0.0: must be a number in \(0, 1\]"),
        (lambda: WarmupConfig(per_task="no"), r"WarmupConfig.per_task='no': must be True or False"),
        (lambda: WarmupConfig(batch_size=True), r"WarmupConfig.batch_size=True: must be an integer >= 1"),
        (lambda: ModelConfig(n_layer=True), r"ModelConfig.n_layer=True: must be an integer >= 1"),
        (lambda: snooze.SchedulerConfig(shuffle="no"), r"shuffle='no': must be True or False"),
        (lambda: snooze.Scheduler({"a": [{"id": "a"}]}, seed=-1), r"seed=-1: must be an integer >= 0"),
        (lambda: _seed_counts([ARMS["grpo"]], 2, {"grpo": 0}), r"seeds_of\['grpo'\]=0: must be an integer >= 1"),
        (lambda: _seed_counts([ARMS["grpo"]], 1.5, {}), r"seeds=1.5: must be an integer >= 1"),
    ]
    for make, message in cases:
        with pytest.raises(snooze.ConfigError, match=f"^{message}$"):
            make()
    assert WarmupConfig(per_task=np.bool_(False)).per_task is False  # stored as Python's (it goes into JSON)
    sched = snooze.Scheduler({"a": [{"id": "a"}]})
    with pytest.raises(snooze.ConfigError, match=r"^set_excluded\(excluded='yes'\): must be True or False$"):
        sched.set_excluded("a", ["a"], "yes")
