"""Re-padding TRL generation rows across rounds (``snooze.integrations._tensors``)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from snooze.integrations._tensors import concat_rows, count_loss_tokens, inert_copy, take_rows  # noqa: E402


def _round(prompt_w: int, comp_w: int, n: int, start: int) -> dict[str, torch.Tensor]:
    ids = torch.arange(start, start + n).unsqueeze(1)
    return {
        "prompt_ids": ids.repeat(1, prompt_w),
        "prompt_mask": torch.ones(n, prompt_w, dtype=torch.long),
        "completion_ids": ids.repeat(1, comp_w),
        "completion_mask": torch.ones(n, comp_w, dtype=torch.long),
        "advantages": torch.ones(n),
        "num_items_in_batch": torch.tensor(float(n * comp_w)),
    }


def test_concat_left_pads_prompts_and_right_pads_completions() -> None:
    a, b = take_rows(_round(2, 3, 2, 10), torch.tensor([1])), take_rows(_round(4, 1, 2, 20), torch.tensor([0]))
    rows = concat_rows([a, b], pad_token_id=0)
    assert rows["prompt_ids"].tolist() == [[0, 0, 11, 11], [20, 20, 20, 20]]
    assert rows["prompt_mask"].tolist() == [[0, 0, 1, 1], [1, 1, 1, 1]]
    assert rows["completion_ids"].tolist() == [[11, 11, 11], [20, 0, 0]]
    assert rows["completion_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert "num_items_in_batch" not in rows and int(count_loss_tokens(rows)) == 4


def test_inert_rows_add_no_loss_tokens_and_no_advantage() -> None:
    rows = take_rows(_round(2, 3, 2, 0), torch.arange(2))
    pad = inert_copy(rows, 3)
    assert pad["advantages"].abs().sum() == 0 and int(count_loss_tokens(pad)) == 0
    assert int(count_loss_tokens(concat_rows([rows, pad], 0))) == 6
