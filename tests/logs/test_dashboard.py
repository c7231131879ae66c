"""The five metrics to watch and the names scheduler metrics are logged under (``snooze.logs.dashboard``).

Every key a scheduler emits, under every policy and a two-dataset mix, gets one framework name, never with a
repeated ``snooze/`` prefix, and docs/metrics.md lists each as the user sees it. The adapters' logs are
checked key by key in tests/integrations (test_trl.py, test_verl.py), the reference trainer's in
tests/trainer/test_loop.py."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import snooze
from snooze.logs import DASHBOARD, METRICS_MODES, check_metrics_mode, framework_metrics, logged_name
from snooze.logs.dashboard import select

ROOT = Path(__file__).resolve().parents[2]
POLICIES = [("dynamic_sampling", {}), ("snooze", {"factor": 1}), ("predictive", {}), ("filter", {}), ("grpo", {})]


def _keys() -> set[str]:
    """Every key of a step's metrics under each built-in policy, two datasets in quota mode (names as ``<name>``)."""
    rng = np.random.default_rng(0)
    keys: set[str] = set()
    for policy, options in POLICIES:
        config = snooze.SchedulerConfig(batch_size=4, group_size=4, mix="quota", policy=policy, options=options)
        data = {"a": [{"id": i} for i in range(40)], "b": [{"id": i} for i in range(30)]}
        sched = snooze.Scheduler(data, config, seed=0)
        for _ in range(3):
            batch = sched.step(lambda c: (rng.random((len(c), 4)) < 0.5).astype(float))
            keys |= {re.sub(r"^dataset/[ab]/", "dataset/<name>/", k) for k in batch.metrics}
    return keys


def test_every_key_has_one_framework_name_with_the_prefix_once() -> None:
    keys = _keys()
    names = {logged_name(k) for k in keys}
    assert len(names) == len(keys) > 60  # one name per key: no two keys meet
    assert all(n.startswith("snooze/") and not n.startswith("snooze/snooze/") for n in names)
    assert {logged_name("snooze/skipped"), logged_name("snooze/audit/given_up")} == {
        "snooze/skipped",
        "snooze/audit/given_up",
    }  # the normative names, as SPEC gives them
    assert set(DASHBOARD) <= keys  # the five are there under every policy


def test_docs_metrics_lists_every_key_as_each_framework_logs_it() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text()
    section = text.split("## Each key as TRL and verl log it", 1)[1]
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \| ([^|]*) \|$", section, re.M)
    listed = {key: (name, compact.strip()) for key, name, compact in rows}
    assert set(listed) == _keys()
    for key, (name, compact) in listed.items():
        assert name == logged_name(key), key
        assert (compact == "yes") == (key in DASHBOARD), key


def test_compact_keeps_the_five_and_what_is_asked() -> None:
    metrics = {"gen/rounds": 2.0, "groups/signal": 3.0, "total/gen_groups": 9.0, "snooze/skipped": 1.0, "step": 4}
    assert select(metrics, "full") == metrics
    assert select(metrics, "compact") == {"gen/rounds": 2.0, "snooze/skipped": 1.0}
    assert select(metrics, "compact", keep=("total/", "step")) == {
        "gen/rounds": 2.0,
        "snooze/skipped": 1.0,
        "total/gen_groups": 9.0,
        "step": 4,
    }
    assert framework_metrics(metrics, "compact") == {"snooze/gen/rounds": 2.0, "snooze/skipped": 1.0}


@pytest.mark.parametrize("bad", ["short", "", None, 1, "FULL"])
def test_a_mode_that_is_not_one_is_refused_naming_the_option(bad: Any) -> None:
    with pytest.raises(snooze.ConfigError, match=r"snooze_metrics=.*must be one of full, compact"):
        check_metrics_mode(bad, "snooze_metrics")
    assert METRICS_MODES == ("full", "compact")


def test_the_reference_trainers_mode_is_checked() -> None:
    pytest.importorskip("torch")
    from snooze.trainer.config import TrainConfig

    with pytest.raises(snooze.ConfigError, match="TrainConfig.metrics='short'"):
        TrainConfig(metrics="short")
    assert TrainConfig().metrics == "full"  # (the run itself: tests/trainer/test_loop.py)


@pytest.mark.parametrize("bad", [1, None, b"gen/rounds"])
def test_logged_name_refuses_a_name_that_is_no_str(bad: Any) -> None:
    with pytest.raises(snooze.ConfigError, match="logged_name"):
        logged_name(bad)


@pytest.mark.parametrize("bad", [None, [1, 2], {1: 1}, "gen/rounds"])
@pytest.mark.parametrize("mode", ["full", "compact"])
def test_framework_metrics_refuse_what_is_no_mapping_of_names(bad: Any, mode: str) -> None:
    with pytest.raises(snooze.ConfigError, match="metrics"):
        framework_metrics(bad, mode)


@pytest.mark.parametrize("bad", ["train/loss", None, 3, [1], ["ok", None]])
@pytest.mark.parametrize("mode", ["full", "compact"])
def test_select_refuses_a_keep_that_is_no_list_of_names(bad: Any, mode: str) -> None:
    """A bare str is refused, not taken as its characters ('t', 'r', ... kept; 'train/loss' lost)."""
    with pytest.raises(snooze.ConfigError, match="keep"):
        select({"train/loss": 1.0, "t": 2.0}, mode, keep=bad)
    assert select({"train/loss": 1.0, "t": 2.0}, "compact", keep=["train/loss"]) == {"train/loss": 1.0}
