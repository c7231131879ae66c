"""``filter``: dynamic difficulty filtering. Zero-signal groups are dropped (as DAPO) and a prompt
whose group was too easy is retired for the rest of the run: every later encounter passes it over."""

from __future__ import annotations

from snooze.core._memory import RETIRED, PromptMemory
from snooze.core.policies.base import Changes, Policy, Report, register_policy

__all__ = ["Filter"]


@register_policy("filter")
class Filter(Policy):
    """Retire too-easy prompts (the ``RETIRED`` flag; the draw walk passes blocked prompts over)."""

    def report(self, memory: PromptMemory, report: Report) -> Changes:
        p = report.prompts()
        flags = memory.columns["flags"]
        before = flags[p.rows]
        fresh = (p.easy > 0) & ((before & RETIRED) == 0)
        flags[p.rows[fresh]] |= RETIRED
        return Changes(retired=fresh)
