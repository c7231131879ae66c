"""The prompt memory as code outside the scheduler meets it: a policy replayed over a reward log
(:mod:`snooze.analysis`) keeps each prompt's columns in one, as the scheduler does, and reads which prompts
are passed over at every encounter. The memory itself (its columns, flags and undo) is the scheduler's part,
:mod:`snooze.core._memory`; these are the two things others need of it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from snooze.core._memory import BLOCKED, PromptMemory
from snooze.core.policies import Policy

__all__ = ["PromptMemory", "policy_memory", "passed_over"]


def policy_memory(prompts: int, policy: Policy) -> PromptMemory:
    """A fresh memory of ``prompts`` prompts (one dataset) with the columns ``policy`` keeps beside the base
    ones (``counter``, ``flags``, ``streak``), every value 0: the memory a run starts with."""
    return PromptMemory([int(prompts)], policy.columns)


def passed_over(flags: Any) -> Any:
    """Whether prompts with these ``flags`` (the ``flags`` column, or one value of it) are blocked: retired or
    excluded, so passed over at every encounter whatever their counter. An array in, a bool array out; a
    number in, a bool out."""
    if isinstance(flags, (int, np.integer)):  # one value (a replay's walk asks per encounter): no array made
        return bool(int(flags) & _BLOCKED)
    return (np.asarray(flags) & BLOCKED) != 0


_BLOCKED = int(BLOCKED)
