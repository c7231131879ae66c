"""Row surgery on TRL's generation output (a dict of ``[N, ...]`` tensors, ``N`` = groups x G).

TRL pads each generation round to its own widths: prompts on the left, completions on the right.
Groups kept from several rounds are therefore re-padded to a common width before they are stacked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from snooze.core.errors import IntegrationError

__all__ = ["take_rows", "concat_rows", "inert_copy", "count_loss_tokens"]

LEFT_PADDED = ("prompt_ids", "prompt_mask")  # TRL left-pads prompts, right-pads everything per-token
SCALARS = ("num_items_in_batch",)  # recomputed after rows are chosen


def _row_keys(out: dict[str, Any], n_rows: int) -> list[str]:
    keys = []
    for key, value in out.items():
        if value is None or key in SCALARS:
            continue
        if not isinstance(value, torch.Tensor) or value.ndim == 0 or value.shape[0] != n_rows:
            raise IntegrationError(
                f"TRL's generation output field {key!r} is not one row per completion; snooze cannot regroup it "
                "(multimodal inputs are not supported by SnoozeGRPOTrainer yet)"
            )
        keys.append(key)
    return keys


def take_rows(out: dict[str, Any], rows: torch.Tensor) -> dict[str, Any]:
    """The rows ``rows`` of every per-completion tensor in ``out`` (scalars are dropped)."""
    n = int(out["advantages"].shape[0])
    return {k: out[k][rows] for k in _row_keys(out, n)}


def _pad_to(t: torch.Tensor, width: int, left: bool, value: float) -> torch.Tensor:
    extra = width - t.shape[1]
    if extra <= 0:
        return t
    return F.pad(t, (extra, 0) if left else (0, extra), value=value)


def concat_rows(parts: Sequence[dict[str, torch.Tensor]], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Stack row dicts from different rounds, re-padding 2-D tensors to the widest one.

    ``*_ids`` tensors pad with ``pad_token_id``; masks and per-token log-probs pad with 0 (masked out).
    """
    if not parts:
        raise IntegrationError("no rows to stack")
    keys = list(parts[0])
    for p in parts[1:]:
        if list(p) != keys:
            raise IntegrationError(f"generation rounds returned different fields: {sorted(keys)} vs {sorted(p)}")
    merged: dict[str, torch.Tensor] = {}
    for key in keys:
        tensors = [p[key] for p in parts]
        if tensors[0].ndim == 2:
            width = max(t.shape[1] for t in tensors)
            value = float(pad_token_id) if key.endswith("_ids") else 0.0
            tensors = [_pad_to(t, width, key in LEFT_PADDED, value) for t in tensors]
        merged[key] = torch.cat(tensors, dim=0)
    return merged


def inert_copy(rows: dict[str, torch.Tensor], n: int) -> dict[str, torch.Tensor]:
    """``n`` copies of the first row that take no part in the loss (completion mask 0, advantage 0).

    Used only to round a short batch up to what TRL's accumulation split needs.
    """
    out = {k: v[:1].repeat_interleave(n, dim=0).clone() for k, v in rows.items()}
    out["advantages"] = torch.zeros_like(out["advantages"])
    out["completion_mask"] = torch.zeros_like(out["completion_mask"])
    if "tool_mask" in out:
        out["tool_mask"] = torch.zeros_like(out["tool_mask"])
    return out


def count_loss_tokens(rows: dict[str, torch.Tensor]) -> torch.Tensor:
    """TRL's ``num_items_in_batch``: completion tokens that enter the loss."""
    mask = rows["completion_mask"]
    if "tool_mask" in rows:
        mask = mask * rows["tool_mask"]
    return mask.sum()
