"""Policies and skip rules: registered plug-ins that own their per-prompt columns, their skip mask at an
encounter and their update of the prompt memory (see :mod:`snooze.core.policies.base`).

Built in: the policies ``grpo``, ``dynamic_sampling``, ``filter``, ``snooze`` and the skip rules of
``snooze``, ``counter`` and ``history`` (one module each).
"""

# isort: off  (registration order is the order the choices are listed in)
from snooze.core.policies import counter, dynamic_sampling, filter, grpo, history, snooze  # noqa: F401  # noqa: F401

# isort: on
from snooze.core.policies.base import (
    POLICIES,
    SKIP_RULES,
    Changes,
    Column,
    Policy,
    Prompts,
    Registry,
    Report,
    SkipRule,
    make_policy,
    register_policy,
    register_skip_rule,
)

__all__ = [
    "POLICIES",
    "SKIP_RULES",
    "Policy",
    "SkipRule",
    "Report",
    "Prompts",
    "Changes",
    "Column",
    "Registry",
    "register_policy",
    "register_skip_rule",
    "make_policy",
]
