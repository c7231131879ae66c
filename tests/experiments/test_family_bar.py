"""The bars a candidate default is held to (``family_table.BAR``, issue 49's; ``ROLLOUT_BAR``, issue 52's): each
term can fail the candidate on its own, at its edge."""

from __future__ import annotations

import math
from typing import Any

import pytest

from snooze.experiments.family_table import BAR, ROLLOUT_BAR, meets_rollout_bar, qualifies


def _entry(**kw: Any) -> dict[str, Any]:
    base = {"mean_gap": 0.0, "interval": [-0.4, 0.4], "worst_regime_gap": -0.5, "saving": 1.7, "saving_tokens": 1.6}
    return {**base, **kw}


def test_each_term_of_the_bar_fails_a_candidate_on_its_own() -> None:
    assert qualifies(_entry()) and meets_rollout_bar(_entry(), None)
    at_edges = _entry(mean_gap=-0.5, interval=[-1.0, 0.0], worst_regime_gap=-1.5, saving=1.6)
    assert qualifies(at_edges) and meets_rollout_bar(at_edges, None)
    for failing in (
        _entry(mean_gap=-0.51),
        _entry(interval=[-1.01, 0.0]),
        _entry(worst_regime_gap=-1.51),
    ):
        assert not qualifies(failing) and not meets_rollout_bar(failing, None)
    # the saving: 1.2x is issue 49's bar, 1.6x issue 52's
    assert BAR["saving"] == 1.2 and ROLLOUT_BAR["saving"] == 1.6
    assert qualifies(_entry(saving=1.59)) and not meets_rollout_bar(_entry(saving=1.59), None)
    assert not qualifies(_entry(saving=1.19))


@pytest.mark.parametrize("recommended_tokens,meets", [(1.5, True), (1.6, False), (1.7, False)])
def test_the_rollout_bar_asks_fewer_tokens_than_the_recommended_setting(recommended_tokens: float, meets: bool) -> None:
    """Fewer tokens than the recommended setting: a larger token saving over DAPO than its (1.6x here)."""
    assert meets_rollout_bar(_entry(), _entry(saving_tokens=recommended_tokens)) is meets
    assert not meets_rollout_bar(_entry(saving_tokens=math.nan), _entry(saving_tokens=1.0))  # unknown: not shown
