"""Policies and skip rules: registered plug-ins that own their per-prompt columns, their skip mask at an
encounter and their update of the prompt memory (see :mod:`snooze.core.policies.base`).

Built in: the policies ``grpo``, ``dynamic_sampling``, ``filter``, ``snooze``, ``predictive`` and the
skip rules of ``snooze``, ``counter`` and ``history`` (one module each).
"""

# The built-ins register on import; their order is the order choices are listed in (help, errors).
# isort: off
from snooze.core.policies import grpo  # noqa: F401
from snooze.core.policies import dynamic_sampling  # noqa: F401
from snooze.core.policies import filter  # noqa: F401
from snooze.core.policies import snooze  # noqa: F401
from snooze.core.policies import counter  # noqa: F401
from snooze.core.policies import history  # noqa: F401
from snooze.core.policies import predictive  # noqa: F401  (after history: it uses history's random numbers)

# isort: on
from snooze.core.policies.base import *  # noqa: F403  (the plug-in API: base.__all__)
from snooze.core.policies.base import __all__ as __all__
