"""Generation compute in one unit, the rollout, with tokens beside it (docs/metrics.md, "Cost").

A *rollout* is one sampled completion. Every rollout a step reports is counted, audit rollouts too, and so is
any other compute a rule spends to decide, converted to rollouts:

- a **scoring pass** (a forward-only pass of the current weights over one stored completion of ``T`` tokens, to
  re-score it) counts as :data:`SCORE_PASS_ROLLOUTS` = 1 rollout, and its ``T`` tokens as ``T`` tokens. The
  conversion is by compute: a transformer's forward costs about ``2 * params`` FLOPs a token whether the token is
  sampled or given, so scoring a completion costs what generating it did (without decoding's sequential
  latency, which makes a scoring pass cheaper in wall time, never dearer). Counting it as a whole rollout keeps a
  rule that scores from looking cheaper than it is.

Tokens are what the trainer says it generated (``report(..., tokens=...)``): the count of every completion
token sampled, per group. A group reported without them is counted in ``gen/tokens_missing``, so a token total
that leaves some out says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snooze._kit.checks import as_int, shown
from snooze.core.errors import RewardError

__all__ = ["SCORE_PASS_ROLLOUTS", "cost_rollouts", "cost_tokens", "check_tokens", "check_scoring"]

SCORE_PASS_ROLLOUTS = 1
"""Rollouts one scoring pass counts as (module docstring: the same forward FLOPs a token)."""


def cost_rollouts(rollouts: int, score_passes: int) -> int:
    """Every rollout and scoring pass, in rollouts: ``rollouts + SCORE_PASS_ROLLOUTS * score_passes``."""
    return int(rollouts) + SCORE_PASS_ROLLOUTS * int(score_passes)


def cost_tokens(tokens: int, score_tokens: int) -> int:
    """Tokens generated and tokens scored, one for one (the conversion of :data:`SCORE_PASS_ROLLOUTS`)."""
    return int(tokens) + int(score_tokens)


def check_tokens(tokens: Any, n_groups: int) -> np.ndarray:
    """``tokens`` as an int64 array ``[n_groups]``: each group's generated completion tokens (summed over its
    rollouts), integers >= 0; else a :class:`RewardError` saying what to pass (nothing is recorded)."""
    want = f"pass one integer >= 0 per reported candidate (its rollouts' completion tokens, summed): [{n_groups}]"
    try:
        arr = np.asarray(tokens)
    except Exception as exc:  # any array-like may fail its own way (a tensor that requires grad, a ragged list)
        raise RewardError(f"report(tokens=...) could not be read as an array ({type(exc).__name__}); {want}") from None
    if arr.dtype.kind not in "iu":
        raise RewardError(f"report(tokens=...) must be integers, got an array of {arr.dtype}; {want}")
    if arr.shape != (n_groups,):
        raise RewardError(f"report(tokens=...) has shape {arr.shape}; {want}")
    if arr.size and (arr.min() < 0 or (arr.dtype.kind == "u" and arr.max() > np.iinfo(np.int64).max)):
        i = int(np.argmax(arr < 0)) if arr.min() < 0 else int(np.argmax(arr))
        raise RewardError(f"report(tokens=...)[{i}] = {shown(arr[i].item())}: {want}")
    return arr.astype(np.int64)


def check_scoring(passes: Any, tokens: Any) -> tuple[int, int]:
    """:meth:`Scheduler.report_scoring`'s arguments: two integers >= 0 (else a :class:`ConfigError` naming one)."""
    return as_int(passes, "report_scoring(passes)", 0), as_int(tokens, "report_scoring(tokens)", 0)
