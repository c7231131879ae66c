"""The state envelope (format 1): old states load and continue exactly; what is written is format 1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fixtures.state_v1 import make

import snooze
from snooze.core.checkpoint import load_state

FIXTURES = Path(make.__file__).resolve().parent


def _same_state(got: dict[str, Any], want: dict[str, Any]) -> None:
    """Equal meta (config compared on the fields the old state has) and equal arrays, dtype included."""
    g, w = dict(got["meta"]), dict(want["meta"])
    g["config"] = {k: v for k, v in g["config"].items() if k in w["config"]}
    assert g == w
    assert sorted(got["arrays"]) == sorted(want["arrays"])
    for k, a in want["arrays"].items():
        b = got["arrays"][k]
        assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(b, a), k


@pytest.mark.parametrize("name", sorted(make.SCENARIOS))
def test_a_state_saved_before_the_redesign_loads_and_continues_exactly(name: str) -> None:
    """The checkpoints under tests/fixtures/state_v1 were written by the code before the core redesign
    (ca7b707), mid-step with candidates of two rounds out for rollout; the expected continuation is what
    that code did after loading them (make.py)."""
    expected = json.loads((FIXTURES / f"{name}.expected.json").read_text())
    saved = load_state(FIXTURES / name)
    sched = snooze.Scheduler.load(FIXTURES / name, make.datasets())
    _same_state(sched.state_dict(), saved)  # loaded, then written again: the same format-1 state
    trace = json.loads(json.dumps(make.drive(sched, make.SCENARIOS[name]["steps_after"])))
    assert len(trace) == len(expected["trace"])
    for i, (got, want) in enumerate(zip(trace, expected["trace"])):
        assert got == want, f"{name}: entry {i} of the continuation differs"
    _same_state(sched.state_dict(), load_state(FIXTURES / f"{name}.after"))
