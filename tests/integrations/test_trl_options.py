"""The TRL adapter's own numbers, made hostile: ``snooze_config``'s fields that follow ``GRPOConfig``, its keys,
``GRPOConfig.reward_weights`` (the reward range) and ``GRPOConfig.seed`` (the scheduler's seed).

A value is taken as it is or refused with ``IntegrationError`` naming it: ``group_size=4.0`` and
``shuffle=1`` were taken because they compare equal to TRL's, ``{1: 2}`` was a ``TypeError``, a ``NaN``
reward weight gave the range ``(0, 1)`` silently and an infinite one a ``ConfigError`` about a
``reward_range`` the user never set, and ``seed=True`` seeded the scheduler with 1.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import snooze
from snooze._kit.checks import is_int
from snooze.integrations.trl._data import reward_range_of, scheduler_config

TRL = {"batch_size": 2, "group_size": 4, "shuffle": True}
VALUES: list[Any] = [True, False, 0, 1, 2, 4, 2.0, 4.0, 0.5, "4", None, [4], 10**400, math.nan, math.inf, -2]


@settings(max_examples=80, deadline=None)
@given(field=st.sampled_from(sorted(TRL)), value=st.sampled_from(VALUES))
def test_a_field_that_follows_grpo_config_is_taken_only_as_trls_own_value(field: str, value: Any) -> None:
    same = isinstance(value, bool) == isinstance(TRL[field], bool) and (
        isinstance(value, bool) or is_int(value)
    )  # the same kind...
    if same and value == TRL[field]:  # ...and value: taken
        assert getattr(scheduler_config({field: value}, TRL, (0.0, 1.0)), field) == TRL[field]
        return
    with pytest.raises(snooze.IntegrationError, match=f"snooze_config: {field}="):
        scheduler_config({field: value}, TRL, (0.0, 1.0))


def test_a_field_name_that_is_not_a_string_is_refused() -> None:
    with pytest.raises(snooze.IntegrationError, match=r"field names are strings .*\[1\]"):  # was a TypeError
        scheduler_config({1: 2}, TRL, (0.0, 1.0))


@settings(max_examples=60, deadline=None)
@given(weights=st.lists(st.sampled_from([1.0, 0.5, -0.5, 0.0, math.nan, math.inf, -math.inf, 1e308]), min_size=1))
def test_reward_weights_that_are_not_finite_are_refused_naming_them(weights: list[float]) -> None:
    low, high = sum(min(w, 0.0) for w in weights), sum(max(w, 0.0) for w in weights)
    if all(math.isfinite(w) for w in weights) and math.isfinite(high - low):
        assert reward_range_of(weights) == ((low, high) if high > low else (0.0, 1.0))
        return
    with pytest.raises(snooze.IntegrationError, match="GRPOConfig.reward_weights="):
        reward_range_of(weights)


@pytest.mark.trl
def test_a_seed_that_is_not_an_integer_is_refused(tmp_path: Path) -> None:
    """``seed=True`` passes TRL's own seeding (``set_seed(True)``) and seeded the scheduler with 1. (TRL itself
    fails on ``0.9`` or ``-1``, in numpy, before the adapter sees them.)"""
    pytest.importorskip("trl", reason="needs the [trl] extra")
    from datasets import Dataset
    from trl import GRPOConfig

    from integrations.test_trl import RECORDS, Scorer, _model, _tokenizer
    from snooze.integrations.trl import SnoozeGRPOTrainer

    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=8, num_generations=4, report_to=[], use_cpu=True
    )
    args.seed = True
    tok = _tokenizer()
    with pytest.raises(snooze.IntegrationError, match="GRPOConfig.seed=True"):
        SnoozeGRPOTrainer(
            model=_model(len(tok)),
            reward_funcs=Scorer(),
            args=args,
            processing_class=tok,
            train_dataset=Dataset.from_list(RECORDS),
        )
