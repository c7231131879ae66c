"""``research/bimodal_pool.py``: which prompts a bimodal pool keeps (docs/reference-experiment.md, the bimodal pool)."""

from __future__ import annotations

from bimodal_pool import split


def _row(dataset: str, pid: str, correct: int, model: str = "base") -> dict:
    return {"dataset": dataset, "id": pid, "model": model, "rewards": [1.0] * correct + [0.0] * (16 - correct)}


ROWS = [_row("rev", f"r{k}", k) for k in (0, 11, 12, 14, 15, 16)] + [_row("count", f"c{k}", k) for k in (0, 1, 13)]


def test_solved_below_keeps_solved_but_not_mastered_prompts() -> None:
    drop, counts = split(ROWS, 0.75, 0.0, solved_from={"rev"}, unsolved_from={"rev"}, solved_below=0.9)
    assert sorted(drop["rev"]) == ["r11", "r15", "r16"]  # 12/16 and 14/16 kept as solved; 0/16 as unsolved
    assert sorted(drop["count"]) == ["c0", "c1", "c13"]  # a dataset in neither list keeps nothing
    assert counts["rev"] == {"solved": 2, "unsolved": 1, "dropped": 3}


def test_without_an_upper_bound_every_solved_prompt_stays() -> None:
    drop, counts = split(ROWS, 0.75, 1 / 16)
    assert drop == {"rev": ["r11"]}  # any dataset: count's 13/16 is solved too
    assert counts["rev"]["solved"] == 4 and counts["count"] == {"solved": 1, "unsolved": 2, "dropped": 0}
