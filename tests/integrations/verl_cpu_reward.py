"""The reward function of the end-to-end verl test, loaded by verl's ``reward.custom_reward_function.path``.

Rows whose ground truth is ``"easy"`` always score 1 (zero spread: DAPO filters their groups and the
scheduler puts them to sleep); the others score 1 when the first generated word is an odd number, which
the tiny model's samples hit about half the time.
"""

from __future__ import annotations

from typing import Any


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Any = None, **_: Any) -> float:
    if ground_truth == "easy":
        return 1.0
    words = solution_str.split()
    return float(bool(words) and words[0].isdigit() and int(words[0]) % 2 == 1)
